package analyzer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestWavesClaims: a fleet whose retries claim the waits their clients
// meant is judged on the claims when every claim is consistent with its
// arrival, whatever lateness the host added (a claim within the
// lateness it allows is taken as it is): a lockstep fleet FAILs and a
// jittered one PASSes, each a point. A fleet whose claims the arrivals
// contradict (a wait claimed longer than the gap, a gap longer than the
// claim by more than the host's lateness allows, too many missing) is
// judged on its arrivals, as without claims.
func TestWavesClaims(t *testing.T) {
	const late = 300 * time.Millisecond
	var n int
	every := func(k int, f func(time.Duration) time.Duration) func(time.Duration) time.Duration {
		return func(d time.Duration) time.Duration {
			n++
			if n%k == 0 {
				return f(d)
			}
			return d
		}
	}
	tests := []struct {
		name     string
		delay    func(int, *rand.Rand, time.Duration) time.Duration
		claimed  func(time.Duration) time.Duration
		want     string // with claims read
		onClaims bool
	}{
		{"fixed 1s", fixed(s1), nil, StatusFail, true},
		{"no jitter, base 100ms", noJitter(100*ms, 5*s1), nil, StatusFail, true},
		{"full jitter, base 100ms", fullJitter(100*ms, 5*s1), nil, StatusPass, true},
		{"full jitter, 1 claim in 50 off by 2s", fullJitter(100*ms, 5*s1), every(50, func(d time.Duration) time.Duration { return d + 2*s1 }), StatusPass, true},
		// Lies the arrivals show: the cohort is read on its arrivals.
		{"fixed 3s, claims a tenth", fixed(3 * s1), func(d time.Duration) time.Duration { return d / 10 }, "", false},
		{"fixed 1s, claims 500ms longer", fixed(s1), func(d time.Duration) time.Duration { return d + 500*ms }, "", false},
		{"fixed 1s, 1 claim in 10 off by 2s", fixed(s1), every(10, func(d time.Duration) time.Duration { return d + 2*s1 }), "", false},
	}
	for _, tt := range tests {
		for seed := uint64(1); seed <= 3; seed++ {
			n = 0
			s := sim{clients: 1000, seed: seed, spread: 10 * s1, late: late, noise: noiseOf(late), server: outage(15*s1, ""),
				delay: tt.delay, maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full"), claim: true, claimed: tt.claimed}
			c := s.verdict(Options{}).Check(CheckWaves)
			on := strings.Contains(c.Reason, "wait claims")
			if on != tt.onClaims {
				t.Errorf("%s, seed %d: read on claims = %v; want %v (%s)", tt.name, seed, on, tt.onClaims, c.Reason)
			}
			switch {
			case tt.onClaims && (c.Status != tt.want || len(c.Range) == 2 && c.Range[0] != c.Range[1]):
				t.Errorf("%s, seed %d: waves = %s, range %v (%s); want %s on a point", tt.name, seed, c.Status, c.Range, c.Reason, tt.want)
			case !tt.onClaims && c.Status == StatusPass:
				t.Errorf("%s, seed %d: a lockstep fleet whose claims the arrivals contradict PASSed (%s)", tt.name, seed, c.Reason)
			}
		}
	}
	// Without claims the same lockstep fleet is judged on its arrivals.
	s := sim{clients: 1000, seed: 1, spread: 10 * s1, late: late, noise: noiseOf(late), server: outage(15*s1, ""),
		delay: fixed(s1), maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
	if c := s.verdict(Options{}).Check(CheckWaves); strings.Contains(c.Reason, "wait claims") {
		t.Errorf("without claims: read on claims (%s)", c.Reason)
	}
}

// TestInstantClaims: a client that claims it retried at once is counted
// instant whatever lateness made its gaps long, so the check FAILs where
// the gaps alone leave it open; a client whose claimed waits its gaps
// bear out is not counted, and one whose claims the gaps contradict is
// read on its gaps.
func TestInstantClaims(t *testing.T) {
	const late = 300 * time.Millisecond
	tests := []struct {
		name    string
		delay   func(int, *rand.Rand, time.Duration) time.Duration
		claim   bool
		claimed func(time.Duration) time.Duration
		want    []string
	}{
		{"instant, claimed", fixed(0), true, nil, []string{StatusFail}},
		{"instant, unclaimed", fixed(0), false, nil, []string{StatusInconclusive}},
		{"full jitter, claimed", fullJitter(s1, 5*s1), true, nil, []string{StatusPass}},
		{"instant, claims 1s", fixed(0), true, func(time.Duration) time.Duration { return s1 }, []string{StatusInconclusive}},
	}
	for _, tt := range tests {
		s := sim{clients: 300, seed: 1, spread: 10 * s1, late: late, noise: noiseOf(late), server: outage(15*s1, ""),
			delay: tt.delay, maxAttempts: 6, policy: policy(s1, 5*s1, 6, 60*s1, "full"), claim: tt.claim, claimed: tt.claimed}
		c := s.verdict(Options{}).Check(CheckInstantRetry)
		if !slices.Contains(tt.want, c.Status) {
			t.Errorf("%s: instant-retry = %s (%s); want %v", tt.name, c.Status, c.Reason, tt.want)
		}
	}
}

// TestLateAnswerIsAbandoned: an answer the stub wrote after the client's
// attempt timeout (a stub behind on its work that did not see the client
// leave) was never the client's: to the pairing it is an abandoned
// attempt, whose retry's wait starts at the timeout. Retries 90 ms after
// first attempts answered 503 at 100 ms (past the 30 ms timeout) came
// before that answer: read on it, they would be instant retries of a 503;
// they are retries after a timeout, which instant-retry does not judge.
// Answered at 20 ms, within the timeout, the same retries are judged.
func TestLateAnswerIsAbandoned(t *testing.T) {
	judge := func(done time.Duration) CheckResult {
		meta := &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "late", Subject: "sim",
			Fleet: &timeline.Fleet{Clients: 20, Requests: 1, AttemptTimeout: int64(30 * ms)}, Scheduled: 20}
		recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: meta}}
		for c := range 20 {
			key := fmt.Sprintf("%d/0", c)
			t0 := int64(c) * int64(s1)
			recs = append(recs,
				timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: fmt.Sprint(c), Key: key, Attempt: 1, Method: "GET", Path: "/c/" + key, At: t0, Done: t0 + int64(done), Status: 503}},
				timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: fmt.Sprint(c), Key: key, Attempt: 2, Method: "GET", Path: "/c/" + key, At: t0 + int64(90*ms), Done: t0 + int64(91*ms), Status: 200}},
				timeline.Record{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: fmt.Sprint(c), Key: key, Scheduled: t0, Start: t0, End: t0 + int64(92*ms), Result: timeline.ResultOK, Status: 200, Attempts: 2}})
		}
		recs = append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{Reason: timeline.EndCompleted, At: int64(21 * s1)}})
		v, _ := judgeRecords(recs, Options{})
		return *v.Check(CheckInstantRetry)
	}
	if c := judge(100 * ms); c.Status != StatusSkip || !strings.Contains(c.Reason, "no retry followed a 429/5xx") {
		t.Errorf("answered after the timeout: instant-retry = %s (%s); want skip: the clients saw no 503", c.Status, c.Reason)
	}
	if c := judge(20 * ms); c.Status != StatusPass || !strings.Contains(c.Reason, "0 of 20") {
		t.Errorf("answered within the timeout: instant-retry = %s (%s); want pass, 0 of 20 within the window", c.Status, c.Reason)
	}
}
