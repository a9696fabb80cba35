package analyzer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

const (
	ms = time.Millisecond
	s1 = time.Second
)

// TestChecks runs each check against a synthetic fleet that makes the
// mistake it is for, and against one that behaves.
func TestChecks(t *testing.T) {
	stated := policy(100*ms, 5*s1, 6, 20*s1, "full")
	full := fullJitter(100*ms, 5*s1)
	// Each case carries its own data: a sim without a policy gets the
	// stated one unless noPolicy says the timeline states none, and a sim
	// without a cap or budget gets 6 attempts unless unbounded.
	tests := []struct {
		name      string
		sim       sim
		opts      Options
		check     string
		want      string
		noPolicy  bool
		unbounded bool
	}{
		// retry-after
		{"honours HTTP-date", sim{server: outage(3*s1, "phase-end"), honorRA: true, delay: full}, Options{}, CheckRetryAfter, StatusPass, false, false},
		{"honours delta", sim{server: outage(3*s1, "delta1"), honorRA: true, delay: full}, Options{}, CheckRetryAfter, StatusPass, false, false},
		{"ignores Retry-After", sim{server: outage(3*s1, "phase-end"), delay: full}, Options{}, CheckRetryAfter, StatusFail, false, false},
		{"no Retry-After at all judges nothing", sim{server: outage(3*s1, ""), delay: full}, Options{}, CheckRetryAfter, StatusSkip, false, false},
		{"a past date paces nothing", sim{server: outage(3*s1, "past-date"), honorRA: true, delay: full}, Options{}, CheckRetryAfter, StatusSkip, false, false},
		// instant-retry
		{"full jitter is not instant", sim{server: outage(3*s1, ""), delay: full}, Options{}, CheckInstantRetry, StatusPass, false, false},
		{"no backoff", sim{server: outage(3*s1, ""), delay: instant()}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"no backoff, no policy", sim{server: outage(3*s1, ""), delay: instant()}, Options{}, CheckInstantRetry, StatusFail, true, false},
		{"negative Retry-After is malformed: needs backoff", sim{server: outage(3*s1, "negative"), delay: fixed(0)}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"retry at once on a past date", sim{server: outage(3*s1, "past-date"), honorRA: true, delay: full}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"retry at once on Retry-After: 0", sim{server: outage(3*s1, "zero"), honorRA: true, delay: full}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"backoff on a past date", sim{server: outage(3*s1, "past-date"), delay: full}, Options{}, CheckInstantRetry, StatusPass, false, false},
		{"backoff after a negative value", sim{server: outage(3*s1, "negative"), delay: full}, Options{}, CheckInstantRetry, StatusPass, false, false},
		{"garbage Retry-After needs backoff", sim{server: outage(3*s1, "garbage"), delay: fixed(0)}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"small stated base", sim{server: outage(3*s1, ""), delay: fullJitter(10*ms, s1), policy: policy(10*ms, s1, 6, 20*s1, "full")}, Options{}, CheckInstantRetry, StatusPass, false, false},
		// waves
		{"full jitter spreads", sim{server: outage(5*s1, ""), delay: full}, Options{}, CheckWaves, StatusPass, false, false},
		{"decorrelated spreads", sim{server: outage(5*s1, ""), delay: decorrelated(100*ms, 5*s1)}, Options{}, CheckWaves, StatusPass, false, false},
		{"equal jitter spreads", sim{server: outage(5*s1, ""), delay: equalJitter(100*ms, 5*s1)}, Options{}, CheckWaves, StatusPass, false, false},
		{"no jitter", sim{server: outage(5*s1, ""), delay: noJitter(100*ms, 5*s1)}, Options{}, CheckWaves, StatusFail, false, false},
		{"fixed delay", sim{server: outage(5*s1, ""), delay: fixed(s1)}, Options{}, CheckWaves, StatusFail, false, false},
		{"narrow jitter", sim{server: outage(10*s1, ""), delay: narrow(2*s1, 100*ms)}, Options{}, CheckWaves, StatusFail, false, false},
		{"server-paced is not waves", sim{server: outage(5*s1, "phase-end"), honorRA: true, delay: full}, Options{}, CheckWaves, StatusSkip, false, false},
		{"jitter on top of Retry-After", sim{server: outage(5*s1, "phase-end"), honorRA: true, raJitter: s1, delay: full}, Options{}, CheckWaves, StatusPass, false, false},
		{"constant on top of Retry-After is the server's pacing", sim{server: outage(5*s1, "delta1"), honorRA: true, raExtra: 500 * ms, delay: full}, Options{}, CheckWaves, StatusSkip, false, false},
		// non-retryable
		{"retries a 404", sim{server: always(404), retry4xx: true, delay: full, maxAttempts: 3}, Options{}, CheckNonRetryable, StatusFail, false, false},
		{"stops on a 404", sim{server: always(404), delay: full}, Options{}, CheckNonRetryable, StatusPass, false, false},
		{"404 not in the set", sim{server: always(404), retry4xx: true, delay: full, maxAttempts: 3},
			Options{Checks: []CheckSpec{mustSpec(t, "non-retryable:statuses=400|422")}}, CheckNonRetryable, StatusSkip, false, false},
		{"no 4xx sent judges nothing", sim{server: outage(s1, ""), delay: full}, Options{}, CheckNonRetryable, StatusSkip, false, false},
		// idempotency
		{"POST without a key", sim{server: outage(s1, ""), method: "POST", delay: full}, Options{}, CheckIdempotency, StatusFail, false, false},
		{"POST with a key", sim{server: outage(s1, ""), method: "POST", idem: true, delay: full}, Options{}, CheckIdempotency, StatusPass, false, false},
		{"PATCH without a key", sim{server: outage(s1, ""), method: "PATCH", delay: full}, Options{}, CheckIdempotency, StatusFail, false, false},
		{"GET needs no key: nothing to judge", sim{server: outage(s1, ""), delay: full}, Options{}, CheckIdempotency, StatusSkip, false, false},
		// attempts
		{"within max_attempts", sim{server: always(503), delay: full, maxAttempts: 6}, Options{}, CheckAttempts, StatusPass, false, false},
		{"beyond max_attempts", sim{server: always(503), delay: full, maxAttempts: 9}, Options{}, CheckAttempts, StatusFail, false, false},
		{"no stated cap", sim{server: always(503), delay: full, maxAttempts: 9, policy: &timeline.Policy{}}, Options{}, CheckAttempts, StatusSkip, false, false},
		{"cap from a flag", sim{server: always(503), delay: full, maxAttempts: 6},
			Options{Checks: []CheckSpec{mustSpec(t, "attempts:threshold=3")}}, CheckAttempts, StatusFail, false, false},
		// budget
		{"within budget", sim{server: always(503), delay: full, budget: 20 * s1}, Options{}, CheckBudget, StatusPass, false, false},
		{"nothing failed: nothing to judge", sim{server: outage(0, ""), delay: full}, Options{}, CheckBudget, StatusSkip, false, false},
		{"past budget", sim{server: always(503), delay: fixed(s1), maxAttempts: 40, budget: 20 * s1, overrun: 10 * s1}, Options{}, CheckBudget, StatusFail, false, false},
		{"hung", sim{server: always(503), delay: full, hang: true}, Options{}, CheckBudget, StatusFail, false, false},
		// amplification
		{"bounded", sim{server: outage(s1, ""), delay: full}, Options{}, CheckAmplification, StatusPass, false, false},
		{"unbounded", sim{server: outage(30*s1, ""), delay: fixed(100 * ms)}, Options{}, CheckAmplification, StatusFail, false, true},
		{"over the scenario's limit", sim{server: outage(3*s1, ""), delay: full, expect: &timeline.Expect{Thresholds: map[string]float64{"amplification": 2}}},
			Options{}, CheckAmplification, StatusFail, false, false},
		{"over the retry share", sim{server: outage(3*s1, ""), delay: full},
			Options{Checks: []CheckSpec{mustSpec(t, "amplification:retry_share=20")}}, CheckAmplification, StatusFail, false, false},
		// jitter-bounds
		{"full jitter in bounds", sim{server: outage(5*s1, ""), delay: full}, Options{}, CheckJitterBounds, StatusPass, false, false},
		{"decorrelated in bounds", sim{server: outage(5*s1, ""), delay: decorrelated(100*ms, 5*s1), policy: policy(100*ms, 5*s1, 6, 20*s1, "decorrelated")}, Options{}, CheckJitterBounds, StatusPass, false, false},
		{"fixed delay over bounds", sim{server: outage(5*s1, ""), delay: fixed(s1)}, Options{}, CheckJitterBounds, StatusFail, false, false},
		{"off by one exponent", sim{server: outage(5*s1, ""), delay: noJitter(200*ms, 5*s1)}, Options{}, CheckJitterBounds, StatusFail, false, false},
		{"no stated policy", sim{server: outage(5*s1, ""), delay: full, policy: &timeline.Policy{}}, Options{}, CheckJitterBounds, StatusSkip, false, false},
		// 403 rate limits: judged as a 429 would be, everywhere.
		{"403 rate limit: retrying is correct", sim{server: limited(3*s1, "delta1"), honorRA: true, delay: full}, Options{}, CheckNonRetryable, StatusSkip, false, false},
		{"403 rate limit by headers: retrying is correct", sim{server: limited(3*s1, ""), mark: markLimited("headers"), delay: full}, Options{}, CheckNonRetryable, StatusSkip, false, false},
		{"plain 403 retried", sim{server: limited(3*s1, ""), mark: markLimited(""), retry4xx: true, delay: full, maxAttempts: 3}, Options{}, CheckNonRetryable, StatusFail, false, false},
		{"plain 403 with a malformed Retry-After retried", sim{server: always(403), mark: func(a *timeline.Attempt) { a.RetryAfter = "soon" }, retry4xx: true, delay: full, maxAttempts: 3}, Options{}, CheckNonRetryable, StatusFail, false, false},
		{"stops on a plain 403", sim{server: limited(3*s1, ""), delay: full}, Options{}, CheckNonRetryable, StatusPass, false, false},
		{"honours a 403's Retry-After", sim{server: limited(3*s1, "delta1"), honorRA: true, delay: full}, Options{}, CheckRetryAfter, StatusPass, false, false},
		{"ignores a 403's Retry-After", sim{server: limited(3*s1, "delta1"), delay: full}, Options{}, CheckRetryAfter, StatusFail, false, false},
		{"no backoff after a 403 with headers at 0", sim{server: limited(3*s1, ""), mark: markLimited("headers"), delay: instant()}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"no backoff after a 403 with RateLimit r=0", sim{server: limited(3*s1, ""), mark: markLimited("ietf"), delay: instant()}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"no backoff after a 403 a limit rejected", sim{server: limited(3*s1, ""), mark: markLimited("limit"), delay: instant()}, Options{}, CheckInstantRetry, StatusFail, false, false},
		{"backoff after a 403 rate limit", sim{server: limited(3*s1, ""), mark: markLimited("headers"), delay: full}, Options{}, CheckInstantRetry, StatusPass, false, false},
		{"no instant retries judged after plain 403s", sim{server: limited(3*s1, ""), retry4xx: true, delay: instant(), maxAttempts: 3}, Options{}, CheckInstantRetry, StatusSkip, false, false},
		{"no jitter after 403 rate limits", sim{server: limited(5*s1, ""), mark: markLimited("headers"), delay: noJitter(100*ms, 5*s1)}, Options{}, CheckWaves, StatusFail, false, false},
		{"full jitter after 403 rate limits", sim{server: limited(5*s1, ""), mark: markLimited("headers"), delay: full}, Options{}, CheckWaves, StatusPass, false, false},
		{"a 403's Retry-After honoured is the server's pacing", sim{server: limited(5*s1, "delta1"), honorRA: true, delay: full}, Options{}, CheckWaves, StatusSkip, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sim
			s.clients, s.seed = 300, 1
			if s.policy == nil && !tt.noPolicy {
				s.policy = stated
			}
			if s.maxAttempts == 0 && s.budget == 0 && !tt.unbounded {
				s.maxAttempts = 6
			}
			v := s.verdict(tt.opts)
			c := v.Check(tt.check)
			if c.Status != tt.want {
				t.Errorf("%s: status = %s (figure %.3g, threshold %.3g, %s); want %s", tt.check, c.Status, c.Figure, c.Threshold, c.Reason, tt.want)
			}
			if c.Status == StatusFail && len(c.Examples) == 0 {
				t.Errorf("%s failed without examples", tt.check)
			}
			if c.Status == StatusSkip && c.Reason == "" {
				t.Errorf("%s skipped without a reason", tt.check)
			}
		})
	}
}

func mustSpec(t *testing.T, s string) CheckSpec {
	t.Helper()
	spec, err := ParseCheckSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestPacing: with a published quota and pacing expected, the 429 share of
// steady-state traffic decides; the warm-up is excluded.
func TestPacing(t *testing.T) {
	quota := &timeline.Quota{Algorithm: "token-bucket", Rate: 100}
	phases := []timeline.Phase{{Name: "q", Start: 0, Respond: "quota"}}
	// share: a fraction of steady-state requests get 429; the warm-up gets all.
	server := func(share float64) func(time.Duration) (int, string, time.Duration, bool) {
		r := rand.New(rand.NewPCG(1, 2))
		return func(at time.Duration) (int, string, time.Duration, bool) {
			if at < s1 || r.Float64() < share {
				return 429, "", 0, false
			}
			return 200, "", 0, false
		}
	}
	tests := []struct {
		name   string
		share  float64
		expect *timeline.Expect
		quota  *timeline.Quota
		opts   Options
		want   string
	}{
		{"few 429s", 0.002, &timeline.Expect{Checks: []string{CheckPacing}}, quota, Options{}, StatusPass},
		{"many 429s", 0.10, &timeline.Expect{Checks: []string{CheckPacing}}, quota, Options{}, StatusFail},
		{"many 429s, flag", 0.10, nil, quota, Options{Checks: []CheckSpec{{ID: CheckPacing}}}, StatusFail},
		{"not expected", 0.10, nil, quota, Options{}, StatusSkip},
		{"no quota", 0.10, &timeline.Expect{Checks: []string{CheckPacing}}, nil, Options{}, StatusSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sim{clients: 200, requests: 20, spread: 3 * s1, think: 100 * ms, server: server(tt.share),
				delay: fullJitter(100*ms, s1), maxAttempts: 4, policy: policy(100*ms, s1, 4, 10*s1, "full"),
				expect: tt.expect, quota: tt.quota, phases: phases, seed: 3}
			c := s.verdict(tt.opts).Check(CheckPacing)
			if c.Status != tt.want {
				t.Errorf("pacing = %s (%.3g%% > %.3g%%: %s); want %s", c.Status, c.Figure, c.Threshold, c.Reason, tt.want)
			}
		})
	}
}

// TestServeRecording: a server-only recording has no outcomes; budget skips
// and the server-side checks still judge.
func TestServeRecording(t *testing.T) {
	s := sim{clients: 100, server: outage(3*s1, ""), delay: instant(), maxAttempts: 5, seed: 1}
	recs := s.records()
	recs[0].Meta.Recorder = "serve"
	recs[0].Meta.Policy = nil
	an := New(recs[0].Meta, Options{})
	for i := 1; i < len(recs); i++ {
		if recs[i].Type == timeline.TypeOutcome {
			continue
		}
		an.Add(&recs[i])
	}
	v := an.Result()
	for id, want := range map[string]string{
		CheckBudget: StatusSkip, CheckAttempts: StatusSkip, CheckJitterBounds: StatusSkip,
		CheckInstantRetry: StatusFail, CheckRetryAfter: StatusSkip,
	} {
		if got := v.Check(id).Status; got != want {
			t.Errorf("%s = %s (%s); want %s", id, got, v.Check(id).Reason, want)
		}
	}
}

// TestServerSyncWarning: a fleet that waits exactly as an HTTP-date said
// comes back at once; that is the server's doing, a warning and not waves.
func TestServerSyncWarning(t *testing.T) {
	s := sim{clients: 300, server: outage(3*s1, "phase-end"), honorRA: true, delay: fullJitter(100*ms, s1), seed: 1,
		policy: policy(100*ms, s1, 5, 20*s1, "full")}
	v := s.verdict(Options{})
	var found bool
	for _, w := range v.Warnings {
		if w.ID == WarnServerSync {
			found = w.Remedy != ""
		}
	}
	if !found {
		t.Errorf("no %s warning with a remedy; warnings %+v", WarnServerSync, v.Warnings)
	}
	if !v.Pass {
		t.Errorf("verdict failed: %s", describe(v))
	}
	if v.Figures.ServerPaced < 300 {
		t.Errorf("ServerPaced = %d; want >= 300", v.Figures.ServerPaced)
	}
	// With jitter on top, no warning.
	s.raJitter = 2 * s1
	v = s.verdict(Options{})
	for _, w := range v.Warnings {
		if w.ID == WarnServerSync {
			t.Errorf("warning %q with jitter on top of Retry-After", w.Message)
		}
	}
}

// TestReusedKey: a client outside the harness that requests the same URL
// again after a success reuses the server's key; that is a new logical
// request, not a retry.
func TestReusedKey(t *testing.T) {
	meta := &timeline.Meta{Recorder: "serve", Policy: policy(100*ms, s1, 2, 0, "full")}
	an := New(meta, Options{})
	statuses := []int{200, 200, 503, 200, 503, 503, 503}
	at := int64(0)
	for i, st := range statuses {
		an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1.2.3.4", Key: "GET /x",
			Attempt: i + 1, Method: "GET", Path: "/x", At: at, Done: at + int64(ms), Status: st}})
		at += int64(200 * ms)
	}
	v := an.Result()
	// Logical requests: [1] [2] [3 4] [5 6 7].
	if v.Figures.Requests != 4 || v.Figures.Retries != 3 {
		t.Errorf("requests, retries = %d, %d; want 4, 3", v.Figures.Requests, v.Figures.Retries)
	}
	if c := v.Check(CheckAttempts); c.Figure != 3 || c.Status != StatusFail {
		t.Errorf("attempts = %s %v; want fail 3 (the last request used 3 of 2)", c.Status, c.Figure)
	}
}

// TestKeysAreNotReusedInARun: a fleet run gives every logical request its
// own key, so an attempt after a success — or after a response the client
// never received (abandoned) — is a retry of the same request, judged
// against the cap.
func TestKeysAreNotReusedInARun(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault string
	}{{"after a 200", ""}, {"after an abandoned 200", timeline.FaultAbandoned}} {
		t.Run(tt.name, func(t *testing.T) {
			meta := &timeline.Meta{Recorder: "run", Policy: policy(100*ms, s1, 2, 0, "full")}
			an := New(meta, Options{})
			at := int64(0)
			for i, st := range []int{503, 200, 503, 200} {
				a := timeline.Attempt{Client: "1", Key: "1/0", Attempt: i + 1, Method: "GET", Path: "/c/1/r/0", At: at, Done: at + int64(ms), Status: st}
				if st == 200 && i < 3 {
					a.Fault = tt.fault
				}
				an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: a})
				at += int64(200 * ms)
			}
			v := an.Result()
			if v.Figures.Requests != 1 || v.Figures.Retries != 3 {
				t.Errorf("requests, retries = %d, %d; want 1, 3", v.Figures.Requests, v.Figures.Retries)
			}
			if c := v.Check(CheckAttempts); c.Figure != 4 || c.Status != StatusFail {
				t.Errorf("attempts = %s %v; want fail 4 of 2", c.Status, c.Figure)
			}
		})
	}
}

// TestRateLimit403Paced: a fleet that waits exactly as a 403 rate limit's
// Retry-After said is paced by the server, as after a 429: no waves, the
// server-synchronization warning, every retry server-paced and judged by
// retry-after, none by non-retryable.
func TestRateLimit403Paced(t *testing.T) {
	s := sim{clients: 300, server: limited(3*s1, "delta1"), honorRA: true, delay: fullJitter(100*ms, s1), seed: 1,
		policy: policy(100*ms, s1, 5, 20*s1, "full")}
	v := s.verdict(Options{})
	warned := false
	for _, w := range v.Warnings {
		warned = warned || w.ID == WarnServerSync
	}
	if !warned {
		t.Errorf("no %s warning; warnings %+v", WarnServerSync, v.Warnings)
	}
	if v.Figures.ServerPaced == 0 || v.Figures.ClientPaced != 0 {
		t.Errorf("server-paced %d, client-paced %d; want every retry server-paced", v.Figures.ServerPaced, v.Figures.ClientPaced)
	}
	if c := v.Check(CheckRetryAfter); c.Status != StatusPass || c.Samples != v.Figures.Retries {
		t.Errorf("retry-after = %s over %d retries (%s); want pass over all %d", c.Status, c.Samples, c.Reason, v.Figures.Retries)
	}
	if c := v.Check(CheckNonRetryable); c.Status != StatusSkip || !strings.Contains(c.Reason, "rate limits") {
		t.Errorf("non-retryable = %s (%s); want skip naming the rate limits", c.Status, c.Reason)
	}
	if !v.Pass {
		t.Errorf("verdict %s: %s", v.Status, describe(v))
	}
}
