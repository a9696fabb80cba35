package analyzer

import (
	"fmt"
	"testing"

	"github.com/retrylab/retrylab/timeline"
)

// TestRetryAfterPushbackRefused: over gRPC, a retry after an answer whose
// grpc-retry-pushback-ms said not to retry (negative or malformed, gRPC
// A6) is a retry-after violation; a hedge that arrived before that answer
// is not, and one that arrived within the host's lateness p99 after it
// may have been a hedge made late: the range is open and the verdict
// INCONCLUSIVE, never FAIL.
func TestRetryAfterPushbackRefused(t *testing.T) {
	// Each of 20 calls: attempt 1 answered UNAVAILABLE at 100ms with the
	// pushback, attempt 2 arriving at 100ms + gap.
	calls := func(pushback string, gap int64, fault string) []timeline.Record {
		recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: &timeline.Meta{Format: timeline.Format, Recorder: "run", Protocol: "grpc", Scenario: "t",
			Expect: &timeline.Expect{Checks: []string{CheckRetryAfter}}}}}
		for i := range 20 {
			key := fmt.Sprintf("c%d/r0", i)
			base := int64(i) * int64(s1)
			first := timeline.Attempt{Client: fmt.Sprint("c", i), Key: key, Attempt: 1, Method: "GRPC", At: base, Done: base + int64(100*ms),
				Status: 503, GRPCCode: "UNAVAILABLE", Pushback: pushback, Fault: fault}
			if !pushbackRefuses(pushback) { // as the stub records a pushback that parses
				fmt.Sscan(pushback, &first.NotBefore)
				first.NotBefore, first.HasNotBefore = first.Done+first.NotBefore*int64(ms), true
			}
			second := first
			second.Attempt, second.At, second.Done, second.Pushback, second.Status, second.GRPCCode, second.Fault = 2, first.Done+gap, first.Done+gap+int64(ms), "", 200, "OK", ""
			second.NotBefore, second.HasNotBefore = 0, false
			recs = append(recs, timeline.Record{Type: timeline.TypeAttempt, Attempt: first}, timeline.Record{Type: timeline.TypeAttempt, Attempt: second},
				timeline.Record{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: first.Client, Key: key, Scheduled: base, Start: base, End: second.Done + 1, Result: "ok", Status: 200, Attempts: 2}})
		}
		return append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{At: 30 * int64(s1), Reason: timeline.EndCompleted}})
	}
	noisy := &timeline.Noise{Source: "sched", P50: int64(2 * ms), P90: int64(20 * ms), P99: int64(500 * ms), Max: int64(600 * ms)}
	for _, tt := range []struct {
		name     string
		pushback string
		gap      int64
		fault    string
		noise    *timeline.Noise
		want     string
	}{
		{"negative, retried", "-5", int64(300 * ms), "", nil, StatusFail},
		{"malformed, retried", "soon", int64(300 * ms), "", nil, StatusFail},
		{"a pushback honoured", "200", int64(300 * ms), "", nil, StatusPass},
		{"a hedge before the answer", "-5", -int64(50 * ms), "", nil, StatusPass},
		{"the client never saw the answer", "-5", int64(300 * ms), timeline.FaultAbandoned, nil, StatusSkip},
		{"within the host's lateness", "-5", int64(300 * ms), "", noisy, StatusInconclusive},
		{"past the host's lateness", "-5", int64(900 * ms), "", noisy, StatusFail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs := calls(tt.pushback, tt.gap, tt.fault)
			endOf(recs).Noise = tt.noise
			c := judge(recs, Options{}).Check(CheckRetryAfter)
			if c.Status != tt.want {
				t.Fatalf("status %s (%s); want %s", c.Status, c.Reason, tt.want)
			}
			if c.Status == StatusFail && len(c.Examples) == 0 {
				t.Error("a FAIL without examples")
			}
		})
	}
}
