package subjects

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pathServer answers the first failFor attempts of each path with 503
// (every attempt when failFor < 0), then 200, and records the arrivals.
type pathServer struct {
	failFor int
	start   time.Time

	mu    sync.Mutex
	seen  map[string]int
	times []time.Duration
}

func (s *pathServer) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[r.URL.Path]++
	n := s.seen[r.URL.Path]
	s.times = append(s.times, time.Since(s.start))
	s.mu.Unlock()
	resp := answer(200)
	if s.failFor < 0 || n <= s.failFor {
		resp = answer(503)
	}
	resp.Request = r
	return resp, nil
}

// TestNoRetryBudget: the control is the reference client but for its retry
// budget. Both make the same attempts at the same instants where the
// server recovers; against a server that stays down, retrylab refuses
// retries once its calls have spent its budget (gave-up, one attempt),
// the control keeps making every attempt of every call.
func TestNoRetryBudget(t *testing.T) {
	ref, err := Lookup("retrylab")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := Lookup("no-retry-budget")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(Controls(), ","), "no-retry-budget") {
		t.Errorf("Controls() = %v; want no-retry-budget among them", Controls())
	}
	pol := Policy{Base: 100 * time.Millisecond, Cap: time.Second, Budget: 10 * time.Second}
	ri, ci := ref.(Describer).Describe(Params{Policy: pol}), ctl.(Describer).Describe(Params{Policy: pol})
	if fmt.Sprint(*ri.Stated) != fmt.Sprint(*ci.Stated) {
		t.Errorf("stated policies differ: retrylab %+v, no-retry-budget %+v", *ri.Stated, *ci.Stated)
	}
	if !strings.HasPrefix(ci.Summary, "negative control: our client with its retry budget off") ||
		!strings.Contains(ri.Summary, "retry budget 500 (5 a retry, 10 after a timeout)") {
		t.Errorf("summaries: retrylab %q, no-retry-budget %q", ri.Summary, ci.Summary)
	}

	// run makes requests sequential calls through subject s against a
	// server failing failFor attempts of each; it returns the results, the
	// attempts of each call and their arrival times.
	run := func(s Subject, failFor, requests int) (results []string, attempts []int, times []time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			srv := &pathServer{failFor: failFor, start: time.Now()}
			c := s.New(srv, Params{Client: 1, Policy: pol, Rand: rand.New(rand.NewPCG(7, 8))})
			for i := range requests {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://stub/c/1/r/%d", i), nil)
				resp, err := c(ctx, req)
				res, _, n := Classify(resp, err)
				if resp != nil {
					resp.Body.Close()
				}
				cancel()
				results, attempts = append(results, res), append(attempts, n)
			}
			times = srv.times
		})
		return results, attempts, times
	}

	_, _, rt := run(ref, 3, 20)
	_, _, ct := run(ctl, 3, 20)
	if fmt.Sprint(rt) != fmt.Sprint(ct) || len(rt) != 80 {
		t.Errorf("a server that recovers within each call: retrylab's %d attempts at %v, no-retry-budget's %d at %v; want the same 80", len(rt), rt, len(ct), ct)
	}

	rres, ratt, _ := run(ref, -1, 30)
	cres, catt, _ := run(ctl, -1, 30)
	refused, retries := 0, 0
	for i, r := range rres {
		retries += ratt[i] - 1
		if r == ResultGaveUp && ratt[i] == 1 {
			refused++
		}
	}
	// 100 retries from the full budget (500 / 5), none after: every later
	// call fails at its first attempt.
	if retries != 100 || refused == 0 {
		t.Errorf("retrylab against a server that stays down: %d retries in 30 calls, %d calls refused at once (results %v, attempts %v); want 100 retries, then refusals",
			retries, refused, rres, ratt)
	}
	for i, r := range cres {
		if r != ResultBudget || catt[i] < 5 {
			t.Fatalf("no-retry-budget call %d: %s after %d attempts; want every call to spend its time budget (results %v, attempts %v)", i, r, catt[i], cres, catt)
		}
	}
}
