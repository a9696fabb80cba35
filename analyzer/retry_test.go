package analyzer

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// retryTally counts the facts OnRetry reports as the verdict counts them.
type retryTally struct {
	retries, paced, early, bounded, beyond, honoured int64
}

func (t *retryTally) add(r Retry) {
	t.retries++
	if r.Paced {
		t.paced++
	}
	if r.Early {
		t.early++
	}
	if r.Honoured() {
		t.honoured++
	}
	if r.Bounded {
		t.bounded++
	}
	if r.Beyond {
		t.beyond++
	}
}

// judgedBad is what a check judged and how many of them offended, read back
// from its result (retry-after's figure is a count, jitter-bounds' a
// percentage); 0, 0 for a skipped check.
func judgedBad(t *testing.T, v *Verdict, id string) (judged, bad int64) {
	t.Helper()
	c := v.Check(id)
	if c.Status == StatusSkip {
		return 0, 0
	}
	switch id {
	case CheckRetryAfter:
		return c.Samples, int64(c.Figure)
	case CheckJitterBounds:
		return c.Samples, int64(math.Round(c.Figure * float64(c.Samples) / 100))
	}
	t.Fatalf("judgedBad(%s)", id)
	return 0, 0
}

// TestOnRetryFacts: the facts of each paired retry, on a hand-made timeline
// whose records come out of order, with the check's tolerances as the
// options set them.
func TestOnRetryFacts(t *testing.T) {
	meta := &timeline.Meta{Recorder: "run", Policy: policy(100*ms, s1, 5, 10*s1, "full")}
	ns := func(d time.Duration) int64 { return int64(d) }
	att := func(n int, at, done time.Duration, status int, nb time.Duration) *timeline.Record {
		a := timeline.Attempt{Client: "c", Key: "k", Attempt: n, Method: "GET", Path: "/", At: ns(at), Done: ns(done), Status: status}
		if nb != 0 {
			a.NotBefore, a.HasNotBefore = ns(nb), true
		}
		return &timeline.Record{Type: timeline.TypeAttempt, Attempt: a}
	}
	recs := []*timeline.Record{
		att(1, 0, 2*ms, 503, 502*ms),        // paces the next until 502ms
		att(3, 751*ms, 753*ms, 503, 0),      // before its predecessor: paired when it comes
		att(2, 499*ms, 501*ms, 503, 0),      // 3ms before not_before
		att(4, 800*ms, 802*ms, 503, 700*ms), // a Retry-After in the past paces nothing
		att(5, 803*ms, 805*ms, 200, 0),
	}
	run := func(opts Options) ([]Retry, *Verdict) {
		var got []Retry
		opts.OnRetry = func(r Retry) { got = append(got, r) }
		an := New(meta, opts)
		for _, r := range recs {
			an.Add(r)
		}
		return got, an.Result()
	}
	retry := func(n int, prev, at time.Duration, status int) Retry {
		return Retry{Client: "c", Key: "k", Attempt: n, Number: n - 1, Status: status, Class: ResponseUnavailable, Prev: ns(prev), At: ns(at)}
	}
	r1 := retry(2, 2*ms, 499*ms, 503)
	r1.Paced, r1.NotBefore, r1.Own = true, ns(502*ms), 0 // honoured within the 5ms tolerance
	r2 := retry(3, 501*ms, 751*ms, 503)
	r2.Own, r2.Bounded, r2.Bound, r2.Beyond = ns(250*ms), true, ns(200*ms), true // 250ms > 200ms + 25ms
	r3 := retry(4, 753*ms, 800*ms, 503)
	r3.Own, r3.Bounded, r3.Bound = ns(47*ms), true, ns(400*ms)
	r4 := retry(5, 802*ms, 803*ms, 503)
	r4.Own, r4.Bounded, r4.Bound = ns(1*ms), true, ns(800*ms)

	got, v := run(Options{})
	if want := []Retry{r1, r2, r3, r4}; !reflect.DeepEqual(got, want) {
		t.Errorf("facts =\n%+v\nwant\n%+v", got, want)
	}
	if j, b := judgedBad(t, v, CheckRetryAfter); j != 1 || b != 0 {
		t.Errorf("retry-after judged %d, bad %d; want 1, 0", j, b)
	}
	if j, b := judgedBad(t, v, CheckJitterBounds); j != 3 || b != 1 {
		t.Errorf("jitter-bounds judged %d, bad %d; want 3, 1", j, b)
	}

	// A tighter retry-after tolerance makes the first retry early (its own
	// wait then counts from the response); a wider jitter-bounds one
	// forgives the second.
	got, v = run(Options{Checks: []CheckSpec{mustSpec(t, "retry-after:tolerance=0.001"), mustSpec(t, "jitter-bounds:tolerance=0.1")}})
	r1.Early, r1.Own = true, ns(497*ms)
	r2.Beyond = false
	if want := []Retry{r1, r2, r3, r4}; !reflect.DeepEqual(got, want) {
		t.Errorf("with tolerances: facts =\n%+v\nwant\n%+v", got, want)
	}
	if j, b := judgedBad(t, v, CheckRetryAfter); j != 1 || b != 1 {
		t.Errorf("with tolerances: retry-after judged %d, bad %d; want 1, 1", j, b)
	}
	an := New(meta, Options{Checks: []CheckSpec{mustSpec(t, "retry-after:tolerance=0.001"), mustSpec(t, "jitter-bounds:tolerance=0.1")}})
	if ra, jb := an.Tolerances(); ra != time.Millisecond || jb != 100*time.Millisecond {
		t.Errorf("Tolerances() = %v, %v; want 1ms, 100ms", ra, jb)
	}
	for k, want := range map[int]time.Duration{0: -1, 1: 100 * ms, 2: 200 * ms, 4: 800 * ms, 5: s1, 40: s1} {
		b, ok := an.Bound(k)
		if want < 0 && ok || want >= 0 && (!ok || b != want) {
			t.Errorf("Bound(%d) = %v, %v; want %v", k, b, ok, want)
		}
	}
}

// TestOnRetryReusedKey: in a serve recording an attempt after a success is
// a new logical request, not a retry: no fact for it.
func TestOnRetryReusedKey(t *testing.T) {
	var got []int
	an := New(&timeline.Meta{Recorder: "serve"}, Options{OnRetry: func(r Retry) { got = append(got, r.Attempt) }})
	for i, st := range []int{200, 503, 200, 503} {
		an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "ip", Key: "GET /x",
			Attempt: i + 1, Method: "GET", Path: "/x", At: int64(i) * int64(s1), Done: int64(i)*int64(s1) + int64(ms), Status: st}})
	}
	if !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("retries reported: attempts %v; want [3] (1, 2 and 4 start logical requests)", got)
	}
}

// TestOnRetryAgreesWithVerdict: over fleets that honour, ignore or get no
// Retry-After, in order and shuffled, the facts count what the checks
// judged, and every paired retry is reported once.
func TestOnRetryAgreesWithVerdict(t *testing.T) {
	pol := policy(100*ms, 2*s1, 8, 20*s1, "full")
	sims := map[string]sim{
		"honours":        {clients: 80, server: outage(3*s1, "phase-end"), honorRA: true, delay: fullJitter(100*ms, 2*s1), maxAttempts: 8, policy: pol, seed: 1},
		"ignores":        {clients: 80, server: outage(3*s1, "delta1"), delay: fullJitter(100*ms, 2*s1), maxAttempts: 8, policy: pol, seed: 2},
		"no jitter":      {clients: 80, server: outage(3*s1, ""), delay: noJitter(150*ms, 3*s1), maxAttempts: 8, policy: pol, seed: 3},
		"past date":      {clients: 80, server: outage(3*s1, "past-date"), honorRA: true, delay: fixed(300 * ms), maxAttempts: 8, policy: pol, seed: 4},
		"jitter on top":  {clients: 80, server: outage(3*s1, "phase-end"), honorRA: true, raJitter: s1, delay: fullJitter(100*ms, 2*s1), maxAttempts: 8, policy: pol, seed: 5},
		"without policy": {clients: 80, server: outage(3*s1, "delta1"), delay: fixed(700 * ms), maxAttempts: 8, seed: 6},
	}
	for name, s := range sims {
		for _, shuffled := range []bool{false, true} {
			recs := s.records()
			if shuffled {
				r := rand.New(rand.NewPCG(s.seed, 9))
				for i := 2; i < len(recs)-1; i++ { // swap neighbours now and then, the end record last
					if r.IntN(3) == 0 {
						recs[i-1], recs[i] = recs[i], recs[i-1]
					}
				}
			}
			var tally retryTally
			an := New(recs[0].Meta, Options{OnRetry: tally.add})
			for i := 1; i < len(recs); i++ {
				an.Add(&recs[i])
			}
			v := an.Result()
			if tally.retries == 0 || tally.retries != v.Figures.Retries || tally.retries != v.Figures.ServerPaced+v.Figures.ClientPaced {
				t.Errorf("%s (shuffled %v): %d facts; want every retry once (%d, %d server- + %d client-paced)", name, shuffled,
					tally.retries, v.Figures.Retries, v.Figures.ServerPaced, v.Figures.ClientPaced)
			}
			if v.Figures.ServerPaced > tally.honoured {
				t.Errorf("%s (shuffled %v): %d server-paced of %d that honoured a Retry-After", name, shuffled, v.Figures.ServerPaced, tally.honoured)
			}
			if j, b := judgedBad(t, v, CheckRetryAfter); j != tally.paced || b != tally.early {
				t.Errorf("%s (shuffled %v): retry-after judged %d, bad %d; facts: %d paced, %d early", name, shuffled, j, b, tally.paced, tally.early)
			}
			if j, b := judgedBad(t, v, CheckJitterBounds); j != tally.bounded || b != tally.beyond {
				t.Errorf("%s (shuffled %v): jitter-bounds judged %d, bad %d; facts: %d bounded, %d beyond", name, shuffled, j, b, tally.bounded, tally.beyond)
			}
		}
	}
}

// TestOnRetryClass: each retry carries what the response before it asked
// (ClassifyResponse), so a consumer tells a 403 rate limit from a refusal
// without a rule of its own.
func TestOnRetryClass(t *testing.T) {
	var got []ResponseClass
	an := New(&timeline.Meta{Recorder: "run"}, Options{OnRetry: func(r Retry) { got = append(got, r.Class) }})
	prev := []timeline.Attempt{
		{Status: 403, Limit: "minute"},
		{Status: 403},
		{Status: 429},
		{Status: 503},
		{Status: 403, RateLimit: "X-RateLimit-Remaining: 0"},
		{Fault: timeline.FaultReset},
	}
	for i, a := range append(prev, timeline.Attempt{Status: 200}) {
		a.Client, a.Key, a.Attempt, a.Method = "c", "k", i+1, "GET"
		a.At, a.Done = int64(i)*int64(s1), int64(i)*int64(s1)+int64(ms)
		an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: a})
	}
	want := []ResponseClass{ResponseRateLimit, ResponseRefusal, ResponseRateLimit, ResponseUnavailable, ResponseRateLimit, ResponseNone}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classes %v; want %v", got, want)
	}
}

// TestAbandonedAttemptFailsAtItsTimeout: a client that left an attempt at
// its attempt timeout never saw the response the stub wrote later (a
// stub with finite capacity serves queued work long after), nor its
// Retry-After. Its retry's wait counts from the timeout, and the
// Retry-After paces nothing: read from the stub's late response, the
// retry came 220 ms before it, which is neither instant nor early.
func TestAbandonedAttemptFailsAtItsTimeout(t *testing.T) {
	meta := &timeline.Meta{Recorder: "run", Policy: policy(100*ms, s1, 5, 10*s1, "full"),
		Fleet: &timeline.Fleet{AttemptTimeout: int64(100 * ms)}}
	recs := []*timeline.Record{
		{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: "k", Attempt: 1, Method: "GET", Path: "/",
			At: int64(10 * ms), Done: int64(400 * ms), Status: 429, Fault: timeline.FaultAbandoned, RetryAfter: "1",
			NotBefore: int64(1400 * ms), HasNotBefore: true}},
		{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: "k", Attempt: 2, Method: "GET", Path: "/",
			At: int64(180 * ms), Done: int64(181 * ms), Status: 200}},
	}
	var got []Retry
	an := New(meta, Options{OnRetry: func(r Retry) { got = append(got, r) }})
	for _, r := range recs {
		an.Add(r)
	}
	v := an.Result()
	if len(got) != 1 {
		t.Fatalf("%d retries reported; want 1", len(got))
	}
	if r := got[0]; r.Prev != int64(110*ms) || r.Own != int64(70*ms) || r.Paced || r.Early {
		t.Errorf("retry = %+v; want Prev 110ms (the timeout), Own 70ms, not paced", r)
	}
	if c := v.Check(CheckRetryAfter); c.Status == StatusFail {
		t.Errorf("retry-after = %s (%s); want no early retry: the client never saw the Retry-After", c.Status, c.Reason)
	}
	if c := v.Check(CheckInstantRetry); c.Status == StatusFail {
		t.Errorf("instant-retry = %s (%s); want no instant retry: it waited 70ms after its timeout", c.Status, c.Reason)
	}
}
