package memnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/internal/memnet"
)

// TestVirtualFleet runs a fleet of clients through real http.Transports and
// a real http.Server over an in-memory network, in virtual time: the server
// is down for 5 s and says so with an HTTP-date Retry-After. No retry may
// arrive before that date, and every call succeeds once it passes.
func TestVirtualFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		end := start.Add(5 * time.Second)
		type arrival struct {
			at        time.Duration
			notBefore time.Time
		}
		var mu sync.Mutex
		arrivals := map[string][]arrival{}
		mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			a := arrivals[r.URL.Path]
			if len(a) > 0 && now.Before(a[len(a)-1].notBefore) {
				t.Errorf("%s: retry at %v, before the Retry-After date %v", r.URL.Path, now.Sub(start), a[len(a)-1].notBefore.Sub(start))
			}
			if now.Before(end) {
				arrivals[r.URL.Path] = append(a, arrival{now.Sub(start), end})
				w.Header().Set("Retry-After", end.UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			arrivals[r.URL.Path] = append(a, arrival{now.Sub(start), time.Time{}})
			io.WriteString(w, "ok")
		})
		network := memnet.New()
		l := network.Listen()
		srv := &http.Server{Handler: mux}
		go srv.Serve(l)

		const clients = 50
		var wg sync.WaitGroup
		var transports []*http.Transport
		for i := range clients {
			base := &http.Transport{DialContext: network.DialContext}
			transports = append(transports, base)
			tr := client.New(base, client.Config{Rand: rand.New(rand.NewPCG(uint64(i), 1)), Budget: 20 * time.Second})
			time.Sleep(time.Millisecond) // synctest, virtual time: distinct start instants
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/c/%d/r/0", l.Addr(), i), nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("client %d: status %d; want 200", i, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		for _, b := range transports {
			b.CloseIdleConnections()
		}
		srv.Shutdown(context.Background())
		for path, a := range arrivals {
			if len(a) != 2 || a[1].at != 5*time.Second {
				t.Errorf("%s: arrivals %v; want 2, the retry at exactly 5s", path, a)
			}
		}
		if len(arrivals) != clients {
			t.Errorf("%d logical requests seen; want %d", len(arrivals), clients)
		}
	})
}

// TestVirtualHang: a server that never answers cannot hold a call past its
// budget.
func TestVirtualHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		network := memnet.New()
		l := network.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})}
		go srv.Serve(l)
		base := &http.Transport{DialContext: network.DialContext}
		tr := client.New(base, client.Config{Budget: 7 * time.Second})
		req, _ := http.NewRequest(http.MethodGet, "http://"+l.Addr().String()+"/", nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		if !errors.Is(err, client.ErrBudgetExhausted) || time.Since(start) != 7*time.Second {
			t.Errorf("RoundTrip = %v after %v; want ErrBudgetExhausted after exactly 7s", err, time.Since(start))
		}
		close(release)
		base.CloseIdleConnections()
		srv.Shutdown(context.Background())
	})
}
