// Package redistest starts a real redis-server for tests: on a free
// loopback port, with no persistence, stopped when the test ends.
//
// Without the redis-server binary (Debian package redis-server) a test
// skips with the reason, or fails when CI=true: CI must install it (.ci/run
// does). $RETRYLAB_REDIS_SERVER names another binary.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string // host:port on 127.0.0.1
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the server's address as a redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Binary returns the redis-server binary, or skips t (fails it under
// CI=true) when there is none.
func Binary(t testing.TB) string {
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

// Start runs a redis-server on a free loopback port and stops it when t
// ends. It fails t when the server does not come up within 10 s.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	var lastErr error
	for range 5 { // a port picked free can be taken before redis binds it
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s, err := start(bin, port)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("redis-server: %v", lastErr)
	return nil
}

func start(bin string, port int) (*Server, error) {
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes",
		"--daemonize", "no", "--loglevel", "warning", "--dir", os.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if log.Len() < 4096 {
				log.WriteString(sc.Text() + "\n")
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.Ping() == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("exited at start:\n%s", log.String())
		case <-time.After(20 * time.Millisecond): // bounded poll of a real process
		}
	}
	s.Stop()
	return nil, fmt.Errorf("not answering on %s after 10s", s.Addr)
}

// Ping sends PING over a fresh connection and checks for PONG.
func (s *Server) Ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
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

// Stop kills the server (SIGKILL, as a crash would) and waits for it. It
// is safe to call more than once.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-s.done
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
