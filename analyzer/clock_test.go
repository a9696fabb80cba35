package analyzer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestRetryAfterWidensByClockUncertainty: in a merged timeline, whose
// not_before and retry arrival may come from two hosts' clocks, the
// retry-after check's tolerance grows by the clock uncertainty the meta
// states, and its reason says so; a timeline of one host is judged as
// before.
func TestRetryAfterWidensByClockUncertainty(t *testing.T) {
	// Retries arriving early by 12 ms and, for one request, by 40 ms.
	recs := func(uncertainty time.Duration, early ...time.Duration) []timeline.Record {
		out := []timeline.Record{{Type: timeline.TypeMeta, Meta: &timeline.Meta{Recorder: "serve", ClockUncertainty: int64(uncertainty)}}}
		for i, e := range early {
			key := "k" + string(rune('a'+i))
			nb := int64(s1)
			out = append(out,
				timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: key, Attempt: 1, Method: "GET", At: 0, Done: int64(ms), Status: 503, RetryAfter: "1", NotBefore: nb, HasNotBefore: true}},
				timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: key, Attempt: 2, Method: "GET", At: nb - int64(e), Done: nb - int64(e) + int64(ms), Status: 200}})
		}
		return out
	}
	for _, c := range []struct {
		name        string
		uncertainty time.Duration
		early       []time.Duration
		bad         float64
		note        bool
	}{
		{"one host", 0, []time.Duration{12 * ms, 3 * ms}, 1, false},
		{"merged, 10ms apart", 10 * ms, []time.Duration{12 * ms, 3 * ms}, 0, true},
		{"merged, still too early", 10 * ms, []time.Duration{40 * ms, 12 * ms}, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			an := New(recs(c.uncertainty)[0].Meta, Options{Checks: []CheckSpec{{ID: CheckRetryAfter}}})
			for _, r := range recs(c.uncertainty, c.early...)[1:] {
				an.Add(&r)
			}
			v := an.Result()
			got := v.Check(CheckRetryAfter)
			if got.Samples != 2 || got.Figure != c.bad {
				t.Errorf("retry-after: %v of %d early; want %v of 2 (%s)", got.Figure, got.Samples, c.bad, got.Reason)
			}
			if ra, _ := an.Tolerances(); ra != 5*ms+c.uncertainty {
				t.Errorf("Tolerances() retry-after = %v; want 5ms + %v", ra, c.uncertainty)
			}
			hasNote := strings.Contains(got.Reason, "plus the clock uncertainty "+fmtDur(int64(c.uncertainty))+" between the hosts")
			if hasNote != c.note || (c.note && !strings.Contains(got.Reason, "more than "+fmtDur(int64(5*ms+c.uncertainty)))) {
				t.Errorf("reason %q; want the widened tolerance stated: %v", got.Reason, c.note)
			}
		})
	}
}
