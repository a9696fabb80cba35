// The harness's own plumbing: the timeline's byte count, the stub's
// listener and the transport's dials counted, the connection cap.

package runner

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/internal/memnet"
)

// countingWriter counts the bytes written through it (Summary.TimelineBytes).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// countDials wraps dial to count the harness's own dial failures (not
// those of a canceled request).
func (r *runner) countDials(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			if ctx.Err() == nil && !r.sealed.Load() {
				r.dialErrors.Add(1)
			}
			return nil, err
		}
		return c, nil
	}
}

// countingListener counts Accept errors (descriptor exhaustion, EMFILE,
// above all) other than the listener being closed.
type countingListener struct {
	net.Listener
	errs *atomic.Int64
	once sync.Once
}

// Close closes the listener once: the runner closes it when the run stops
// and the stub's shutdown closes it again, which must not be an error.
func (l *countingListener) Close() error {
	var err error
	l.once.Do(func() { err = l.Listener.Close() })
	return err
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		l.errs.Add(1)
	}
	return c, err
}

// connCap is the transport's MaxConnsPerHost: the requested cap, or in
// real mode, when every client holding its own connection (a descriptor on
// each end of loopback) would not fit under the open-file limit, what fits
// with room for 256 other files.
func connCap(requested, clients int, virtual bool, limit int) int {
	if requested > 0 {
		return requested
	}
	if virtual || limit <= 0 || 2*clients+256 <= limit {
		return 0
	}
	return max(1, (limit-256)/2)
}

// listen opens the stub's listener and the dial the harness reaches it
// by: an in-memory network when virtual (closeNet closes it), else
// loopback TCP on a free port.
func listen(virtual bool) (l net.Listener, dial func(context.Context, string, string) (net.Conn, error), closeNet func(), err error) {
	if virtual {
		nw := memnet.New()
		return nw.Listen(), nw.DialContext, func() { nw.Close() }, nil
	}
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	return l, (&net.Dialer{Timeout: 5 * time.Second}).DialContext, func() {}, nil
}

// transport is the harness's one http.Transport to the stub, shared by
// every client's Caller, dialing through dial (its failures counted).
func (r *runner) transport(dial func(context.Context, string, string) (net.Conn, error)) *http.Transport {
	sc, opts := r.sc, r.opts
	return &http.Transport{
		Proxy:                 nil, // loopback only, whatever the environment says
		DialContext:           r.countDials(dial),
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   sc.Fleet.Clients + 16,
		MaxConnsPerHost:       connCap(opts.MaxConns, sc.Fleet.Clients, opts.Virtual, openFileLimit()),
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 0,
	}
}
