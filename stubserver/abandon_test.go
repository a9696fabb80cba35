package stubserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/internal/memnet"
	"github.com/retrylab/retrylab/timeline"
)

// TestAbandonedDuringLatency: a client whose context expires during the
// added latency never gets the response, so the attempt is recorded as the
// fault abandoned with the status it would have had, and no Retry-After or
// not_before, since none was sent.
func TestAbandonedDuringLatency(t *testing.T) {
	tests := []struct {
		name    string
		respond Respond
		ra      RetryAfter
		status  int
	}{
		{"slow ok", Respond{Kind: RespondOK}, RetryAfter{}, 200},
		{"slow 503 with Retry-After", Respond{Kind: RespondStatus, Status: 503}, RetryAfter{Form: FormDelta, Fixed: 2 * time.Second}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Phases: []Phase{{Name: "slow", Latency: 3 * time.Second, Respond: tt.respond, RetryAfter: tt.ra}}}, 1)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				r := httptest.NewRequest("GET", "/c/1/r/1", nil).WithContext(ctx)
				w := httptest.NewRecorder()
				func() {
					defer func() {
						// The connection is dropped unanswered: with
						// httptest's recorder, as net/http's abort.
						if p := recover(); p != http.ErrAbortHandler {
							t.Errorf("recover() = %v; want http.ErrAbortHandler (nothing written)", p)
						}
					}()
					h.s.ServeHTTP(w, r)
				}()
				if w.Flushed || w.Body.Len() != 0 || w.Header().Get("Retry-After") != "" {
					t.Errorf("response written to a departed client: flushed %v, body %q, Retry-After %q", w.Flushed, w.Body, w.Header().Get("Retry-After"))
				}
				as := h.attempts()
				if len(as) != 1 {
					t.Fatalf("records = %+v; want 1", as)
				}
				a := as[0]
				if a.Fault != timeline.FaultAbandoned || a.Status != tt.status {
					t.Errorf("record fault %q status %d; want %q with the would-be status %d", a.Fault, a.Status, timeline.FaultAbandoned, tt.status)
				}
				if a.HasNotBefore || a.RetryAfter != "" {
					t.Errorf("record not_before %v (set %v), retry_after %q; want none (nothing was sent)", a.NotBefore, a.HasNotBefore, a.RetryAfter)
				}
				if a.Latency() != time.Second {
					t.Errorf("held %v; want 1s (until the client left)", a.Latency())
				}
				if st := h.s.Stats(); st.Faults != 1 || st.OK+st.Unavailable503 != 0 {
					t.Errorf("Stats() = %+v; want 1 fault and no answers", st)
				}
				want := []PhaseCounts{{Name: "slow", Codes: []CodeCount{{timeline.FaultAbandoned, 1}}}}
				if got := h.s.Counts().Phases; !reflect.DeepEqual(got, want) {
					t.Errorf("Counts().Phases = %+v; want %+v", got, want)
				}
			})
		})
	}
}

// TestAbandonedOverTheWire runs the slow-server case through a real
// http.Server and http.Transport over the in-memory network, in virtual
// time: a client with a 1 s timeout against 3 s of latency gets an error,
// and the server records abandoned 200, never a success. A client that
// waits gets its 200, recorded as such. A client that gives up during a
// hang is still a hang.
func TestAbandonedOverTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{
			{Name: "slow", For: 10 * time.Second, Latency: 3 * time.Second},
			{Name: "hanging", Respond: Respond{Kind: RespondFault, Fault: FaultHang}},
		}}, 1)
		network := memnet.New()
		l := network.Listen()
		served := make(chan error, 1)
		go func() { served <- h.s.Serve(l) }()
		tr := &http.Transport{DialContext: network.DialContext}
		get := func(path string, timeout time.Duration) (int, error) {
			c := &http.Client{Transport: tr, Timeout: timeout}
			resp, err := c.Get("http://" + l.Addr().String() + path)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		if code, err := get("/c/1/r/0", time.Second); err == nil {
			t.Errorf("impatient client got %d; want a timeout", code)
		}
		if code, err := get("/c/2/r/0", 5*time.Second); err != nil || code != 200 {
			t.Errorf("patient client: %d, %v; want 200", code, err)
		}
		time.Sleep(10 * time.Second) // synctest: virtual time, into the hang
		if code, err := get("/c/3/r/0", 2*time.Second); err == nil {
			t.Errorf("client in a hang got %d; want a timeout", code)
		}
		synctest.Wait() // the server notices the departures
		tr.CloseIdleConnections()
		if err := h.s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		got := map[string]timeline.Attempt{}
		for _, a := range h.attempts() {
			got[a.Client] = a
		}
		if a := got["1"]; a.Fault != timeline.FaultAbandoned || a.Status != 200 || a.Latency() != time.Second {
			t.Errorf("impatient client's record = %+v; want abandoned 200 held 1s", a)
		}
		if a := got["2"]; a.Fault != "" || a.Status != 200 || a.Latency() != 3*time.Second {
			t.Errorf("patient client's record = %+v; want 200 after 3s", a)
		}
		if a := got["3"]; a.Fault != timeline.FaultHang || a.Status != 0 {
			t.Errorf("hung client's record = %+v; want a hang", a)
		}
	})
}
