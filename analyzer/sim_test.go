package analyzer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// A sim is a synthetic fleet against a synthetic server, in virtual time: it
// produces the timeline a run would record, so every check can be tested on
// a client that makes one mistake and on one that behaves.
type sim struct {
	clients  int
	requests int           // logical requests per client (default 1)
	spread   time.Duration // clients start uniformly over [0, spread) (0: all at once)
	poisson  bool          // with spread: starts as a Poisson process of rate clients/spread instead
	late     time.Duration // a loaded host: each start and each wait comes U[0, late) late
	think    time.Duration
	latency  time.Duration // default 2ms
	method   string        // default GET
	idem     bool          // send an Idempotency-Key
	seed     uint64

	// server answers an attempt arriving at `at`: status, and the
	// Retry-After it sends (raw) with its not_before (has=false: none/unusable).
	server func(at time.Duration) (status int, ra string, notBefore time.Duration, has bool)
	// mark, when set, completes each attempt the server answered (the
	// rate-limit headers it sent, the limit that rejected it).
	mark func(a *timeline.Attempt)

	// client behaviour
	delay       func(k int, r *rand.Rand, prev time.Duration) time.Duration // delay before retry k (1-based); prev: the last delay
	delayAt     func(k int, r *rand.Rand, now time.Duration) time.Duration  // when set, replaces delay: now is the response's time
	honorRA     bool                                                        // wait until not_before when there is one
	raJitter    time.Duration                                               // extra U(0, raJitter) on top of Retry-After
	maxAttempts int                                                         // 0: unbounded (capped at 200)
	budget      time.Duration                                               // give up when the next wait would pass it (0: none)
	overrun     time.Duration                                               // a buggy client: ignores the budget by this much
	retry4xx    bool
	stop403     bool          // stops on every 403, a rate limit too (as most libraries do)
	hang        bool          // outcomes of failed requests are "hung"
	raExtra     time.Duration // fixed extra wait on top of Retry-After
	// claim: each retry claims the wait its client meant (WaitClaim),
	// passed through claimed (nil: as meant) to make a client that lies.
	claim   bool
	claimed func(meant time.Duration) time.Duration

	policy *timeline.Policy
	// noise is the host noise the end record states (nil: unmeasured);
	// late is what the sim's host really did.
	noise  *timeline.Noise
	expect *timeline.Expect
	quota  *timeline.Quota
	phases []timeline.Phase
}

func (s *sim) meta() *timeline.Meta {
	return &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "sim", Subject: "sim", Seed: int64(s.seed),
		Policy: s.policy, Expect: s.expect, Quota: s.quota, Phases: s.phases, Scheduled: int64(s.clients * max(s.requests, 1))}
}

// records runs the fleet and returns its records (meta first), attempts and
// outcomes in the order a recorder writes them: by the time they are done.
func (s *sim) records() []timeline.Record {
	r := rand.New(rand.NewPCG(s.seed, 7))
	lat := s.latency
	if lat == 0 {
		lat = 2 * time.Millisecond
	}
	method := s.method
	if method == "" {
		method = "GET"
	}
	reqs := max(s.requests, 1)
	type ev struct {
		t   time.Duration
		rec timeline.Record
	}
	var evs []*ev
	noise := func() time.Duration {
		if s.late <= 0 {
			return 0
		}
		return time.Duration(r.Int64N(int64(s.late)))
	}
	var arrival time.Duration // Poisson starts
	for c := 0; c < s.clients; c++ {
		t := time.Duration(0)
		if s.spread > 0 && s.poisson {
			arrival += time.Duration(r.ExpFloat64() * float64(s.spread) / float64(s.clients))
			t = arrival
		} else if s.spread > 0 {
			t = time.Duration(r.Int64N(int64(s.spread)))
		}
		client := strconv.Itoa(c)
		for q := 0; q < reqs; q++ {
			key := client + "/" + strconv.Itoa(q)
			scheduled := t
			t += noise()
			start := t
			var prevDelay time.Duration
			meant := time.Duration(-1)
			result, status, n := "", 0, 0
			for {
				n++
				at := t
				st, ra, nb, has := s.server(at)
				done := at + lat
				a := timeline.Attempt{Client: client, Key: key, Attempt: n, Method: method, Path: "/c/" + key,
					At: int64(at), Done: int64(done), Status: st, RetryAfter: ra, Idempotent: s.idem}
				if has {
					a.NotBefore, a.HasNotBefore = int64(nb), true
				}
				if s.claim && meant >= 0 {
					c := meant
					if s.claimed != nil {
						c = s.claimed(meant)
					}
					a.WaitClaim = fmt.Sprintf("%d.%06d", c/time.Millisecond, c%time.Millisecond)
				}
				if s.mark != nil {
					s.mark(&a)
				}
				evs = append(evs, &ev{done, timeline.Record{Type: timeline.TypeAttempt, Attempt: a}})
				status = st
				t = done
				if st < 300 {
					result = timeline.ResultOK
					break
				}
				// A correct client retries what the server asks it to:
				// 429, 5xx and other rate limits (a 403 with Retry-After).
				if (!ClassifyResponse(&a).Retryable() && !s.retry4xx) || (st == 403 && s.stop403) {
					result = timeline.ResultNonRetryable
					break
				}
				if (s.maxAttempts > 0 && n >= s.maxAttempts) || n >= 200 {
					result = timeline.ResultGaveUp
					break
				}
				var d time.Duration
				if has && s.honorRA {
					d = max(nb-done, 0)
					d += s.raExtra
					if s.raJitter > 0 {
						d += time.Duration(r.Int64N(int64(s.raJitter)))
					}
				} else if s.delayAt != nil {
					d = s.delayAt(n, r, t)
				} else {
					d = s.delay(n, r, prevDelay)
					prevDelay = d
				}
				meant = d
				d += noise()
				if s.budget > 0 && t+d-start > s.budget+s.overrun {
					result = timeline.ResultBudget
					break
				}
				t += d
			}
			if result != timeline.ResultOK && s.hang {
				result = timeline.ResultHung
				t += time.Minute
			}
			o := timeline.Outcome{Client: client, Key: key, Scheduled: int64(scheduled), Start: int64(start), End: int64(t),
				Result: result, Status: status, Attempts: n}
			evs = append(evs, &ev{t, timeline.Record{Type: timeline.TypeOutcome, Outcome: o}})
			t += s.think
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	m := s.meta()
	out := []timeline.Record{{Type: timeline.TypeMeta, Meta: m}}
	for _, e := range evs {
		out = append(out, e.rec)
	}
	end := &timeline.End{Reason: timeline.EndCompleted, Noise: s.noise}
	if len(evs) > 0 {
		end.At = int64(evs[len(evs)-1].t)
	}
	return append(out, timeline.Record{Type: timeline.TypeEnd, End: end})
}

// verdict feeds the sim's records to a fresh Analyzer.
func (s *sim) verdict(opts Options) *Verdict {
	recs := s.records()
	an := New(recs[0].Meta, opts)
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	return an.Result()
}

// ndjson encodes records as a timeline stream.
func ndjson(t testing.TB, recs []timeline.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	for i := range recs {
		var err error
		switch recs[i].Type {
		case timeline.TypeMeta:
			err = enc.EncodeMeta(recs[i].Meta)
		case timeline.TypeAttempt:
			err = enc.EncodeAttempt(&recs[i].Attempt)
		case timeline.TypeOutcome:
			err = enc.EncodeOutcome(&recs[i].Outcome)
		case timeline.TypeEnd:
			err = enc.EncodeEnd(recs[i].End)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Servers.

// outage answers 503 (with the given Retry-After form) until end, then 200.
func outage(end time.Duration, form string) func(time.Duration) (int, string, time.Duration, bool) {
	return func(at time.Duration) (int, string, time.Duration, bool) {
		if at >= end {
			return 200, "", 0, false
		}
		switch form {
		case "phase-end": // an HTTP-date: rounded up to the second
			nb := (end + time.Second - 1).Truncate(time.Second)
			return 503, "date", nb, true
		case "delta1":
			return 503, "1", at + 2*time.Millisecond + time.Second, true
		case "negative":
			return 503, "-5", 0, false
		case "past-date": // allows an immediate retry: not_before before the response
			return 503, "past", at - time.Second, true
		case "zero":
			return 503, "0", at + 2*time.Millisecond, true
		case "garbage":
			return 503, "soon", 0, false
		}
		return 503, "", 0, false
	}
}

// limited answers 403 until end, a rate limit as how marks it (see
// markLimited), then 200: with form "delta1" a Retry-After of 1 s.
func limited(end time.Duration, form string) func(time.Duration) (int, string, time.Duration, bool) {
	return func(at time.Duration) (int, string, time.Duration, bool) {
		if at >= end {
			return 200, "", 0, false
		}
		if form == "delta1" {
			return 403, "1", at + 2*time.Millisecond + time.Second, true
		}
		return 403, "", 0, false
	}
}

// markLimited marks 403s as rate limits without a Retry-After: "headers"
// by X-RateLimit-Remaining: 0, "ietf" by RateLimit r=0, "limit" by the
// quota's limit "minute" rejecting them; "" leaves them plain 403s.
func markLimited(how string) func(a *timeline.Attempt) {
	return func(a *timeline.Attempt) {
		if a.Status != 403 {
			return
		}
		switch how {
		case "headers":
			a.RateLimit = "X-RateLimit-Limit: 60; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1767225600"
		case "ietf":
			a.RateLimit = `RateLimit: "default";r=0;t=1`
		case "limit":
			a.Limit = "minute"
		}
	}
}

func always(status int) func(time.Duration) (int, string, time.Duration, bool) {
	return func(time.Duration) (int, string, time.Duration, bool) { return status, "", 0, false }
}

// Client delays.

func fullJitter(base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, r *rand.Rand, _ time.Duration) time.Duration {
		b := min(cap, base<<(k-1))
		return time.Duration(r.Int64N(int64(b) + 1))
	}
}

func equalJitter(base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, r *rand.Rand, _ time.Duration) time.Duration {
		b := min(cap, base<<(k-1))
		return b/2 + time.Duration(r.Int64N(int64(b/2)+1))
	}
}

func decorrelated(base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, r *rand.Rand, prev time.Duration) time.Duration {
		if prev < base {
			prev = base
		}
		return min(cap, base+time.Duration(r.Int64N(int64(3*prev-base)+1)))
	}
}

func noJitter(base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, _ *rand.Rand, _ time.Duration) time.Duration { return min(cap, base<<(k-1)) }
}

func fixed(d time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(int, *rand.Rand, time.Duration) time.Duration { return d }
}

// narrow is d ± spread, uniformly.
func narrow(d, spread time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(_ int, r *rand.Rand, _ time.Duration) time.Duration {
		return d - spread + time.Duration(r.Int64N(int64(2*spread)+1))
	}
}

func instant() func(int, *rand.Rand, time.Duration) time.Duration {
	return func(_ int, r *rand.Rand, _ time.Duration) time.Duration {
		return time.Duration(r.Int64N(int64(5 * time.Millisecond)))
	}
}

func policy(base, cap time.Duration, maxAttempts int, budget time.Duration, jitter string) *timeline.Policy {
	return &timeline.Policy{Base: int64(base), Cap: int64(cap), MaxAttempts: maxAttempts, Budget: int64(budget), Jitter: jitter}
}

func describe(v *Verdict) string {
	var b bytes.Buffer
	for _, c := range v.Checks {
		fmt.Fprintf(&b, "%s=%s(%.3g/%.3g) ", c.ID, c.Status, c.Figure, c.Threshold)
	}
	return b.String()
}
