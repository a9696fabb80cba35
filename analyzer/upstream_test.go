package analyzer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/timeline"
)

// TestUpstreamFailedIsNotTheClients: a client that retries a 502 at once is
// blamed (instant-retry fails) when the 502 was the server's answer, but
// not when the stub answered it because its upstream gave no response
// (timeline.UpstreamFailed): then the run is INCONCLUSIVE, saying why.
func TestUpstreamFailedIsNotTheClients(t *testing.T) {
	judge := func(upstream string) *Verdict {
		an := New(&timeline.Meta{Recorder: "serve", Phases: []timeline.Phase{{Name: "ok", Respond: "ok"}}}, Options{})
		var at int64
		for c := range 20 {
			client := string(rune('a' + c))
			key := "POST /v1/orders " + client
			for n := 1; n <= 3; n++ {
				a := timeline.Attempt{Client: client, Key: key, Attempt: n, Method: "POST", Path: "/v1/orders", At: at, Done: at + int64(ms), Status: 502, Upstream: upstream, Idempotent: true}
				if n == 3 {
					a.Status, a.Upstream = 201, timeline.UpstreamRelayed
				}
				an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: a})
				at += 2 * int64(ms) // 1 ms after the response: an instant retry
			}
		}
		return an.Result()
	}

	v := judge("") // the server's own 502
	if got := v.Check(CheckInstantRetry).Status; got != StatusFail {
		t.Fatalf("instant retries after a server's 502: instant-retry = %s (%s); want fail (the control)", got, v.Check(CheckInstantRetry).Reason)
	}

	v = judge(timeline.UpstreamFailed)
	for _, c := range v.Checks {
		if c.Status == StatusFail {
			t.Errorf("after an upstream failure: %s = fail (%s); want no check to blame the client", c.ID, c.Reason)
		}
	}
	if v.Status != VerdictInconclusive {
		t.Errorf("verdict = %s; want %s", v.Status, VerdictInconclusive)
	}
	want := "40 attempts met an upstream that gave no response, so the stub answered 502 itself (first: POST /v1/orders attempt 1 at 0s): the test environment failed, not the client, and the 40 retries after them were not judged"
	if len(v.Inconclusive) != 1 || v.Inconclusive[0] != want {
		t.Errorf("inconclusive = %q; want [%q]", v.Inconclusive, want)
	}
	if c := v.Check(CheckAmplification); c.Figure != 1 || !strings.Contains(c.Reason, "40 retries after upstream or quota-backend failures not counted") {
		t.Errorf("amplification = %v (%s); want 1: the retries of the dead upstream's 502s are not the client's", c.Figure, c.Reason)
	}
}

func TestServingPassthrough(t *testing.T) {
	for respond, want := range map[string]bool{
		"passthrough": true, "mix passthrough:90 503:10": true, "mix 503:1 reset:1": false, "status 503": false,
	} {
		if got := serving(respond); got != want {
			t.Errorf("serving(%q) = %v; want %v", respond, got, want)
		}
	}
}

// TestUpstreamRateLimitJudged: behind `serve --upstream`, the upstream's
// own 429 with Retry-After is recorded with its not_before like the
// stub's, so retry-after judges the retry that ignored it.
func TestUpstreamRateLimitJudged(t *testing.T) {
	a := New(&timeline.Meta{Recorder: "serve"}, Options{})
	a.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: "c GET /v1/x", Attempt: 1, Method: "GET", Path: "/v1/x",
		At: 0, Done: 10, Status: 429, RetryAfter: "2", NotBefore: 10 + 2e9, HasNotBefore: true, Upstream: timeline.UpstreamRelayed}})
	a.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: "c GET /v1/x", Attempt: 2, Method: "GET", Path: "/v1/x",
		At: 50e6, Done: 60e6, Status: 200, Upstream: timeline.UpstreamRelayed}})
	v := a.Result()
	if c := v.Check(CheckRetryAfter); c.Status != StatusFail {
		t.Errorf("retry-after = %s (%s); want fail: the retry came 1.95s before the upstream's Retry-After allowed", c.Status, c.Reason)
	}
}

// TestBackendFailuresAreNotTheClients: the stub's own 503s for a failed
// quota backend are not judged, and above 1 % of attempts they make the
// run INCONCLUSIVE.
func TestBackendFailuresAreNotTheClients(t *testing.T) {
	a := New(&timeline.Meta{Recorder: "serve"}, Options{})
	for i := range 10 {
		key := fmt.Sprintf("k%d", i)
		a.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: key, Attempt: 1, Method: "GET", Path: "/" + key,
			At: int64(i) * 1e6, Done: int64(i)*1e6 + 10, Status: 503, RetryAfter: "1", Backend: timeline.BackendClosed}})
		a.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "c", Key: key, Attempt: 2, Method: "GET", Path: "/" + key,
			At: int64(i)*1e6 + 20, Done: int64(i)*1e6 + 30, Status: 200}})
	}
	v := a.Result()
	if c := v.Check(CheckInstantRetry); c.Status != StatusSkip {
		t.Errorf("instant-retry = %s (%s); want skip: the retries after the stub's own failures are not judged", c.Status, c.Reason)
	}
	if v.Status != VerdictInconclusive || !strings.Contains(strings.Join(v.Inconclusive, "\n"), "quota backend failed") {
		t.Errorf("verdict %s %q; want INCONCLUSIVE naming the quota backend", v.Status, v.Inconclusive)
	}
}
