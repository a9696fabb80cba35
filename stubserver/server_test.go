package stubserver

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// A harness is a Server inside a synctest bubble, called directly, with
// its records in memory. The bubble's clock starts at 2000-01-01 00:00:00
// UTC, so HTTP-dates below are exact.
type harness struct {
	t   *testing.T
	s   *Server
	rec *timeline.Recorder
	buf bytes.Buffer
}

func newHarness(t *testing.T, cfg Config, seed int64) *harness {
	t.Helper()
	h := &harness{t: t}
	h.rec = timeline.NewRecorder(timeline.NewEncoder(&h.buf), 64)
	s, err := New(cfg, Options{Recorder: h.rec, Seed: seed})
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	h.s = s
	return h
}

// do serves one request; hdr is name, value pairs.
func (h *harness) do(method, path string, hdr ...string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.s.ServeHTTP(w, r)
	return w
}

// attempts closes the recorder and returns the records.
func (h *harness) attempts() []timeline.Attempt {
	h.t.Helper()
	if err := h.rec.Close(); err != nil {
		h.t.Fatal(err)
	}
	return decodeAttempts(h.t, &h.buf)
}

var epoch2000 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBehaviours(t *testing.T) {
	tests := []struct {
		name    string
		respond Respond
		status  int
	}{
		{"ok", Respond{Kind: RespondOK}, 200},
		{"default is ok", Respond{}, 200},
		{"status 503", Respond{Kind: RespondStatus, Status: 503}, 503},
		{"status 404", Respond{Kind: RespondStatus, Status: 404}, 404},
		{"status 204 has no body", Respond{Kind: RespondStatus, Status: 204}, 204},
		{"mix of one", Respond{Kind: RespondMix, Mix: []Weighted{{Status: 500, Weight: 2}}}, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Phases: []Phase{{Name: "p", Respond: tt.respond}}}, 1)
				w := h.do("GET", "/c/1/r/1")
				if w.Code != tt.status {
					t.Errorf("status = %d; want %d", w.Code, tt.status)
				}
				as := h.attempts()
				if len(as) != 1 || as[0].Status != tt.status || as[0].Phase != "p" || as[0].Fault != "" {
					t.Errorf("records = %+v; want one with status %d in phase p", as, tt.status)
				}
			})
		})
	}
}

func TestMixIsWeightedAndSeeded(t *testing.T) {
	cfg := Config{Phases: []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{
		{Status: 200, Weight: 90}, {Status: 500, Weight: 5}, {Status: 404, Weight: 5},
	}}}}}
	run := func() map[int]int {
		var counts map[int]int
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, cfg, 42)
			counts = map[int]int{}
			for range 2000 {
				counts[h.do("GET", "/x").Code]++
			}
			h.attempts()
		})
		return counts
	}
	a, b := run(), run()
	for code, want := range map[int]float64{200: 0.90, 500: 0.05, 404: 0.05} {
		got := float64(a[code]) / 2000
		if math.Abs(got-want) > 0.03 {
			t.Errorf("share of %d = %.3f; want %.2f±0.03", code, got, want)
		}
		if a[code] != b[code] {
			t.Errorf("count of %d with the same seed = %d then %d; want equal", code, a[code], b[code])
		}
	}
}

func TestResetFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Respond: Respond{Kind: RespondFault, Fault: FaultReset}}}}, 1)
		func() {
			defer func() {
				// httptest's recorder cannot be hijacked: the handler
				// aborts the way net/http understands.
				if r := recover(); r != http.ErrAbortHandler {
					t.Errorf("recover() = %v; want http.ErrAbortHandler", r)
				}
			}()
			h.do("GET", "/c/1/r/1")
		}()
		as := h.attempts()
		if len(as) != 1 || as[0].Fault != timeline.FaultReset || as[0].Status != 0 {
			t.Errorf("records = %+v; want one reset without status", as)
		}
		if st := h.s.Stats(); st.Faults != 1 || st.Attempts != 1 {
			t.Errorf("Stats() = %+v; want 1 attempt, 1 fault", st)
		}
	})
}

func TestHangUntilClientGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Respond: Respond{Kind: RespondFault, Fault: FaultHang}}}}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequest("GET", "/c/1/r/1", nil).WithContext(ctx)
		done := make(chan struct{})
		go func() {
			h.s.ServeHTTP(httptest.NewRecorder(), r)
			close(done)
		}()
		time.Sleep(7 * time.Second) // synctest: virtual time
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("hang returned before the client gave up")
		default:
		}
		cancel()
		<-done
		as := h.attempts()
		if len(as) != 1 || as[0].Fault != timeline.FaultHang || as[0].Done-as[0].At != int64(7*time.Second) {
			t.Errorf("records = %+v; want one hang held 7s", as)
		}
	})
}

func TestHangReleasedByShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Respond: Respond{Kind: RespondFault, Fault: FaultHang}}}}, 1)
		aborted := make(chan any, 1)
		go func() {
			defer func() { aborted <- recover() }()
			h.do("GET", "/c/1/r/1")
		}()
		time.Sleep(time.Second) // synctest: virtual time
		if err := h.s.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown() = %v; want nil", err)
		}
		if r := <-aborted; r != http.ErrAbortHandler {
			t.Errorf("released hang: recover() = %v; want http.ErrAbortHandler (no answer)", r)
		}
		if as := h.attempts(); len(as) != 1 || as[0].Fault != timeline.FaultHang {
			t.Errorf("records = %+v; want one hang", as)
		}
	})
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name          string
		server, phase time.Duration
		want          time.Duration
	}{
		{"none", 0, 0, 0},
		{"server", 20 * time.Millisecond, 0, 20 * time.Millisecond},
		{"phase replaces server", 20 * time.Millisecond, 3 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Latency: tt.server, Phases: []Phase{{Latency: tt.phase}}}, 1)
				h.do("GET", "/c/1/r/1")
				as := h.attempts()
				if got := as[0].Latency(); got != tt.want {
					t.Errorf("latency = %v; want %v", got, tt.want)
				}
			})
		})
	}
}

func TestPhasesInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Phases: []Phase{
			{Name: "outage", For: 5 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}},
			{Name: "flaky", For: 2 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 500}},
			{Name: "ok"},
		}}
		h := newHarness(t, cfg, 1)
		steps := []struct {
			at     time.Duration
			status int
			phase  string
		}{
			{0, 503, "outage"},
			{4999 * time.Millisecond, 503, "outage"},
			{5 * time.Second, 500, "flaky"},
			{7 * time.Second, 200, "ok"},
			{time.Hour, 200, "ok"}, // the last phase lasts forever
		}
		start := time.Now()
		for _, st := range steps {
			time.Sleep(st.at - time.Since(start)) // synctest: virtual time
			if w := h.do("GET", "/x"); w.Code != st.status {
				t.Errorf("status at %v = %d; want %d", st.at, w.Code, st.status)
			}
		}
		for i, a := range h.attempts() {
			if a.Phase != steps[i].phase || a.At != int64(steps[i].at) {
				t.Errorf("record %d: phase %q at %d; want %q at %d", i, a.Phase, a.At, steps[i].phase, int64(steps[i].at))
			}
		}
		wantPhases := []timeline.Phase{
			{Name: "outage", Start: 0, End: int64(5 * time.Second), Respond: "status 503"},
			{Name: "flaky", Start: int64(5 * time.Second), End: int64(7 * time.Second), Respond: "status 500"},
			{Name: "ok", Start: int64(7 * time.Second), Respond: "ok"},
		}
		got := h.s.Phases()
		for i := range wantPhases {
			if got[i] != wantPhases[i] {
				t.Errorf("Phases()[%d] = %+v; want %+v", i, got[i], wantPhases[i])
			}
		}
	})
}

func TestRetryAfterForms(t *testing.T) {
	const sec = int64(time.Second)
	tests := []struct {
		name   string
		ra     RetryAfter
		at     time.Duration // arrival instant
		status int
		want   string // header; "" none
		nb     int64  // not_before; -1 none
	}{
		{"none", RetryAfter{Form: FormNone, Fixed: time.Second}, 0, 503, "", -1},
		{"default none", RetryAfter{Fixed: time.Second}, 0, 503, "", -1},
		{"delta rounds up", RetryAfter{Form: FormDelta, Fixed: 1500 * time.Millisecond}, 250 * time.Millisecond, 503, "2", 250*int64(time.Millisecond) + 2*sec},
		{"delta zero", RetryAfter{Form: FormDelta}, time.Second, 429, "0", sec},
		{"delta on 500", RetryAfter{Form: FormDelta, Fixed: 3 * time.Second}, 0, 500, "3", 3 * sec},
		{"no header on 404", RetryAfter{Form: FormDelta, Fixed: 3 * time.Second}, 0, 404, "", -1},
		{"date rounds up", RetryAfter{Form: FormDate, Fixed: 1500 * time.Millisecond}, 250 * time.Millisecond, 503, "Sat, 01 Jan 2000 00:00:02 GMT", 2 * sec},
		{"date exact", RetryAfter{Form: FormDate, Fixed: 3 * time.Second}, 0, 429, "Sat, 01 Jan 2000 00:00:03 GMT", 3 * sec},
		{"past-date", RetryAfter{Form: FormPastDate, Fixed: 3 * time.Second}, 2 * time.Hour, 503, "Sat, 01 Jan 2000 01:00:00 GMT", 2 * 3600 * sec},
		{"negative", RetryAfter{Form: FormNegative, Fixed: 3 * time.Second}, 0, 503, "-3", -1},
		{"negative of zero", RetryAfter{Form: FormNegative}, 0, 503, "-1", -1},
		{"garbage", RetryAfter{Form: FormGarbage, Fixed: 3 * time.Second}, 0, 503, garbageValue, -1},
		{"fractional", RetryAfter{Form: FormFractional, Fixed: 1500 * time.Millisecond}, 0, 503, "1.5", -1},
		{"fractional of whole", RetryAfter{Form: FormFractional, Fixed: 2 * time.Second}, 0, 503, "2.5", -1},
		{"huge", RetryAfter{Form: FormHuge, Fixed: time.Second}, 0, 503, "31536000", HugeSeconds * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: tt.status}, RetryAfter: tt.ra}}}
				h := newHarness(t, cfg, 1)
				time.Sleep(tt.at) // synctest: virtual time
				w := h.do("GET", "/c/1/r/1")
				if got := w.Header().Get("Retry-After"); got != tt.want {
					t.Errorf("Retry-After = %q; want %q", got, tt.want)
				}
				a := h.attempts()[0]
				if a.RetryAfter != tt.want {
					t.Errorf("recorded retry_after = %q; want %q", a.RetryAfter, tt.want)
				}
				switch {
				case tt.nb < 0 && a.HasNotBefore:
					t.Errorf("not_before = %d; want none", a.NotBefore)
				case tt.nb >= 0 && (!a.HasNotBefore || a.NotBefore != tt.nb):
					t.Errorf("not_before = %d (set %v); want %d", a.NotBefore, a.HasNotBefore, tt.nb)
				}
				if tt.want != "" && strings.Contains(tt.want, "GMT") {
					d, err := http.ParseTime(tt.want)
					if err != nil {
						t.Fatal(err)
					}
					if tt.ra.Form == FormDate && d.Sub(epoch2000) != time.Duration(a.NotBefore) {
						t.Errorf("not_before %d does not match the date sent %v", a.NotBefore, d)
					}
				}
			})
		})
	}
}

func TestRetryAfterPhaseEnd(t *testing.T) {
	tests := []struct {
		form string
		at   time.Duration
		want string
		nb   time.Duration
	}{
		{FormDelta, 3200 * time.Millisecond, "7", 10200 * time.Millisecond},
		{FormDate, 3200 * time.Millisecond, "Sat, 01 Jan 2000 00:00:10 GMT", 10 * time.Second},
		{FormDate, 9999 * time.Millisecond, "Sat, 01 Jan 2000 00:00:10 GMT", 10 * time.Second},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Phases: []Phase{
				{Name: "outage", For: 10 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503},
					RetryAfter: RetryAfter{Form: tt.form, Value: ValuePhaseEnd}},
				{Name: "ok"},
			}}
			h := newHarness(t, cfg, 1)
			time.Sleep(tt.at) // synctest: virtual time
			w := h.do("GET", "/c/1/r/1")
			a := h.attempts()[0]
			if got := w.Header().Get("Retry-After"); got != tt.want || a.NotBefore != int64(tt.nb) {
				t.Errorf("%s at %v: Retry-After = %q, not_before = %v; want %q, %v", tt.form, tt.at, got, time.Duration(a.NotBefore), tt.want, tt.nb)
			}
		})
	}
}

func TestRetryAfterLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{
			Quota: &Quota{Limits: []Limit{{Limit: 2, Per: time.Second, Burst: 1}}},
			Phases: []Phase{{Respond: Respond{Kind: RespondQuota},
				RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}}},
		}
		h := newHarness(t, cfg, 1)
		if w := h.do("GET", "/c/1/r/1"); w.Code != 200 || w.Header().Get("Retry-After") != "" {
			t.Errorf("first: %d Retry-After %q; want 200 without", w.Code, w.Header().Get("Retry-After"))
		}
		time.Sleep(100 * time.Millisecond) // synctest: virtual time
		// One token every 500ms: the next is 400ms away, sent as 1s.
		if w := h.do("GET", "/c/1/r/2"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
			t.Errorf("second: %d Retry-After %q; want 429 with 1", w.Code, w.Header().Get("Retry-After"))
		}
		time.Sleep(400 * time.Millisecond) // synctest: virtual time
		if w := h.do("GET", "/c/1/r/2"); w.Code != 200 {
			t.Errorf("after the token came back: %d; want 200", w.Code)
		}
		as := h.attempts()
		if nb := as[1].NotBefore; !as[1].HasNotBefore || nb != int64(1100*time.Millisecond) {
			t.Errorf("not_before = %v; want 1.1s", time.Duration(nb))
		}
		if as[2].Attempt != 2 || as[2].Key != "1/2" {
			t.Errorf("retry recorded as key %q attempt %d; want 1/2 attempt 2", as[2].Key, as[2].Attempt)
		}
	})
}

func TestRetryAfterSpread(t *testing.T) {
	draw := func(seed int64) []string {
		var got []string
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: 503},
				RetryAfter: RetryAfter{Form: FormDelta, Fixed: 2 * time.Second, Spread: 10 * time.Second}}}}
			h := newHarness(t, cfg, seed)
			for range 50 {
				got = append(got, h.do("GET", "/x").Header().Get("Retry-After"))
			}
			h.attempts()
		})
		return got
	}
	a, b := draw(7), draw(7)
	distinct := map[string]bool{}
	for i, v := range a {
		if v != b[i] {
			t.Fatalf("draw %d with the same seed = %q then %q; want equal", i, v, b[i])
		}
		switch v {
		case "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12":
		default:
			t.Errorf("Retry-After = %q; want 2..12 (2 + 0..10 whole seconds)", v)
		}
		distinct[v] = true
	}
	if len(distinct) < 5 {
		t.Errorf("distinct values = %d over 50 draws; want spread", len(distinct))
	}
}

func TestRateLimitHeaders(t *testing.T) {
	tests := []struct {
		family string
		want   map[string]string // headers on the 3rd request (denied)
		record string
	}{
		{HeadersIETF, map[string]string{
			"RateLimit-Policy": `"default";q=2;w=1`,
			"RateLimit":        `"default";r=0;t=1`,
		}, `RateLimit-Policy: "default";q=2;w=1; RateLimit: "default";r=0;t=1`},
		{HeadersXRateLimit, map[string]string{
			"X-RateLimit-Limit":     "2",
			"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset":     "946684801", // 2000-01-01T00:00:01Z, the window's end
		}, "X-RateLimit-Limit: 2; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 946684801"},
		{HeadersNone, map[string]string{"RateLimit": "", "X-RateLimit-Limit": ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Headers: tt.family, Quota: &Quota{Limits: []Limit{{Algorithm: AlgFixedWindow, Limit: 2, Per: time.Second}}},
					Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}}
				h := newHarness(t, cfg, 1)
				time.Sleep(300 * time.Millisecond) // synctest: virtual time
				h.do("GET", "/a")
				w := h.do("GET", "/b")
				if tt.family == HeadersIETF && w.Header().Get("RateLimit") != `"default";r=0;t=1` {
					t.Errorf("2nd RateLimit = %q; want r=0", w.Header().Get("RateLimit"))
				}
				w = h.do("GET", "/c")
				if w.Code != 429 {
					t.Fatalf("3rd status = %d; want 429", w.Code)
				}
				for k, v := range tt.want {
					if got := w.Header().Get(k); got != v {
						t.Errorf("%s = %q; want %q", k, got, v)
					}
				}
				if got := h.attempts()[2].RateLimit; got != tt.record {
					t.Errorf("recorded ratelimit = %q; want %q", got, tt.record)
				}
			})
		})
	}
}

// TestQuotaAlgorithms walks each algorithm through a schedule of requests.
func TestQuotaAlgorithms(t *testing.T) {
	type step struct {
		at      time.Duration
		allowed bool
	}
	tests := []struct {
		q     Limit
		steps []step
	}{
		{Limit{Algorithm: AlgTokenBucket, Limit: 2, Per: time.Second, Burst: 2}, []step{
			{0, true}, {0, true}, {0, false}, {499 * time.Millisecond, false}, {500 * time.Millisecond, true}, {600 * time.Millisecond, false},
		}},
		{Limit{Algorithm: AlgFixedWindow, Limit: 3, Per: time.Second}, []step{
			{0, true}, {0, true}, {900 * time.Millisecond, true}, {999 * time.Millisecond, false},
			{time.Second, true}, {time.Second, true}, {time.Second, true}, {1100 * time.Millisecond, false},
		}},
		// Sliding window counter, 4/s: window 0 fills; at 1.5s the estimate
		// is 4*0.5 = 2, so two more fit; at 1.75s it is 4*0.25+2 = 3: one.
		{Limit{Algorithm: AlgSlidingWindow, Limit: 4, Per: time.Second}, []step{
			{0, true}, {0, true}, {0, true}, {0, true}, {0, false},
			{1500 * time.Millisecond, true}, {1500 * time.Millisecond, true}, {1500 * time.Millisecond, false},
			{1750 * time.Millisecond, true}, {1750 * time.Millisecond, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.q.Algorithm, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := NewMemoryLimiter(LimiterSpec{Limits: []Limit{tt.q}})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				for i, st := range tt.steps {
					time.Sleep(st.at - time.Since(start)) // synctest: virtual time
					d, err := lim.Take(context.Background(), oneKey(""), time.Now())
					if err != nil || d.Allowed != st.allowed {
						t.Errorf("step %d at %v: Take() = %+v, %v; want allowed %v", i, st.at, d, err, st.allowed)
					}
					if !d.Allowed && d.RetryIn <= 0 {
						t.Errorf("step %d: denied with RetryIn %v; want > 0", i, d.RetryIn)
					}
				}
			})
		})
	}
}

// TestQuotaRetryInIsExact checks that a request made exactly RetryIn after
// a denial is allowed, for every algorithm.
func TestQuotaRetryInIsExact(t *testing.T) {
	for _, alg := range []string{AlgTokenBucket, AlgFixedWindow, AlgSlidingWindow} {
		t.Run(alg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, _ := NewMemoryLimiter(LimiterSpec{Limits: []Limit{{Algorithm: alg, Limit: 3, Per: time.Second}}})
				time.Sleep(300 * time.Millisecond) // synctest: virtual time
				for i := 0; i < 20; i++ {
					d, _ := lim.Take(context.Background(), oneKey("k"), time.Now())
					if d.Allowed {
						continue
					}
					time.Sleep(d.RetryIn) // synctest: virtual time
					d2, _ := lim.Take(context.Background(), oneKey("k"), time.Now())
					if !d2.Allowed {
						t.Fatalf("after RetryIn %v: denied again (%+v)", d.RetryIn, d2)
					}
				}
			})
		})
	}
}

func TestQuotaKeys(t *testing.T) {
	tests := []struct {
		key  string
		reqs [][]string // path, then header pairs
		want []int
	}{
		{KeyGlobal, [][]string{{"/c/1/r/1"}, {"/c/2/r/1"}}, []int{200, 429}},
		{KeyClient, [][]string{{"/c/1/r/1"}, {"/c/2/r/1"}, {"/c/1/r/2"}}, []int{200, 200, 429}},
		{KeyAPIKey, [][]string{
			{"/x", "Authorization", "Bearer k1"}, {"/x", "X-Api-Key", "k2"},
			{"/y", "X-Api-Key", "k1"}, {"/z"}, {"/w"},
		}, []int{200, 200, 429, 200, 429}},
		{KeyEndpoint, [][]string{{"/c/1/r/1/search"}, {"/c/2/r/1/search"}, {"/c/1/r/2/items"}}, []int{200, 429, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Quota: &Quota{Limits: []Limit{{Limit: 1, Per: time.Hour, Key: tt.key}}},
					Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}}
				h := newHarness(t, cfg, 1)
				for i, rq := range tt.reqs {
					if w := h.do("GET", rq[0], rq[1:]...); w.Code != tt.want[i] {
						t.Errorf("request %d %v: status %d; want %d", i, rq, w.Code, tt.want[i])
					}
				}
				h.attempts()
			})
		})
	}
}

func TestQuotaMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Quota: &Quota{Limits: []Limit{{Limit: 2, Per: time.Hour, Algorithm: AlgFixedWindow}}},
			Phases: []Phase{{Name: "q", Respond: Respond{Kind: RespondQuota}}}}
		h := newHarness(t, cfg, 1)
		for range 5 {
			h.do("GET", "/x")
		}
		if w := h.do("GET", "/metrics"); w.Code != http.StatusNotFound {
			t.Errorf("GET /metrics without Options.Metrics = %d; want 404", w.Code)
		}
		want := Counts{Phases: []PhaseCounts{{Name: "q", Codes: []CodeCount{{"200", 2}, {"429", 3}}}}, QuotaRejected: 3, QuotaExhausted: 1}
		if got := h.s.Counts(); !reflect.DeepEqual(got, want) {
			t.Errorf("Counts() = %+v; want %+v", got, want)
		}
		if n := len(h.attempts()); n != 5 {
			t.Errorf("records = %d; want 5 (/metrics not recorded)", n)
		}
	})
}

// failingLimiter is a remote backend that is down.
type failingLimiter struct{}

func (failingLimiter) Take(context.Context, Charge, time.Time) (Decision, error) {
	return Decision{}, errors.New("backend down")
}

func (failingLimiter) Health(context.Context) error { return errors.New("PING: connection refused") }

// TestLimiterError: a backend that fails answers 503 with Retry-After 1
// (Retry-After: limiter has no wait to give; 0 would invite a retry
// storm into a down backend) when the quota fails closed, and lets the
// request through unmetered when it fails open; either way it is counted.
func TestLimiterError(t *testing.T) {
	for _, tt := range []struct {
		onError    string
		code       int
		retryAfter string
		backend    string
	}{{"", 503, "1", timeline.BackendClosed}, {OnErrorClosed, 503, "1", timeline.BackendClosed}, {OnErrorOpen, 200, "", timeline.BackendOpen}} {
		t.Run("on_error="+tt.onError, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 4)
				s, err := New(Config{Headers: HeadersIETF, Quota: &Quota{Limits: []Limit{{Limit: 1}}, OnError: tt.onError, Backend: "redis://u:hunter2@127.0.0.1:1/0"},
					Phases: []Phase{{Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}}}},
					Options{Recorder: rec, NewLimiter: func(LimiterSpec) (Limiter, error) { return failingLimiter{}, nil }})
				if err != nil {
					t.Fatal(err)
				}
				for range 2 {
					w := httptest.NewRecorder()
					s.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
					if w.Code != tt.code || w.Header().Get("Retry-After") != tt.retryAfter || w.Header().Get("RateLimit") != "" {
						t.Errorf("status = %d, Retry-After %q, RateLimit %q; want %d with %q and no RateLimit",
							w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), tt.code, tt.retryAfter)
					}
				}
				if n := s.Counts().BackendErrors; n != 2 {
					t.Errorf("BackendErrors = %d; want 2", n)
				}
				// /healthz asks the backend: it names it, password hidden.
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
				if want := "503 quota backend redis://u:xxxxx@127.0.0.1:1/0: PING: connection refused\n"; w.Code != 503 || w.Body.String() != want {
					t.Errorf("/healthz: %d %q; want 503 %q", w.Code, w.Body.String(), want)
				}
				rec.Close()
				as := decodeAttempts(t, &buf)
				if len(as) != 2 || as[0].Backend != tt.backend || as[1].Backend != tt.backend || as[0].Status != tt.code {
					t.Errorf("records %+v; want 2 with status %d marked backend %q (the stub's own failure)", as, tt.code, tt.backend)
				}
			})
		})
	}
}

func TestAttemptNumbersPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, 1)
		reqs := [][]string{
			{"/c/1/r/1"}, {"/c/1/r/1"}, {"/c/2/r/1"}, {"/c/1/r/1/extra"},
			{"/pay", "Idempotency-Key", "abc"}, {"/other", "Idempotency-Key", "abc"}, {"/pay"},
		}
		for _, rq := range reqs {
			h.do("POST", rq[0], rq[1:]...)
		}
		want := []struct {
			key     string
			attempt int
			idem    bool
		}{
			{"1/1", 1, false}, {"1/1", 2, false}, {"2/1", 1, false}, {"1/1", 3, false},
			// The Idempotency-Key is evidence, not identity.
			{"192.0.2.1 POST /pay", 1, true}, {"192.0.2.1 POST /other", 1, true}, {"192.0.2.1 POST /pay", 2, false},
		}
		for i, a := range h.attempts() {
			if a.Key != want[i].key || a.Attempt != want[i].attempt || a.Idempotent != want[i].idem {
				t.Errorf("record %d = key %q attempt %d idem %v; want %q %d %v", i, a.Key, a.Attempt, a.Idempotent, want[i].key, want[i].attempt, want[i].idem)
			}
		}
	})
}

func TestAttemptCounterIsBounded(t *testing.T) {
	var c attemptCounter
	c.cur = make(map[string]int32)
	c.next("old")
	c.next("old")
	for i := range 2 * maxKeys {
		c.next(RequestPath(0, i))
	}
	if n := len(c.cur) + len(c.prev); n > 2*maxKeys {
		t.Errorf("keys held = %d; want <= %d", n, 2*maxKeys)
	}
	if got := c.next("old"); got != 1 {
		t.Errorf("next(long-idle key) = %d; want 1 (forgotten)", got)
	}
	recent := RequestPath(0, 2*maxKeys-1)
	if got := c.next(recent); got != 2 {
		t.Errorf("next(recent key) = %d; want 2", got)
	}
}

func TestBoundedBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, 1)
		big := strings.NewReader(strings.Repeat("x", 2*MaxBodyBytes))
		r := httptest.NewRequest("POST", "/c/1/r/1", big)
		w := httptest.NewRecorder()
		h.s.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("status = %d; want 200", w.Code)
		}
		if rest := big.Len(); rest < MaxBodyBytes-1 {
			t.Errorf("body left unread = %d; want about %d (read bounded)", rest, MaxBodyBytes)
		}
		if n := len(h.attempts()); n != 1 {
			t.Errorf("records = %d; want 1", n)
		}
	})
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(Config{Headers: "bogus"}, Options{})
	var fe *FieldError
	if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != "headers" {
		t.Errorf("New(bad) = %v; want ErrInvalidConfig with a FieldError on headers", err)
	}
}

// TestRetryAfterPhaseEndPassed: a response delayed past its phase's end
// says "now", never a negative delay.
func TestRetryAfterPhaseEndPassed(t *testing.T) {
	for form, want := range map[string]string{FormDelta: "0", FormFractional: "0.5", FormNegative: "-1"} {
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Phases: []Phase{
				{For: time.Second, Latency: 2 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503},
					RetryAfter: RetryAfter{Form: form, Value: ValuePhaseEnd}},
				{},
			}}
			h := newHarness(t, cfg, 1)
			time.Sleep(500 * time.Millisecond) // synctest: virtual time
			w := h.do("GET", "/c/1/r/1")
			a := h.attempts()[0]
			if got := w.Header().Get("Retry-After"); got != want {
				t.Errorf("%s: Retry-After = %q; want %q", form, got, want)
			}
			if form == FormDelta && a.NotBefore != int64(2500*time.Millisecond) {
				t.Errorf("%s: not_before = %v; want 2.5s (the response instant)", form, time.Duration(a.NotBefore))
			}
		})
	}
}

func TestNewLimiterError(t *testing.T) {
	boom := errors.New("redis unreachable")
	_, err := New(Config{Quota: &Quota{Limits: []Limit{{Limit: 1}}}}, Options{NewLimiter: func(LimiterSpec) (Limiter, error) { return nil, boom }})
	if !errors.Is(err, boom) {
		t.Errorf("New with a failing NewLimiter = %v; want it to wrap %v", err, boom)
	}
}

func TestPhasesDescribe(t *testing.T) {
	s, err := New(Config{Quota: &Quota{Limits: []Limit{{Limit: 5}}}, Phases: []Phase{
		{Name: "a", For: time.Second, Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Status: 200, Weight: 90}, {Fault: FaultReset, Weight: 2.5}}},
			RetryAfter: RetryAfter{Form: FormDate, Value: ValuePhaseEnd}},
		{For: time.Second, Respond: Respond{Kind: RespondFault, Fault: FaultHang}, RetryAfter: RetryAfter{Form: FormDelta, Fixed: 2 * time.Second, Spread: time.Second}},
		{Name: "c", Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormHuge, Value: ValueLimiter}},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []timeline.Phase{
		{Name: "a", Start: 0, End: int64(time.Second), Respond: "mix 200:90 reset:2.5", RetryAfter: "date phase-end"},
		{Name: "phase-2", Start: int64(time.Second), End: int64(2 * time.Second), Respond: "fault hang", RetryAfter: "delta 2s spread 1s"},
		{Name: "c", Start: int64(2 * time.Second), Respond: "quota", RetryAfter: "huge limiter"},
	}
	got := s.Phases()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Phases()[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
}

func TestMetricsSumPhasesOfOneName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{
			{Name: "down", For: time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}},
			{Name: "up", For: time.Second},
			{Name: "down", Respond: Respond{Kind: RespondStatus, Status: 503}},
		}}, 1)
		h.do("GET", "/x")
		time.Sleep(2 * time.Second) // synctest: virtual time
		h.do("GET", "/x")
		want := []PhaseCounts{{Name: "down", Codes: []CodeCount{{"503", 1}}}, {Name: "up"}, {Name: "down", Codes: []CodeCount{{"503", 1}}}}
		if got := h.s.Counts().Phases; !reflect.DeepEqual(got, want) {
			t.Errorf("Counts().Phases = %+v; want %+v (phases apart, even when they share a name)", got, want)
		}
		h.attempts()
	})
}

func TestMemoryLimiterForgetsIdleKeys(t *testing.T) {
	for _, alg := range []string{AlgTokenBucket, AlgFixedWindow} {
		lim, _ := NewMemoryLimiter(LimiterSpec{Limits: []Limit{{Algorithm: alg, Limit: 1, Per: time.Second}}})
		m := lim.(*memLimiter)
		t0 := epoch2000
		for i := range maxKeys {
			m.Take(context.Background(), oneKey(strconv.Itoa(i)), t0)
		}
		if d, _ := m.Take(context.Background(), oneKey("0"), t0); d.Allowed {
			t.Fatalf("%s: key 0 allowed twice in one window", alg)
		}
		// Later every quota is whole again: a new key sweeps them all.
		later := t0.Add(time.Hour)
		m.Take(context.Background(), oneKey("new"), later)
		if n := len(m.layers[0].keys); n != 1 {
			t.Errorf("%s: keys after the sweep = %d; want 1", alg, n)
		}
		if d, _ := m.Take(context.Background(), oneKey("0"), later); !d.Allowed {
			t.Errorf("%s: forgotten key denied; want a full quota", alg)
		}
	}
}

// TestRetryAfterSpreadSurvivesRounding: with delta and date the spread is
// drawn in whole seconds after rounding, so an outage-delta-like phase (2 s
// plus a spread of 1 s or 2 s, arrivals at odd instants) sends values that
// really differ, each not_before still the instant the value names.
func TestRetryAfterSpreadSurvivesRounding(t *testing.T) {
	for _, form := range []string{FormDelta, FormDate} {
		for _, spread := range []time.Duration{time.Second, 2 * time.Second} {
			t.Run(form+"/"+spread.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := Config{Latency: 2 * time.Millisecond, Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: 503},
						RetryAfter: RetryAfter{Form: form, Fixed: 2 * time.Second, Spread: spread}}}}
					h := newHarness(t, cfg, 3)
					var sent []string
					for range 200 {
						time.Sleep(37 * time.Millisecond) // synctest: virtual time
						sent = append(sent, h.do("GET", "/c/1/r/1").Header().Get("Retry-After"))
					}
					waits := map[int64]int{} // whole seconds from the response to not_before
					for i, a := range h.attempts() {
						if a.RetryAfter != sent[i] || !a.HasNotBefore {
							t.Fatalf("record %d: retry_after %q, not_before set %v; want %q with a not_before", i, a.RetryAfter, a.HasNotBefore, sent[i])
						}
						resp := a.Done // latency only: the response instant
						switch form {
						case FormDelta:
							n, err := strconv.ParseInt(sent[i], 10, 64)
							if err != nil || a.NotBefore != resp+n*int64(time.Second) {
								t.Fatalf("record %d: Retry-After %q, not_before %d; want response %d + the seconds sent", i, sent[i], a.NotBefore, resp)
							}
							waits[n]++
						case FormDate:
							d, err := http.ParseTime(sent[i])
							if err != nil || int64(d.Sub(epoch2000)) != a.NotBefore {
								t.Fatalf("record %d: Retry-After %q, not_before %d; want the date sent", i, sent[i], a.NotBefore)
							}
							// ceil(response + 2s) in whole seconds, then the spread
							base := (resp + 2*int64(time.Second) + int64(time.Second) - 1) / int64(time.Second) * int64(time.Second)
							waits[(a.NotBefore-base)/int64(time.Second)]++
						}
					}
					lo, hi := int64(0), int64(spread/time.Second)
					if form == FormDelta {
						lo, hi = 2, 2+hi
					}
					for w := range waits {
						if w < lo || w > hi {
							t.Errorf("drawn %d; want %d..%d", w, lo, hi)
						}
					}
					if len(waits) < 2 || (spread == 2*time.Second && len(waits) < 3) {
						t.Errorf("distinct values over 200 responses = %v; want every one of %d..%d", waits, lo, hi)
					}
				})
			})
		}
	}
}

// oneKey is the Charge of one unit under key, for a Limiter of one limit.
func oneKey(key string) Charge { return Charge{Keys: [MaxLimits]string{key}, Cost: 1} }

// TestIdemKeyIsEvidence: every recorded attempt carries the digest of its
// Idempotency-Key (timeline.KeyDigest) beside Idempotent, whether its
// identity comes from the path or not and whether it was answered or
// rejected 400; the raw key is never written (it is no part of the
// logical-request key either).
func TestIdemKeyIsEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: 503}}}}, 1)
		const secret = "order-secret-7f3a"
		h.do("POST", "/c/1/r/1", "Idempotency-Key", secret)
		h.do("POST", "/pay", "Idempotency-Key", secret, "X-Client-Id", "alice")
		h.do("POST", "/pay", "X-Client-Id", "alice")
		h.do("POST", "/c/1/r/2", "Idempotency-Key", secret, "X-Client-Id", strings.Repeat("x", MaxIDBytes+1)) // 400
		if err := h.rec.Close(); err != nil {
			t.Fatal(err)
		}
		raw := h.buf.String()
		if strings.Contains(raw, secret) {
			t.Errorf("the recording holds the raw Idempotency-Key:\n%s", raw)
		}
		as := decodeAttempts(t, strings.NewReader(raw))
		want := []struct {
			idem   bool
			digest string
			status int
		}{
			{true, timeline.KeyDigest(secret), 503}, {true, timeline.KeyDigest(secret), 503}, {false, "", 503},
			{true, timeline.KeyDigest(secret), 400},
		}
		if len(as) != len(want) {
			t.Fatalf("%d records; want %d", len(as), len(want))
		}
		for i, a := range as {
			if a.Idempotent != want[i].idem || a.IdemKey != want[i].digest || a.Status != want[i].status {
				t.Errorf("record %d: idem %v, idem_key %q, status %d; want %v, %q, %d", i, a.Idempotent, a.IdemKey, a.Status, want[i].idem, want[i].digest, want[i].status)
			}
		}
		if d := timeline.KeyDigest(secret); d == "" || len(d) != 16 {
			t.Errorf("KeyDigest = %q; want 16 hex digits", d)
		}
	})
}

// TestWaitClaimRecorded: a client's X-Retrylab-Wait is recorded as sent,
// cut at maxWaitClaimBytes; a request without one records none.
func TestWaitClaimRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: 503}}}}, 1)
		h.do("GET", "/c/1/r/1")
		h.do("GET", "/c/1/r/1", timeline.WaitHeader, "12.5")
		h.do("GET", "/c/1/r/1", timeline.WaitHeader, strings.Repeat("9", 100))
		if err := h.rec.Close(); err != nil {
			t.Fatal(err)
		}
		as := decodeAttempts(t, strings.NewReader(h.buf.String()))
		want := []string{"", "12.5", strings.Repeat("9", maxWaitClaimBytes)}
		if len(as) != len(want) {
			t.Fatalf("%d records; want %d", len(as), len(want))
		}
		for i, a := range as {
			if a.WaitClaim != want[i] {
				t.Errorf("record %d: wait_claim %q; want %q", i, a.WaitClaim, want[i])
			}
		}
	})
}
