package stubserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/timeline"
	"golang.org/x/sys/unix"
)

// heldListener hands over its first primers connections once the
// kernel's reading of each is non-zero (one tick), and each later one
// once it reads five times the smallest of those: a stub that reads its
// sockets late, made on purpose.
type heldListener struct {
	net.Listener
	t       *testing.T
	n       int
	primers int
	first   uint32      // the smallest reading of the primers: one tick
	read    chan uint32 // each handed-over connection's reading, ms
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
	if l.n >= l.primers {
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
			if l.n < l.primers && (l.first == 0 || ms < l.first) {
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
	// The stamps learn the tick from the smallest reading they see: a few
	// arrivals read within a tick teach it (one alone, read late on a
	// loaded host, can teach it several ticks, and the held arrival below
	// would then read 0).
	const primers = 4
	hl := &heldListener{Listener: ln, t: t, primers: primers, read: make(chan uint32, primers+1)}
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 16)
	stamps := noise.NewStamps()
	s, err := New(Config{}, Options{Recorder: rec, Stamps: stamps})
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
	for i := range primers {
		get(fmt.Sprintf("/c/0/r/%d", i))
		<-hl.read
	}
	tick := hl.first
	if st := stamps.Tick(); st != time.Duration(tick)*time.Millisecond {
		// The stub read every primer a tick or more late: the host, not
		// the code under test. Nothing below can be told then.
		t.Skipf("the stamps learned a tick of %v, the kernel's readings say %d ms: the host delayed every primer's read", st, tick)
	}
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
