package stubserver

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/timeline"
	"golang.org/x/sys/unix"
)

// heldListener hands over its first connection once the kernel's reading
// of it is non-zero (one tick), and each later one once it reads five
// times that: a stub that reads its sockets late, made on purpose.
type heldListener struct {
	net.Listener
	t     *testing.T
	n     int
	first uint32      // the first connection's reading: one tick
	read  chan uint32 // each handed-over connection's reading, ms
}

func receiptMS(c net.Conn) (uint32, bool) {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil {
		return 0, false
	}
	return info.Last_data_recv, true
}

func (l *heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	want := uint32(1)
	if l.n > 0 {
		want = 5 * l.first
	}
	// The data is in the socket once the client wrote it; the reading
	// moves in kernel ticks, so there is nothing to wait on but time.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ms, ok := receiptMS(c)
		if !ok {
			c.Close()
			l.t.Error("no TCP_INFO reading on a loopback socket")
			return nil, net.ErrClosed
		}
		if ms >= want && ms > 0 {
			if l.n == 0 {
				l.first = ms
			}
			l.n++
			l.read <- ms
			return c, nil
		}
		if time.Now().After(deadline) {
			l.t.Errorf("reading still %d ms, want %d", ms, want)
			l.n++
			l.read <- ms
			return c, nil
		}
		time.Sleep(100 * time.Microsecond) // polling the kernel's tick clock, bounded above
	}
}

// TestArrivalAtReceipt: a request the stub reads several kernel ticks
// after the kernel received it is recorded at its receipt (At), with the
// wait it surely had (Waited): the stub's lateness moves no arrival. An
// arrival read within a tick is not moved.
func TestArrivalAtReceipt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := &heldListener{Listener: ln, t: t, read: make(chan uint32, 2)}
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 16)
	s, err := New(Config{}, Options{Recorder: rec, Stamps: noise.NewStamps()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(hl) }()

	// A raw connection per request, so that each is a fresh socket the
	// listener holds.
	get := func(path string) (sent time.Time) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sent = time.Now()
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return sent
	}
	get("/c/0/r/0")
	tick := <-hl.read
	start, _ := s.Started()
	sent := get("/c/1/r/0")
	reading := <-hl.read
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-served
	rec.Close()

	a := byKey(decodeAttempts(t, &buf))["1/0"]
	ticks := time.Duration(tick) * time.Millisecond
	if a.Waited < int64(reading)*int64(time.Millisecond)-int64(ticks) || a.Waited > int64(reading)*int64(time.Millisecond) {
		t.Errorf("waited %v; want the reading %d ms less at most a tick (%v)", time.Duration(a.Waited), reading, ticks)
	}
	if at, from := time.Duration(a.At), sent.Sub(start); at < from-time.Millisecond || at > from+2*ticks {
		t.Errorf("at %v; want the receipt, within two ticks (%v) after the write at %v", at, 2*ticks, from)
	}
	if a.Done-a.At < a.Waited {
		t.Errorf("done %v, at %v: the answer left before the stub read the request (waited %v)", time.Duration(a.Done), time.Duration(a.At), time.Duration(a.Waited))
	}
}
