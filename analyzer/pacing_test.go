package analyzer

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// layered is a test's model of a provider's layered quota: a token bucket
// of 10/s, burst 20, named "second", and a fixed window of 300 a minute
// (windows from the phase's start) named "minute", which answers status
// minuteStatus. A request must pass both and is charged to both.
type layered struct {
	minuteStatus int
	tokens       float64
	last         time.Duration
	window       time.Duration // start of the current minute window
	used         int
}

// take decides a request at t: 0 when allowed, else the status and the
// limit that rejected it.
func (l *layered) take(t time.Duration) (int, string) {
	l.tokens = min(20, l.tokens+10*(t-l.last).Seconds())
	l.last = t
	for t >= l.window+time.Minute {
		l.window += time.Minute
		l.used = 0
	}
	switch {
	case l.tokens < 1:
		return 429, "second"
	case l.used >= 300:
		return l.minuteStatus, "minute"
	}
	l.tokens--
	l.used++
	return 0, ""
}

// steadyClient is one client sending a request every 1/rate for d, each a
// logical request of one attempt (it never retries), against answer.
func steadyClient(rate float64, d time.Duration, answer func(t time.Duration, a *timeline.Attempt)) []timeline.Record {
	var recs []timeline.Record
	step := time.Duration(float64(time.Second) / rate)
	for i, t := 0, time.Duration(0); t < d; i, t = i+1, t+step {
		key := "0/" + strconv.Itoa(i)
		a := timeline.Attempt{Client: "0", Key: key, Attempt: 1, Method: "GET", Path: "/c/" + key, At: int64(t), Done: int64(t + time.Millisecond), Status: 200, Phase: "steady"}
		answer(t, &a)
		res := timeline.ResultOK
		if a.Status >= 400 {
			res = timeline.ResultNonRetryable
		}
		recs = append(recs,
			timeline.Record{Type: timeline.TypeAttempt, Attempt: a},
			timeline.Record{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{Client: "0", Key: key, Start: int64(t), Scheduled: int64(t), End: a.Done, Result: res, Status: a.Status, Attempts: 1}})
	}
	return recs
}

// TestPacingLayered: pacing judges every layer of a quota: a client that
// stays under the per-second limit but over the per-minute one fails,
// and the evidence names the minute limit and the most restrictive
// published limit; 403s a limit answered count as 429s do; plain 403s and
// 403s the server did not mark do not.
func TestPacingLayered(t *testing.T) {
	second := timeline.Quota{Name: "second", Algorithm: "token-bucket", Rate: 10, Burst: 20, Limit: 10, Window: int64(time.Second), Key: "global"}
	minute := timeline.Quota{Name: "minute", Algorithm: "fixed-window", Rate: 5, Limit: 300, Window: int64(time.Minute), Key: "global"}
	meta := func() *timeline.Meta {
		return &timeline.Meta{Recorder: "run", Scenario: "layered", Quota: &minute, Limits: []timeline.Quota{second, minute},
			Phases: []timeline.Phase{{Name: "steady", Respond: "quota"}}, Expect: &timeline.Expect{Checks: []string{CheckPacing}}}
	}
	// quota answers as the layered limits do, as the stub records it.
	quota := func(minuteStatus int) func(time.Duration, *timeline.Attempt) {
		l := &layered{minuteStatus: minuteStatus, tokens: 20}
		return func(t time.Duration, a *timeline.Attempt) {
			if st, lim := l.take(t); st != 0 {
				a.Status, a.Limit = st, lim
				a.RetryAfter, a.NotBefore, a.HasNotBefore = "1", a.Done+int64(time.Second), true
			}
		}
	}
	tests := []struct {
		name    string
		rate    float64
		answer  func(time.Duration, *timeline.Attempt)
		want    string
		reasons []string // the reason must name each
	}{
		{"under every limit", 4, quota(429), StatusPass, []string{"0 of", "minute: 300/1m (5/s), fixed-window"}},
		{"over the minute only, 429", 8, quota(429), StatusFail, []string{"rate-limited (minute: ", "most restrictive published limit is minute: 300/1m (5/s)"}},
		{"over the minute only, 403", 8, quota(403), StatusFail, []string{"(minute: ", "minute: 300/1m"}},
		{"over the second too", 25, quota(403), StatusFail, []string{"second: ", "minute: "}},
		{"plain 403s are refusals, not rate limits", 8, func(t time.Duration, a *timeline.Attempt) {
			if int(t/time.Millisecond)%10 == 0 {
				a.Status = 403
			}
		}, StatusPass, []string{"0 of"}},
		{"a 403 with rate-limit headers at 0 and no limit named", 8, func(t time.Duration, a *timeline.Attempt) {
			if int(t/time.Millisecond)%10 == 0 {
				a.Status, a.RateLimit = 403, `RateLimit: "minute";r=0;t=30`
			}
		}, StatusFail, []string{"no limit named"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			an := New(meta(), Options{})
			recs := steadyClient(tt.rate, 150*time.Second, tt.answer)
			for i := range recs {
				an.Add(&recs[i])
			}
			c := an.Result().Check(CheckPacing)
			t.Logf("pacing %s %.3g%%: %s", c.Status, c.Figure, c.Reason)
			if c.Status != tt.want {
				t.Errorf("pacing = %s (%.3g%%: %s); want %s", c.Status, c.Figure, c.Reason, tt.want)
			}
			for _, s := range tt.reasons {
				if !strings.Contains(c.Reason, s) {
					t.Errorf("reason %q does not name %q", c.Reason, s)
				}
			}
			if c.Status == StatusFail {
				if len(c.Examples) == 0 || !strings.Contains(c.Examples[0].Detail, "limit") {
					t.Errorf("examples %+v; want them to name the limit", c.Examples)
				}
			}
		})
	}
}
