package client

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLoopbackConnectionReuse checks, through a real http.Transport on
// 127.0.0.1, that retried responses are drained and closed so their
// connection is reused, and that a connection reset is retried. Retry-After
// is 0, so nothing waits.
func TestLoopbackConnectionReuse(t *testing.T) {
	var conns, n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1, 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, strings.Repeat("x", 10000))
		case 3:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close() // reset: no response
			}
		default:
			io.WriteString(w, "ok")
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := New(base, seeded(Config{Base: 1})).RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || n.Load() != 4 {
		t.Errorf("got %q after %d requests; want \"ok\" after 4", b, n.Load())
	}
	// Two 503s on one connection, the reset kills it, the last on a second.
	if c := conns.Load(); c != 2 {
		t.Errorf("connections = %d; want 2: drained responses keep theirs alive", c)
	}
}
