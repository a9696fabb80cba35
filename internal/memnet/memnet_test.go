package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/nettest"
)

// TestConnConformance runs x/net's net.Conn conformance suite (deadlines,
// concurrent use, close semantics). The suite calls t.Run, which a synctest
// bubble forbids, so it runs in real time: its own waits total about half a
// second and only check that blocked calls wake up, so they cannot flake.
func TestConnConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time conformance suite")
	}
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2 = Pipe(Addr{Host: "a", Port: 1}, Addr{Host: "b", Port: 2})
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// TestNetworkConformance does the same over a listener and DialContext.
func TestNetworkConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time conformance suite")
	}
	{
		n := New()
		defer n.Close()
		l := n.Listen()
		nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					t.Errorf("Accept: %v", err)
				}
				accepted <- c
			}()
			c1, err = n.DialContext(context.Background(), "tcp", l.Addr().String())
			if err != nil {
				return nil, nil, nil, err
			}
			c2 = <-accepted
			return c1, c2, func() { c1.Close(); c2.Close() }, nil
		})
	}
}

func TestWriteDoesNotWaitForReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(Addr{}, Addr{})
		defer a.Close()
		defer b.Close()
		// Both ends write before either reads: net.Pipe would deadlock here.
		msg := []byte("hello")
		for _, c := range []net.Conn{a, b} {
			if n, err := c.Write(msg); n != len(msg) || err != nil {
				t.Fatalf("Write(%q) = %d, %v; want %d, nil", msg, n, err, len(msg))
			}
		}
		for _, c := range []net.Conn{a, b} {
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
				t.Fatalf("ReadFull = %q, %v; want %q, nil", got, err, msg)
			}
		}
	})
}

func TestWriteBlocksWhenBufferFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(Addr{}, Addr{})
		defer b.Close()
		big := make([]byte, bufSize+10)
		var n atomic.Int64
		done := make(chan error)
		go func() {
			k, err := a.Write(big)
			n.Store(int64(k))
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write of %d bytes returned (%v) with nobody reading; want it blocked", len(big), err)
		default:
		}
		got, err := io.ReadAll(io.LimitReader(b, int64(len(big))))
		if err != nil || len(got) != len(big) {
			t.Fatalf("ReadAll = %d bytes, %v; want %d, nil", len(got), err, len(big))
		}
		if err := <-done; err != nil || n.Load() != int64(len(big)) {
			t.Fatalf("Write = %d, %v; want %d, nil", n.Load(), err, len(big))
		}
		a.Close()
		if k, err := b.Read(make([]byte, 1)); k != 0 || err != io.EOF {
			t.Fatalf("Read after peer Close = %d, %v; want 0, EOF", k, err)
		}
		if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write after peer Close = %v; want io.ErrClosedPipe", err)
		}
	})
}

func TestReadDeadlineVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(Addr{}, Addr{})
		defer a.Close()
		defer b.Close()
		start := time.Now()
		a.SetReadDeadline(start.Add(3 * time.Second))
		_, err := a.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read past deadline = %v; want os.ErrDeadlineExceeded", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("Read error %v is not a net.Error with Timeout()", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("Read timed out after %v; want exactly 3s of virtual time", got)
		}
		// A past deadline wakes a blocked reader at once (http.Server does
		// this to abort its background read).
		a.SetReadDeadline(time.Time{})
		errc := make(chan error)
		go func() { _, err := a.Read(make([]byte, 1)); errc <- err }()
		synctest.Wait()
		a.SetReadDeadline(time.Unix(1, 0))
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked Read after past deadline = %v; want os.ErrDeadlineExceeded", err)
		}
	})
}

func TestDialErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		if _, err := n.DialContext(context.Background(), "tcp", "nowhere:80"); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(nowhere) = %v; want ErrRefused", err)
		}
		l := n.Listen()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Nobody accepts: the dial waits until its context ends.
		if _, err := n.DialContext(ctx, "tcp", l.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("DialContext with nobody accepting = %v; want context.DeadlineExceeded", err)
		}
		errc := make(chan error)
		go func() {
			_, err := n.DialContext(context.Background(), "tcp", l.Addr().String())
			errc <- err
		}()
		synctest.Wait()
		n.Close()
		if err := <-errc; !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext pending at Close = %v; want ErrRefused", err)
		}
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v; want net.ErrClosed", err)
		}
	})
}

func TestListenAddresses(t *testing.T) {
	n := New()
	defer n.Close()
	a, b := n.Listen(), n.Listen()
	if a.Addr().String() != "mem1:80" || b.Addr().String() != "mem2:80" {
		t.Errorf("Listen addresses = %v, %v; want mem1:80, mem2:80", a.Addr(), b.Addr())
	}
	if a.Addr().Network() != "memnet" {
		t.Errorf("Addr().Network() = %q; want memnet", a.Addr().Network())
	}
}

// TestHTTP runs a real http.Server and http.Transport over the network in
// a bubble: many concurrent requests, a server timeout in virtual time,
// then a clean shutdown (synctest.Test fails if a goroutine is left).
func TestHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		l := n.Listen()
		var served atomic.Int64
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				if r.URL.Path == "/slow" {
					time.Sleep(10 * time.Second) // synctest: virtual time
				}
				body, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, len(body))
			}),
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       30 * time.Second,
		}
		serveErr := make(chan error, 1)
		go func() { serveErr <- srv.Serve(l) }()

		tr := &http.Transport{DialContext: n.DialContext, MaxIdleConnsPerHost: 100}
		hc := &http.Client{Transport: tr}
		base := "http://" + l.Addr().String()
		start := time.Now()

		const clients, each = 50, 20
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := range each {
					body := strings.Repeat("x", 100*c+i) // some bodies span several writes
					path := fmt.Sprintf("/c/%d/r/%d", c, i)
					resp, err := hc.Post(base+path, "text/plain", strings.NewReader(body))
					if err != nil {
						t.Errorf("POST %s: %v", path, err)
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := fmt.Sprintf("POST %s %d", path, len(body)); err != nil || string(got) != want {
						t.Errorf("POST %s = %q, %v; want %q", path, got, err, want)
					}
				}
			})
		}
		wg.Wait()
		if got := served.Load(); got != clients*each {
			t.Errorf("server saw %d requests; want %d", got, clients*each)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("requests took %v of virtual time; want 0 (network I/O is instant)", got)
		}

		// A client timeout fires in virtual time.
		slow := &http.Client{Transport: tr, Timeout: 2 * time.Second}
		start = time.Now()
		_, err := slow.Get(base + "/slow")
		if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Timeout") {
			t.Errorf("GET /slow with 2s timeout = %v; want a timeout", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("timeout fired after %v; want 2s", got)
		}

		tr.CloseIdleConnections()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v; want http.ErrServerClosed", err)
		}
		n.Close()
	})
}

// TestHTTPIdleTimeout checks the server's idle timeout closes a kept-alive
// connection in virtual time, and the transport notices.
func TestHTTPIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l := n.Listen()
		var conns atomic.Int64
		srv := &http.Server{
			Handler:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
			IdleTimeout: 5 * time.Second,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			},
		}
		go srv.Serve(l)
		tr := &http.Transport{DialContext: n.DialContext}
		get := func() {
			t.Helper()
			req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		get()
		time.Sleep(time.Second) // synctest: virtual time
		get()
		if got := conns.Load(); got != 1 {
			t.Errorf("connections after two quick GETs = %d; want 1 (kept alive)", got)
		}
		time.Sleep(10 * time.Second) // synctest: virtual time
		synctest.Wait()
		get()
		if got := conns.Load(); got != 2 {
			t.Errorf("connections after idle timeout = %d; want 2", got)
		}
		tr.CloseIdleConnections()
		srv.Shutdown(context.Background())
	})
}

// TestNetworkMadeOutsideBubble: New creates no channel, so a Network made
// outside the bubble serves inside it (Listen and Dial run inside).
func TestNetworkMadeOutsideBubble(t *testing.T) {
	n := New()
	synctest.Test(t, func(t *testing.T) {
		l := n.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Minute) // synctest, virtual time: virtual: returns at once in real time
			w.Write([]byte("late"))
		})}
		go srv.Serve(l)
		tr := &http.Transport{DialContext: n.DialContext}
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + "/")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "late" || time.Since(start) != time.Minute {
			t.Errorf("GET = %q after %v; want \"late\" after 1m of virtual time", b, time.Since(start))
		}
		tr.CloseIdleConnections()
		srv.Shutdown(context.Background())
		n.Close()
	})
}
