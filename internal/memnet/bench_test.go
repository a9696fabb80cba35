package memnet

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkHTTP measures keep-alive GET round trips of a real http.Server
// and http.Transport over loopback TCP (the baseline) and over memnet, in
// the same run; compare the two sub-benchmarks' ns/op.
func BenchmarkHTTP(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	run := func(b *testing.B, l net.Listener, dial func(context.Context, string, string) (net.Conn, error)) {
		srv := &http.Server{Handler: handler}
		go srv.Serve(l)
		defer srv.Close()
		tr := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		url := "http://" + l.Addr().String() + "/"
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("GET", url, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	b.Run("tcp-loopback", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Skip(err)
		}
		var d net.Dialer
		run(b, l, d.DialContext)
	})
	b.Run("net.Pipe", func(b *testing.B) {
		l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		run(b, l, l.dial)
	})
	b.Run("memnet", func(b *testing.B) {
		n := New()
		defer n.Close()
		run(b, n.Listen(), n.DialContext)
	})
}

// pipeListener is the unbuffered alternative memnet is measured against:
// connections from net.Pipe.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return Addr{Host: "pipe", Port: 80} }
