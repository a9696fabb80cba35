package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// okNext answers every request with a fresh 200 and an empty body, the
// cheapest possible next transport, so the Transport's own cost shows.
type okNext struct{ h http.Header }

func (n okNext) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: n.h, Body: http.NoBody, Request: req}, nil
}

// BenchmarkOverhead measures the success path: the bare next transport, and
// the same wrapped in a Transport with the zero Config (budget timer armed),
// with a caller deadline shorter than the budget (no timer), and with a
// token bucket that never makes it wait, without a retry budget, and with
// a retry budget below its capacity (every success gives tokens back; the
// zero Config's is full, one atomic load). Compare ns/op and allocs/op of
// the sub-benchmarks of one run; the overhead is the difference.
func BenchmarkOverhead(b *testing.B) {
	next := okNext{h: http.Header{"Content-Type": {"text/plain"}}}
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	reqDeadline := req.WithContext(ctx)
	cases := []struct {
		name string
		rt   http.RoundTripper
		req  *http.Request
	}{
		{"bare", next, req},
		{"transport", New(next, Config{}), req},
		{"transport-caller-deadline", New(next, Config{Budget: 2 * time.Hour}), reqDeadline},
		{"transport-paced", New(next, Config{Rate: 1e12, Burst: 1 << 30}), req},
		{"transport-no-retry-budget", New(next, Config{RetryBudget: NoRetryBudget}), req},
		{"transport-budget-refilling", refilling(New(next, Config{})), req},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(c.req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkLoopback is the same comparison through a real http.Transport to
// an httptest server on 127.0.0.1, where the overhead is a share of a real
// request's cost.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"bare", base}, {"transport", New(base, Config{})}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
