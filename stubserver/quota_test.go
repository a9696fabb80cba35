package stubserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// take is one Take of a limiter of one or more limits under one key each.
func take(t *testing.T, lim Limiter, now time.Time, cost int, keys ...string) Decision {
	t.Helper()
	c := Charge{Cost: cost}
	copy(c.Keys[:], keys)
	d, err := lim.Take(context.Background(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustLimiter(t *testing.T, ls ...Limit) Limiter {
	t.Helper()
	lim, err := NewMemoryLimiter(LimiterSpec{Limits: Named(ls)})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestLayeredChargesAllOrNone: a request is charged to every limit when all
// allow it, and to none when one rejects; Retry-After is the longest wait
// of the limits that rejected, and Rejected names that limit.
func TestLayeredChargesAllOrNone(t *testing.T) {
	t0 := epoch2000
	lim := mustLimiter(t,
		Limit{Name: "small", Algorithm: AlgFixedWindow, Limit: 2, Per: time.Hour},
		Limit{Name: "big", Algorithm: AlgFixedWindow, Limit: 5, Per: time.Hour})
	for i := range 2 {
		if d := take(t, lim, t0, 1); !d.Allowed {
			t.Fatalf("request %d rejected; want allowed", i)
		}
	}
	for range 3 { // rejected by small: big must not be charged
		d := take(t, lim, t0, 1)
		if d.Allowed || d.Rejected != 0 || d.RetryIn != time.Hour {
			t.Fatalf("third request: %+v; want rejected by limit 0 with RetryIn 1h", d)
		}
		if got := d.Limits[1].Remaining; got != 3 {
			t.Fatalf("big's remaining after rejections = %d; want 3 (rejected requests charge nothing)", got)
		}
	}

	// Two limits reject: the longest wait wins.
	lim = mustLimiter(t,
		Limit{Name: "a", Algorithm: AlgFixedWindow, Limit: 1, Per: time.Minute},
		Limit{Name: "b", Algorithm: AlgFixedWindow, Limit: 1, Per: time.Hour})
	take(t, lim, t0, 1)
	d := take(t, lim, t0.Add(time.Second), 1)
	if d.Allowed || d.Rejected != 1 || d.RetryIn != time.Hour-time.Second {
		t.Errorf("both exhausted: %+v; want rejected by limit 1 (the hour) with RetryIn 59m59s", d)
	}
	if d.Limits[0].RetryIn != time.Minute-time.Second {
		t.Errorf("limit 0's own wait = %v; want 59s", d.Limits[0].RetryIn)
	}
}

// TestAlgorithmsWithCost: every algorithm charges a request's cost, and a
// request whose cost does not fit is rejected while a cheaper one fits.
func TestAlgorithmsWithCost(t *testing.T) {
	for _, alg := range algorithmNames {
		t.Run(alg, func(t *testing.T) {
			lim := mustLimiter(t, Limit{Algorithm: alg, Limit: 10, Per: time.Hour})
			t0 := epoch2000
			if d := take(t, lim, t0, 7); !d.Allowed || d.Limits[0].Remaining != 3 {
				t.Fatalf("cost 7 of 10: %+v; want allowed, 3 remaining", d)
			}
			if d := take(t, lim, t0, 4); d.Allowed || d.RetryIn <= 0 {
				t.Fatalf("cost 4 with 3 left: %+v; want rejected with a wait", d)
			}
			if d := take(t, lim, t0, 3); !d.Allowed || d.Limits[0].Remaining != 0 {
				t.Fatalf("cost 3 with 3 left: %+v; want allowed, 0 remaining", d)
			}
		})
	}
}

// TestSlidingWindowLogIsExact: the log admits exactly Limit requests in any
// window of Per, and RetryIn is when the oldest one leaves it.
func TestSlidingWindowLogIsExact(t *testing.T) {
	lim := mustLimiter(t, Limit{Algorithm: AlgSlidingWindowLog, Limit: 3, Per: time.Second})
	t0 := epoch2000
	for _, at := range []time.Duration{0, 400 * time.Millisecond, 900 * time.Millisecond} {
		if d := take(t, lim, t0.Add(at), 1); !d.Allowed {
			t.Fatalf("request at %v rejected", at)
		}
	}
	d := take(t, lim, t0.Add(950*time.Millisecond), 1)
	if d.Allowed || d.RetryIn != 50*time.Millisecond {
		t.Fatalf("fourth at 950ms: %+v; want rejected, RetryIn 50ms (the request at 0 leaves at 1s)", d)
	}
	// The counter would let two through at 1.0s (the previous window's
	// weight is gone at a boundary); the log lets one: 400ms and 900ms
	// are still in the window.
	if d := take(t, lim, t0.Add(time.Second), 1); !d.Allowed {
		t.Fatal("at 1s: rejected; want allowed")
	}
	if d := take(t, lim, t0.Add(time.Second), 1); d.Allowed || d.RetryIn != 400*time.Millisecond {
		t.Fatalf("second at 1s: %+v; want rejected, RetryIn 400ms", d)
	}
}

// TestLeakyBucket: as a meter it takes burst requests at once and then one
// per drain interval; as a shaper it holds them instead, up to MaxDelay,
// and rejects past it.
func TestLeakyBucket(t *testing.T) {
	t0 := epoch2000
	meter := mustLimiter(t, Limit{Algorithm: AlgLeakyBucket, Limit: 10, Per: time.Second, Burst: 2})
	for i := range 2 {
		if d := take(t, meter, t0, 1); !d.Allowed || d.Delay != 0 {
			t.Fatalf("meter request %d: %+v; want allowed at once", i, d)
		}
	}
	if d := take(t, meter, t0, 1); d.Allowed || d.RetryIn != 100*time.Millisecond {
		t.Fatalf("meter, queue full: %+v; want rejected, RetryIn 100ms", d)
	}
	if d := take(t, meter, t0.Add(100*time.Millisecond), 1); !d.Allowed {
		t.Fatalf("meter after one drain: %+v; want allowed", d)
	}

	shaper := mustLimiter(t, Limit{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 10, Per: time.Second, Burst: 1, MaxDelay: 250 * time.Millisecond})
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}
	for i, w := range want {
		if d := take(t, shaper, t0, 1); !d.Allowed || d.Delay != w {
			t.Fatalf("shaper request %d: %+v; want allowed after %v", i, d, w)
		}
	}
	if d := take(t, shaper, t0, 1); d.Allowed || d.RetryIn != 50*time.Millisecond {
		t.Fatalf("shaper past MaxDelay: %+v; want rejected, RetryIn 50ms (a hold of 300ms > 250ms)", d)
	}
}

// TestRetryInIsExactEveryAlgorithm: a request made exactly RetryIn after a
// rejection is allowed, for every algorithm and a layered mix.
func TestRetryInIsExactEveryAlgorithm(t *testing.T) {
	cases := map[string][]Limit{"mix": {
		{Algorithm: AlgTokenBucket, Limit: 5, Per: time.Second, Burst: 2},
		{Algorithm: AlgSlidingWindowLog, Limit: 8, Per: 3 * time.Second},
		{Algorithm: AlgFixedWindow, Limit: 20, Per: 10 * time.Second},
	}}
	for _, alg := range algorithmNames {
		cases[alg] = []Limit{{Algorithm: alg, Limit: 3, Per: time.Second}}
	}
	cases["leaky-bucket shape"] = []Limit{{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 3, Per: time.Second, MaxDelay: 500 * time.Millisecond}}
	for name, ls := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := mustLimiter(t, ls...)
				time.Sleep(300 * time.Millisecond) // synctest: virtual time
				rejected := 0
				for range 60 {
					d := take(t, lim, time.Now(), 1)
					if d.Allowed {
						continue
					}
					rejected++
					time.Sleep(d.RetryIn) // synctest: virtual time
					if d2 := take(t, lim, time.Now(), 1); !d2.Allowed {
						t.Fatalf("after RetryIn %v: rejected again (%+v)", d.RetryIn, d2)
					}
				}
				if rejected == 0 {
					t.Fatal("never rejected; the test proves nothing")
				}
			})
		})
	}
}

// quotaPhase is a schedule of one quota phase with Retry-After from the
// limiter.
var quotaPhase = []Phase{{Name: "q", Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}}}

// TestLayeredHeaders: RateLimit-Policy lists every limit; RateLimit and
// X-RateLimit-* report the binding one: the one that rejected, else the one
// with the fewest units left. The record names the limit that rejected.
func TestLayeredHeaders(t *testing.T) {
	limits := []Limit{
		{Name: "burst", Limit: 3, Per: time.Second},
		{Name: "hourly", Algorithm: AlgFixedWindow, Limit: 5, Per: time.Hour},
	}
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Headers: HeadersIETF, Quota: &Quota{Limits: limits}, Phases: quotaPhase}, 1)
		w := h.do("GET", "/x")
		if got, want := w.Header().Get("RateLimit-Policy"), `"burst";q=3;w=1, "hourly";q=5;w=3600`; got != want {
			t.Errorf("RateLimit-Policy = %q; want %q", got, want)
		}
		if got := w.Header().Get("RateLimit"); got != `"burst";r=2;t=1` {
			t.Errorf("first RateLimit = %q; want the burst limit, 2 left", got)
		}
		for range 3 {
			time.Sleep(time.Second) // synctest: virtual time; the bucket refills
			w = h.do("GET", "/x")
		}
		// 4 of 5 hourly spent: hourly has 1 left, burst 2.
		if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"hourly";r=1;`) {
			t.Errorf("RateLimit after 4 = %q; want hourly with 1 left (the fewest)", got)
		}
		h.do("GET", "/x")
		w = h.do("GET", "/x")
		if w.Code != 429 || !strings.HasPrefix(w.Header().Get("RateLimit"), `"hourly";r=0;`) {
			t.Errorf("sixth: %d, RateLimit %q; want 429 from hourly", w.Code, w.Header().Get("RateLimit"))
		}
		if ra := w.Header().Get("Retry-After"); ra != "3597" {
			t.Errorf("Retry-After = %q; want 3597 (the hour's window ends 3,600s after the 3s the clock reads)", ra)
		}
		as := h.attempts()
		if got := as[len(as)-1].Limit; got != "hourly" {
			t.Errorf("recorded limit = %q; want hourly", got)
		}
		for _, a := range as[:len(as)-1] {
			if a.Limit != "" {
				t.Errorf("allowed attempt records limit %q; want none", a.Limit)
			}
		}
	})

	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Headers: HeadersXRateLimit, Quota: &Quota{Limits: limits}, Phases: quotaPhase}, 1)
		var w *httptest.ResponseRecorder
		for range 4 {
			w = h.do("GET", "/x")
		}
		if w.Code != 429 || w.Header().Get("X-RateLimit-Limit") != "3" || w.Header().Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("fourth at once: %d, X-RateLimit-Limit %q, Remaining %q; want 429 from burst (3, 0)",
				w.Code, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
		}
		h.attempts()
	})
}

// TestTiers: the API key picks the tier (exact, then the longest prefix,
// then the default); a request without a key gets the anonymous tier or
// 401; a key no tier takes gets 401 without a default. Each tier counts
// apart, and the record names "tier/limit".
func TestTiers(t *testing.T) {
	tiers := []Tier{
		{Name: "free", Keys: []string{"free-*"}, Limits: []Limit{{Limit: 1, Per: time.Hour, Key: KeyAPIKey}}, Default: true},
		{Name: "paid", Keys: []string{"paid-*", "vip"}, Limits: []Limit{{Limit: 3, Per: time.Hour, Key: KeyAPIKey}}},
		{Name: "paid-eu", Keys: []string{"paid-eu-*"}, Limits: []Limit{{Limit: 2, Per: time.Hour, Key: KeyAPIKey}}},
	}
	allowed := func(h *harness, n int, hdr ...string) (ok int, last *httptest.ResponseRecorder) {
		for range n {
			last = h.do("GET", "/x", hdr...)
			if last.Code == 200 {
				ok++
			}
		}
		return ok, last
	}
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Quota: &Quota{Tiers: tiers}, Phases: quotaPhase}, 1)
		for _, tt := range []struct {
			hdr  []string
			want int
		}{
			{[]string{"X-Api-Key", "free-a"}, 1},
			{[]string{"Authorization", "Bearer paid-a"}, 3},
			{[]string{"X-Api-Key", "vip"}, 3},
			{[]string{"X-Api-Key", "paid-eu-1"}, 2}, // the longest prefix
			{[]string{"X-Api-Key", "someone"}, 1},   // the default tier
		} {
			if got, _ := allowed(h, 5, tt.hdr...); got != tt.want {
				t.Errorf("%v: %d of 5 allowed; want %d", tt.hdr, got, tt.want)
			}
		}
		if w := h.do("GET", "/x"); w.Code != http.StatusUnauthorized {
			t.Errorf("no key: %d; want 401 (no anonymous tier)", w.Code)
		}
		as := h.attempts()
		if got := as[len(as)-2].Limit; got != "free/default" {
			t.Errorf("recorded limit = %q; want free/default", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		tiers := []Tier{
			{Name: "paid", Keys: []string{"paid-*"}, Limits: []Limit{{Limit: 3, Per: time.Hour}}},
			{Name: "public", Limits: []Limit{{Limit: 2, Per: time.Hour}}, Anonymous: true},
		}
		h := newHarness(t, Config{Quota: &Quota{Tiers: tiers}, Phases: quotaPhase}, 1)
		if got, _ := allowed(h, 5); got != 2 {
			t.Errorf("anonymous: %d of 5 allowed; want 2", got)
		}
		if _, w := allowed(h, 1, "X-Api-Key", "stranger"); w.Code != http.StatusUnauthorized {
			t.Errorf("unknown key without a default tier: %d; want 401", w.Code)
		}
		h.attempts()
	})
}

// TestCosts: a request matching a cost spends that many units of every
// limit; the first match wins; others cost 1.
func TestCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &Quota{
			Limits: []Limit{{Algorithm: AlgFixedWindow, Limit: 10, Per: time.Hour}},
			Costs:  []Cost{{Method: "POST", Path: "/search", Cost: 5}, {Path: "/export/*", Cost: 4}},
		}
		h := newHarness(t, Config{Headers: HeadersXRateLimit, Quota: q, Phases: quotaPhase}, 1)
		for _, tt := range []struct {
			method, path string
			remaining    string
		}{
			{"POST", "/c/1/r/1/search", "5"},
			{"GET", "/c/1/r/2/search", "4"}, // GET /search costs 1
			{"GET", "/c/1/r/3/export/a", "0"},
		} {
			w := h.do(tt.method, tt.path)
			if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != tt.remaining {
				t.Errorf("%s %s: %d, remaining %q; want 200, %s", tt.method, tt.path, w.Code, w.Header().Get("X-RateLimit-Remaining"), tt.remaining)
			}
		}
		h.attempts()
	})
}

// TestRateLimitsThatAreNot429: a limit whose Status is 403 answers 403
// with Retry-After and records its name; a status phase marked rate_limit
// sends Retry-After and an exhausted X-RateLimit-Remaining; a plain 403
// phase sends neither.
func TestRateLimitsThatAreNot429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &Quota{Limits: []Limit{{Name: "secondary", Limit: 1, Per: time.Minute, Algorithm: AlgFixedWindow, Status: 403}}}
		h := newHarness(t, Config{Headers: HeadersXRateLimit, Quota: q, Phases: quotaPhase}, 1)
		h.do("GET", "/x")
		w := h.do("GET", "/x")
		if w.Code != 403 || w.Header().Get("Retry-After") != "60" || w.Header().Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("secondary limit: %d, Retry-After %q, remaining %q; want 403, 60, 0", w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Remaining"))
		}
		as := h.attempts()
		if a := as[1]; a.Status != 403 || a.Limit != "secondary" || a.RetryAfter != "60" || !a.HasNotBefore {
			t.Errorf("record %+v; want 403 from secondary with Retry-After 60 and its not_before", a)
		}
	})
	for _, tt := range []struct {
		rateLimit bool
		ra, rem   string
	}{{true, "7", "0"}, {false, "", ""}} {
		synctest.Test(t, func(t *testing.T) {
			ph := []Phase{{Respond: Respond{Kind: RespondStatus, Status: 403, RateLimit: tt.rateLimit},
				RetryAfter: RetryAfter{Form: FormDelta, Fixed: 7 * time.Second}}}
			h := newHarness(t, Config{Headers: HeadersXRateLimit, Phases: ph}, 1)
			w := h.do("GET", "/x")
			if w.Code != 403 || w.Header().Get("Retry-After") != tt.ra || w.Header().Get("X-RateLimit-Remaining") != tt.rem {
				t.Errorf("rate_limit %v: %d, Retry-After %q, remaining %q; want 403, %q, %q",
					tt.rateLimit, w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Remaining"), tt.ra, tt.rem)
			}
			h.attempts()
		})
	}
}

// TestShaperHoldsRequests: a shaping limit answers 200 after holding the
// request its turn, and 429 past MaxDelay.
func TestShaperHoldsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &Quota{Limits: []Limit{{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 5, Per: time.Second, Burst: 1, MaxDelay: 500 * time.Millisecond}}}
		h := newHarness(t, Config{Quota: q, Phases: quotaPhase}, 1)
		start := time.Now()
		codes := make(chan int, 4)
		for range 4 {
			go func() { codes <- h.do("GET", "/x").Code }()
		}
		synctest.Wait()
		got := map[int]int{}
		for range 4 {
			got[<-codes]++
		}
		// Held 0, 200ms, 400ms; the fourth would wait 600ms > 500ms.
		if got[200] != 3 || got[429] != 1 {
			t.Errorf("codes %v; want three 200 and one 429", got)
		}
		if el := time.Since(start); el != 400*time.Millisecond {
			t.Errorf("the last held request answered after %v; want 400ms", el)
		}
		h.attempts()
	})
}

func TestValidateQuota(t *testing.T) {
	tests := []struct {
		q    Quota
		want []string
	}{
		{Quota{}, []string{"quota.limits: a quota needs at least one limit"}},
		{Quota{Limits: []Limit{{Limit: 1}}, Tiers: []Tier{{Name: "a", Limits: []Limit{{Limit: 1}}}}}, []string{"limits and tiers both set"}},
		{Quota{Limits: []Limit{{Limit: 1, Per: time.Second}, {Limit: 2, Per: time.Second}}}, []string{`quota.limits[1].name: limits[0] and limits[1] are both named "second"`}},
		{Quota{Limits: []Limit{{Limit: 1, Mode: ModeShape}}}, []string{"quota.limits[0].mode: mode is the leaky bucket's"}},
		{Quota{Limits: []Limit{{Limit: 1, Algorithm: AlgLeakyBucket, MaxDelay: time.Second}}}, []string{"quota.limits[0].max_delay: max_delay bounds a shaper's hold"}},
		{Quota{Limits: []Limit{{Limit: 1, Status: 418}}}, []string{"quota.limits[0].status: a limit answers 429, 403 or 503"}},
		{Quota{Limits: []Limit{{Limit: 1 << 20, Algorithm: AlgSlidingWindowLog}}}, []string{"quota.limits[0].rate: a sliding-window-log keeps one timestamp"}},
		{Quota{Limits: make([]Limit, 9)}, []string{"quota.limits: 9 limits; at most 8"}},
		{Quota{Tiers: []Tier{
			{Name: "a", Keys: []string{"k-*"}, Limits: []Limit{{Limit: 1}}, Default: true},
			{Name: "a", Keys: []string{"k-*", "x*y"}, Default: true},
		}}, []string{`quota.tiers[1].name: tier "a" named twice`, `quota.tiers[1].limits: tier "a" has no limits`,
			`quota.tiers[1].keys[0]: key "k-*" already in tier "a"`, `quota.tiers[1].keys[1]: key "x*y": "*" may only end a prefix`,
			`quota.tiers[1].default: tier "a" is default, and so is tier "a"`}},
		{Quota{Limits: []Limit{{Limit: 1}}, Costs: []Cost{{Path: "[", Cost: 1}, {Cost: 0}}}, []string{"quota.costs[0].path: bad path pattern", "quota.costs[1].cost: cost 0"}},
		{Quota{Limits: []Limit{{Limit: 10, Burst: 4}}, Costs: []Cost{{Path: "/big", Cost: 5}}}, []string{`quota.costs[0].cost: cost 5 exceeds limit "default"'s capacity of 4`}},
		{Quota{Limits: []Limit{{Limit: 1}}, Backend: "mysql://x", OnError: "maybe"}, []string{"quota.backend: unknown backend", `quota.on_error: unknown "maybe"`}},
	}
	for _, tt := range tests {
		err := Config{Quota: &tt.q}.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil; want %q", tt.q, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %q; want it to contain %q", tt.q, err, w)
			}
		}
	}
	ok := Quota{Limits: []Limit{{Limit: 5, Per: time.Second}, {Limit: 60, Per: time.Minute}}, Costs: []Cost{{Method: "POST", Path: "/s/*", Cost: 3}}, Backend: "redis://127.0.0.1:6379/0", OnError: OnErrorOpen}
	if err := (Config{Quota: &ok}).Validate(); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}

// TestBackendLogRedacted: the line a failing backend logs names the
// backend without its password.
func TestBackendLogRedacted(t *testing.T) {
	var buf bytes.Buffer
	s, err := New(Config{Quota: &Quota{Limits: []Limit{{Limit: 1}}, Backend: "redis://u:hunter2@cache:6379/0"},
		Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}},
		Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)), NewLimiter: func(LimiterSpec) (Limiter, error) { return failingLimiter{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/c/1/r/1", nil))
	if got := buf.String(); !strings.Contains(got, "quota backend failed") || !strings.Contains(got, "redis://u:xxxxx@cache:6379/0") || strings.Contains(got, "hunter2") {
		t.Errorf("log %q; want the failure, the backend redis://u:xxxxx@cache:6379/0, no password", got)
	}
}

// TestPlain429SendsRateLimitHeaders: a 429 the stub answers without a
// quota's decision (a status phase, a mix) is a rate limit: it carries the
// configured headers with nothing remaining, reset at its not_before, else
// at the phase's end, else one second on; the record holds them.
func TestPlain429SendsRateLimitHeaders(t *testing.T) {
	at := epoch2000.Unix()
	delta := RetryAfter{Form: FormDelta, Fixed: 3 * time.Second}
	s429 := Respond{Kind: RespondStatus, Status: 429}
	quota := &Quota{Limits: []Limit{{Name: "second", Limit: 10, Per: time.Second}}}
	for _, tt := range []struct {
		name    string
		headers string
		quota   *Quota
		phases  []Phase
		want    map[string]string // header → value
		record  string
	}{
		{"x-ratelimit delta", HeadersXRateLimit, nil, []Phase{{Respond: s429, RetryAfter: delta}},
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(at+3, 10), "X-RateLimit-Limit": ""},
			"X-RateLimit-Remaining: 0; X-RateLimit-Reset: " + strconv.FormatInt(at+3, 10)},
		{"x-ratelimit no retry-after: phase end", HeadersXRateLimit, nil, []Phase{{For: 10 * time.Second, Respond: s429}, {}},
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(at+10, 10)},
			"X-RateLimit-Remaining: 0; X-RateLimit-Reset: " + strconv.FormatInt(at+10, 10)},
		{"ietf garbage in the last phase: one second", HeadersIETF, nil, []Phase{{Respond: s429, RetryAfter: RetryAfter{Form: FormGarbage}}},
			map[string]string{"RateLimit": `"default";r=0;t=1`, "RateLimit-Policy": ""},
			`RateLimit: "default";r=0;t=1`},
		{"ietf date", HeadersIETF, nil, []Phase{{Respond: s429, RetryAfter: RetryAfter{Form: FormDate, Fixed: 5 * time.Second}}},
			map[string]string{"RateLimit": `"default";r=0;t=5`},
			`RateLimit: "default";r=0;t=5`},
		{"ietf mix 429", HeadersIETF, nil, []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Status: 429, Weight: 1}}}, RetryAfter: delta}},
			map[string]string{"RateLimit": `"default";r=0;t=3`},
			`RateLimit: "default";r=0;t=3`},
		{"ietf with a quota elsewhere publishes its policy", HeadersIETF, quota, []Phase{{For: time.Minute, Respond: s429, RetryAfter: delta}, {Respond: Respond{Kind: RespondQuota}}},
			map[string]string{"RateLimit": `"second";r=0;t=3`, "RateLimit-Policy": `"second";q=10;w=1`},
			`RateLimit-Policy: "second";q=10;w=1; RateLimit: "second";r=0;t=3`},
		{"x-ratelimit with a quota elsewhere publishes its limit", HeadersXRateLimit, quota, []Phase{{For: time.Minute, Respond: s429, RetryAfter: delta}, {Respond: Respond{Kind: RespondQuota}}},
			map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "0"},
			"X-RateLimit-Limit: 10; X-RateLimit-Remaining: 0; X-RateLimit-Reset: " + strconv.FormatInt(at+3, 10)},
		{"no family, no headers", "", nil, []Phase{{Respond: s429, RetryAfter: delta}},
			map[string]string{"X-RateLimit-Remaining": "", "RateLimit": ""}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Headers: tt.headers, Quota: tt.quota, Phases: tt.phases}, 1)
				w := h.do("GET", "/c/1/r/1")
				if w.Code != 429 {
					t.Fatalf("status %d; want 429", w.Code)
				}
				for k, v := range tt.want {
					if got := w.Header().Get(k); got != v {
						t.Errorf("%s = %q; want %q", k, got, v)
					}
				}
				as := h.attempts()
				if len(as) != 1 || as[0].RateLimit != tt.record {
					t.Errorf("records %+v; want one with RateLimit %q", as, tt.record)
				}
			})
		})
	}
}
