package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// bufSize bounds the bytes in flight each way: a writer blocks when its
// peer has not read that much yet, as on a socket with full buffers.
const bufSize = 64 << 10

// Pipe returns the two ends of a buffered in-memory connection: what one
// end writes the other reads. a is the first end's local address, b the
// second's. Unlike net.Pipe, a Write returns once its bytes are buffered
// (up to 64 KiB each way), so both ends may write at once without
// deadlock, as HTTP/1.1 clients and servers do.
//
// Close on one end makes the other's reads return io.EOF once the
// buffered bytes are read, and its writes fail with io.ErrClosedPipe.
// Deadlines work as net.Conn documents. Both ends are safe for concurrent
// use. Pipe must be called inside the synctest bubble that uses it, if any.
func Pipe(a, b Addr) (net.Conn, net.Conn) {
	ab := newHalf()
	ba := newHalf()
	c1 := &conn{in: ba, out: ab, local: a, remote: b, rd: newDeadline(), wd: newDeadline()}
	c2 := &conn{in: ab, out: ba, local: b, remote: a, rd: newDeadline(), wd: newDeadline()}
	return c1, c2
}

// half is one direction of a pipe.
type half struct {
	mu      sync.Mutex
	buf     []byte // bytes in flight are buf[r:]
	r       int
	waiting bool          // someone holds changed: signal must replace it
	eof     bool          // the writing end closed: EOF after buf drains
	gone    bool          // the reading end closed: writes fail, buf dropped
	changed chan struct{} // closed and replaced on every change of the fields above
}

func newHalf() *half { return &half{changed: make(chan struct{})} }

// signal wakes every goroutine waiting on h; h.mu must be held.
func (h *half) signal() {
	if h.waiting {
		close(h.changed)
		h.changed = make(chan struct{})
		h.waiting = false
	}
}

// waitChan returns the channel signal closes; h.mu must be held.
func (h *half) waitChan() <-chan struct{} {
	h.waiting = true
	return h.changed
}

type conn struct {
	in, out       *half
	local, remote Addr
	rd, wd        *deadline
	closeOnce     sync.Once
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "memnet", Source: c.local, Addr: c.remote, Err: err}
}

func (c *conn) Read(p []byte) (int, error) {
	h := c.in
	for {
		h.mu.Lock()
		switch {
		case h.gone:
			h.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		case c.rd.expired():
			h.mu.Unlock()
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		case len(h.buf) > h.r:
			n := copy(p, h.buf[h.r:])
			h.r += n
			if h.r == len(h.buf) {
				h.buf, h.r = h.buf[:0], 0
			}
			h.signal()
			h.mu.Unlock()
			return n, nil
		case h.eof:
			h.mu.Unlock()
			return 0, io.EOF
		case len(p) == 0:
			h.mu.Unlock()
			return 0, nil
		}
		changed := h.waitChan()
		h.mu.Unlock()
		select {
		case <-changed:
		case <-c.rd.wait():
		}
	}
}

func (c *conn) Write(p []byte) (int, error) {
	h := c.out
	written := 0
	for {
		h.mu.Lock()
		switch {
		case h.eof:
			h.mu.Unlock()
			return written, c.opErr("write", net.ErrClosed)
		case h.gone:
			h.mu.Unlock()
			return written, c.opErr("write", io.ErrClosedPipe)
		case c.wd.expired():
			h.mu.Unlock()
			return written, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if room := bufSize - (len(h.buf) - h.r); room > 0 {
			k := min(room, len(p)-written)
			if h.r > 0 && len(h.buf)+k > cap(h.buf) {
				h.buf, h.r = h.buf[:copy(h.buf, h.buf[h.r:])], 0
			}
			h.buf = append(h.buf, p[written:written+k]...)
			written += k
			h.signal()
		}
		if written == len(p) {
			h.mu.Unlock()
			return written, nil
		}
		changed := h.waitChan()
		h.mu.Unlock()
		select {
		case <-changed:
		case <-c.wd.wait():
		}
	}
}

// Close closes both directions of this end. It never fails; a second call
// is a no-op.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.in.mu.Lock()
		c.in.gone = true
		c.in.buf, c.in.r = nil, 0
		c.in.signal()
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.eof = true
		c.out.signal()
		c.out.mu.Unlock()
		c.rd.stop()
		c.wd.stop()
	})
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a settable instant whose passing closes a channel.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed chan struct{} // closed once the deadline has passed
}

func newDeadline() *deadline { return &deadline{passed: make(chan struct{})} }

// set arms the deadline at t; the zero t disarms it, a past t fires it now.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.passed // the timer fired or is firing: wait for its close
	}
	d.timer = nil
	fired := isClosed(d.passed)
	if t.IsZero() {
		if fired {
			d.passed = make(chan struct{})
		}
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		if !fired {
			close(d.passed)
		}
		return
	}
	if fired {
		d.passed = make(chan struct{})
	}
	passed := d.passed
	d.timer = time.AfterFunc(dur, func() { close(passed) })
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

func (d *deadline) expired() bool { return isClosed(d.wait()) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
