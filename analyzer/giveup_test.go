package analyzer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// outagePhases lays out outage(end): 503 until end, then ok.
func outagePhases(end time.Duration) []timeline.Phase {
	return []timeline.Phase{
		{Name: "outage", Start: 0, End: int64(end), Respond: "status 503"},
		{Name: "recovered", Start: int64(end), Respond: "ok"},
	}
}

// limitedPhases lays out limited(end): 403 until end, then ok.
func limitedPhases(end time.Duration) []timeline.Phase {
	return []timeline.Phase{
		{Name: "limited", Start: 0, End: int64(end), Respond: "status 403"},
		{Name: "recovered", Start: int64(end), Respond: "ok"},
	}
}

// TestGiveUp: a request that fails although the server began serving
// within its budget is lost to impatience; one the server would not have
// served in time, one stopped by a non-retryable status, and one the
// harness lost are not.
func TestGiveUp(t *testing.T) {
	full := fullJitter(100*ms, 2*s1)
	tests := []struct {
		name   string
		sim    sim
		opts   Options
		want   string
		reason string // a piece of the reason or the first example
	}{
		{"never retries through a 5 s outage", sim{server: outage(5*s1, ""), phases: outagePhases(5 * s1), delay: full, maxAttempts: 1,
			policy: policy(100*ms, 2*s1, 1, 20*s1, "full")}, Options{}, StatusFail, "phase recovered served from 5.000s"},
		{"patient through a 5 s outage", sim{server: outage(5*s1, ""), phases: outagePhases(5 * s1), delay: full, maxAttempts: 30,
			policy: policy(100*ms, 2*s1, 30, 20*s1, "full")}, Options{}, StatusPass, "0 of 300"},
		{"attempts run out long before the budget", sim{server: outage(5*s1, ""), phases: outagePhases(5 * s1), delay: full, maxAttempts: 3,
			policy: policy(100*ms, 2*s1, 3, 20*s1, "full")}, Options{}, StatusFail, "gave-up after"},
		{"the server recovers after the budget", sim{server: outage(30*s1, ""), phases: outagePhases(30 * s1), delay: full, maxAttempts: 3,
			policy: policy(100*ms, 2*s1, 3, 5*s1, "full")}, Options{}, StatusPass, "within 5.000s of their start (the stated budget)"},
		{"within from a flag", sim{server: outage(30*s1, ""), phases: outagePhases(30 * s1), delay: full, maxAttempts: 3,
			policy: policy(100*ms, 2*s1, 3, 5*s1, "full")}, Options{Checks: []CheckSpec{mustSpec(t, "give-up:within=40s")}}, StatusFail, "(give-up.within)"},
		{"no budget stated: the watchdog", sim{server: outage(5*s1, ""), phases: outagePhases(5 * s1), delay: full, maxAttempts: 1,
			policy: &timeline.Policy{}}, Options{}, StatusFail, "(the default 30s)"},
		{"a non-retryable status is not impatience", sim{server: always(404), phases: []timeline.Phase{{Name: "mix", Respond: "mix 200:90 404:10"}}, delay: full, maxAttempts: 3,
			policy: policy(100*ms, 2*s1, 3, 20*s1, "full")}, Options{}, StatusPass, "0 of 300"},
		{"stopping on a 403 rate limit is impatience", sim{server: limited(5*s1, "delta1"), phases: limitedPhases(5 * s1), stop403: true, delay: full, maxAttempts: 30,
			policy: policy(100*ms, 2*s1, 30, 20*s1, "full")}, Options{}, StatusFail, "non-retryable on a 403 rate limit"},
		{"waiting out a 403 rate limit", sim{server: limited(5*s1, "delta1"), phases: limitedPhases(5 * s1), honorRA: true, delay: full, maxAttempts: 30,
			policy: policy(100*ms, 2*s1, 30, 20*s1, "full")}, Options{}, StatusPass, "0 of 300"},
		{"stopping on a plain 403 is right", sim{server: limited(5*s1, ""), phases: limitedPhases(5 * s1), stop403: true, delay: full, maxAttempts: 30,
			policy: policy(100*ms, 2*s1, 30, 20*s1, "full")}, Options{}, StatusPass, "0 of 300"},
		{"no phases: unknown", sim{server: outage(5*s1, ""), delay: full, maxAttempts: 1, policy: policy(100*ms, 2*s1, 1, 20*s1, "full")},
			Options{}, StatusSkip, "states no phases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sim
			s.clients, s.seed = 300, 1
			v := s.verdict(tt.opts)
			c := v.Check(CheckGiveUp)
			text := c.Reason
			if len(c.Examples) > 0 {
				text += " | " + c.Examples[0].Detail
			}
			if c.Status != tt.want || !strings.Contains(text, tt.reason) {
				t.Errorf("give-up = %s (%.3g%%: %s); want %s with %q", c.Status, c.Figure, text, tt.want, tt.reason)
			}
		})
	}
}

// TestGiveUpIgnoresHarnessAndCanceled: outcomes the library did not decide
// are not judged.
func TestGiveUpIgnoresHarnessAndCanceled(t *testing.T) {
	s := sim{clients: 50, seed: 1, server: outage(5*s1, ""), phases: outagePhases(5 * s1), delay: fullJitter(100*ms, 2*s1), maxAttempts: 1,
		policy: policy(100*ms, 2*s1, 1, 20*s1, "full")}
	recs := s.records()
	for i := range recs {
		if o := &recs[i].Outcome; recs[i].Type == timeline.TypeOutcome {
			if o.Client < "3" {
				o.Harness = true
			} else {
				o.Result = timeline.ResultCanceled
			}
		}
	}
	v := judge(recs, Options{})
	if c := v.Check(CheckGiveUp); c.Status != StatusSkip {
		t.Errorf("give-up = %s (%s); want skip: nothing the library decided", c.Status, c.Reason)
	}
	// attempts and amplification count no request either: they judge
	// nothing, never pass on nothing (a run cut by its cap at once).
	for _, id := range []string{CheckAttempts, CheckAmplification} {
		if c := v.Check(id); c.Status != StatusSkip {
			t.Errorf("%s = %s (%s, %d samples); want skip: nothing the library decided", id, c.Status, c.Reason, c.Samples)
		}
	}
}

// TestGiveUpUnderOverload: against a stub with finite capacity, a request
// that stopped because the stub was overloaded (a 503 or no response in a
// phase that answers ok) is not lost to impatience, and a trigger phase
// does not count as serving; a request that stopped on a phase's own 503
// still is.
func TestGiveUpUnderOverload(t *testing.T) {
	for _, tt := range []struct {
		name   string
		client func(*capSim)
		want   string
	}{{"no retries", noRetry, StatusPass}, {"a retry budget", budget10, StatusPass}, {"5 attempts, no budget", jitter5, StatusPass}} {
		v, _ := metastableSim(1, tt.client).verdict(Options{})
		if c := v.Check(CheckGiveUp); c.Status != tt.want || c.Figure != 0 {
			t.Errorf("%s: give-up = %s %.2f%% (%s); want %s, none lost", tt.name, c.Status, c.Figure, c.Reason, tt.want)
		}
	}
	// The same timeline without its capacity model: every failure lost.
	s := metastableSim(1, noRetry)
	s.noCapacity = true
	v, _ := s.verdict(Options{})
	if c := v.Check(CheckGiveUp); c.Status != StatusFail {
		t.Errorf("without a capacity model: give-up = %s %.2f%% (%s); want fail", c.Status, c.Figure, c.Reason)
	}
	// A 503 of another kind in a capacity run is still judged.
	m := handMeta(timeline.Phase{Name: "down", End: int64(s1), Respond: "status 503"}, timeline.Phase{Name: "up", Start: int64(s1), Respond: "ok"})
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: m},
		{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: "1/0", Attempt: 1, At: 0, Done: int64(ms), Status: 503}},
		{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: "1", Key: "1/0", End: int64(ms), Result: timeline.ResultGaveUp, Status: 503, Attempts: 1}}}
	if c := judge(recs, Options{}).Check(CheckGiveUp); c.Status != StatusFail {
		t.Errorf("a plain 503 in a capacity run: give-up = %s (%s); want fail", c.Status, c.Reason)
	}
	// A 500 during a trigger, with a budget of 5 s that ends before the
	// trigger does: the trigger phase does not serve, so nothing served
	// within the budget. With the trigger at full capacity, it did.
	for _, tt := range []struct {
		share float64
		want  string
	}{{0.3, StatusPass}, {1, StatusFail}} {
		m := handMeta(timeline.Phase{Name: "trigger", End: int64(10 * s1), Respond: "ok", Capacity: tt.share}, timeline.Phase{Name: "after", Start: int64(10 * s1), Respond: "ok"})
		m.Policy = policy(100*ms, s1, 1, 5*s1, "full")
		recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: m},
			{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: "1/0", Attempt: 1, At: int64(s1), Done: int64(s1 + ms), Status: 500}},
			{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: "1", Key: "1/0", Start: int64(s1), End: int64(s1 + ms), Result: timeline.ResultGaveUp, Status: 500, Attempts: 1}}}
		if c := judge(recs, Options{}).Check(CheckGiveUp); c.Status != tt.want {
			t.Errorf("a 500 in a phase at %v of capacity: give-up = %s (%s); want %s", tt.share, c.Status, c.Reason, tt.want)
		}
	}
}

func TestServing(t *testing.T) {
	for respond, want := range map[string]bool{
		"ok": true, "quota": true, "mix 200:90 500:10": true, "mix 204:1 reset:5": true,
		"status 503": false, "mix 500:50 404:50": false, "fault reset": false, "fault hang": false, "mix 200:0 503:1": false,
	} {
		if got := serving(respond); got != want {
			t.Errorf("serving(%q) = %v; want %v", respond, got, want)
		}
	}
}

// TestEvidenceCountsTheStubsAttempts: a subject that does not report how
// many attempts it made (a custom Go subject, an exec program) gets the
// count the stub recorded in its evidence, not "0 attempts".
func TestEvidenceCountsTheStubsAttempts(t *testing.T) {
	a := New(&timeline.Meta{Recorder: "run", Policy: policy(100*ms, s1, 5, 20*s1, "full"), Phases: outagePhases(3 * s1)}, Options{})
	for n := 1; n <= 3; n++ {
		at := int64(n) * int64(100*ms)
		a.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: "1/0", Attempt: n, Method: "GET", Path: "/c/1/r/0", At: at, Done: at + 10, Status: 503}})
	}
	a.Add(&timeline.Record{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: "1", Key: "1/0", Start: 0, End: int64(2500 * ms), Result: timeline.ResultGaveUp, Status: 503}})
	v := a.Result()
	c := v.Check(CheckGiveUp)
	if c.Status != StatusFail || len(c.Examples) == 0 || !strings.Contains(c.Examples[0].Detail, "(3 attempts)") || c.Examples[0].Attempt != 3 {
		t.Errorf("give-up %s %+v; want a failure whose evidence counts the 3 attempts the stub recorded", c.Status, c.Examples)
	}
}
