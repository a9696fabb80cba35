package clientredis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file starts real redis-servers for the tests: on a free loopback
// port, with no persistence, killed when the test ends. The main module's
// internal/redistest does the same; this module may not require the main
// module, so it has its own. Without the redis-server binary the tests skip
// with the reason, or fail under CI=true ($RETRYLAB_REDIS_SERVER names
// another binary).

// redisServer is a running redis-server.
type redisServer struct {
	t    testing.TB
	bin  string
	port int
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	done chan struct{}
}

// redisBinary returns the redis-server binary, or skips t (fails it under
// CI=true) when there is none.
func redisBinary(t testing.TB) string {
	t.Helper()
	name := "redis-server"
	if env := os.Getenv("RETRYLAB_REDIS_SERVER"); env != "" {
		name = env
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found; CI must install it (apt-get install -y redis-server)", name)
	}
	t.Skipf("%s not found; install it (Debian package redis-server) to run the Redis tests", name)
	return ""
}

// startRedis runs a redis-server on a free loopback port, killed when t
// ends.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	s := &redisServer{t: t, bin: redisBinary(t)}
	var err error
	for range 5 { // a port picked free can be taken before redis binds it
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		s.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if err = s.start(); err == nil {
			t.Cleanup(s.kill)
			return s
		}
	}
	t.Fatalf("redis-server: %v", err)
	return nil
}

// restart starts a new server on the same port after kill: an empty one,
// with no script cached.
func (s *redisServer) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redis-server restart on port %d: %v", s.port, err)
	}
}

func (s *redisServer) start() error {
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	cmd := exec.Command(s.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes",
		"--daemonize", "no", "--loglevel", "warning", "--dir", os.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if log.Len() < 4096 {
				log.WriteString(sc.Text() + "\n")
			}
		}
		cmd.Wait()
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ping(s.Addr) == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited at start:\n%s", log.String())
		case <-time.After(20 * time.Millisecond): // bounded poll of a real process
		}
	}
	s.kill()
	return fmt.Errorf("not answering on %s after 10s", s.Addr)
}

// ping sends PING over a fresh connection and checks for PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// kill kills the server (SIGKILL, as a crash would; a stopped one too) and
// waits for it. It is safe to call more than once.
func (s *redisServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// pause stops the server (SIGSTOP): it holds its connections and answers
// nothing, as a hung server would, until resume.
func (s *redisServer) pause() { syscall.Kill(s.cmd.Process.Pid, syscall.SIGSTOP) }

// resume continues a paused server (SIGCONT).
func (s *redisServer) resume() { syscall.Kill(s.cmd.Process.Pid, syscall.SIGCONT) }

// client returns a go-redis client of the server with its defaults (but
// for what opts change), closed when the test ends. It has one
// connection open, as a running application's would: a first call's dial
// and handshake can take longer than the Limiter's Timeout on a loaded
// machine, which would make it fall back.
func (s *redisServer) client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: s.Addr}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING %s: %v", s.Addr, err)
	}
	return c
}

// admin runs one command on the server with a fresh client.
func (s *redisServer) admin(t testing.TB, args ...any) *redis.Cmd {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...)
}

// heedDeadline sets go-redis's ContextTimeoutEnabled.
func heedDeadline(o *redis.Options) { o.ContextTimeoutEnabled = true }
