package retrylabtest_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	_ "github.com/retrylab/retrylab/subjects/thirdparty" // retryablehttp
	"github.com/retrylab/retrylab/timeline"
)

// TestQuotaLayered: under a per-second token bucket and a tighter
// sustained window, the reference client paced under the window passes on
// every seed, and the same client paced at 80% of the per-second limit
// (above the window's sustained rate) fails pacing, and only pacing, by a
// wide margin.
func TestQuotaLayered(t *testing.T) {
	sc, err := scenarios.Builtin("quota-layered")
	if err != nil {
		t.Fatal(err)
	}
	ls := sc.Server.Quota.Limits
	if len(ls) != 2 {
		t.Fatalf("quota-layered has %d limits; want a per-second one and a sustained one", len(ls))
	}
	perSecond, sustained := ls[0].Limit/ls[0].Per.Seconds(), ls[1].Limit/ls[1].Per.Seconds()
	good := sc.Subject.Policy
	fast := good
	fast.Rate = 0.8 * perSecond
	if good.Rate >= sustained || fast.Rate <= sustained || sustained >= perSecond {
		t.Fatalf("rates: per-second %v, sustained %v, policy %v, fast %v; want policy < sustained < fast < per-second", perSecond, sustained, good.Rate, fast.Rate)
	}
	for _, seed := range []int64{1, 2, 3} {
		res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(seed))
		res.AssertPass(t)
		if res.Summary.Requests != res.Summary.Planned {
			t.Errorf("seed %d: %d of %d logical requests recorded", seed, res.Summary.Requests, res.Summary.Planned)
		}
		res = retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(seed), retrylabtest.WithPolicy(fast))
		res.AssertFails(t, analyzer.CheckPacing)
		if got := res.Failed(); !slices.Equal(got, []string{analyzer.CheckPacing}) {
			t.Errorf("seed %d: paced at %v/s, failed %v; want pacing alone", seed, fast.Rate, got)
		}
		// 1% is the threshold; the margin keeps the verdict on every seed.
		if c := res.Verdict.Check(analyzer.CheckPacing); c.Figure < 3 {
			t.Errorf("seed %d: paced at %v/s, %.2f%% of steady-state attempts got 429; want well above 1%%", seed, fast.Rate, c.Figure)
		}
	}
}

// TestQuotaTiers: the fleet's keys reach the stub, which counts free and
// paid keys under their own tiers (each response publishes its tier's
// limits); the reference client passes on every seed, and a library that
// does not pace itself fails pacing.
func TestQuotaTiers(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		res := retrylabtest.Run(t, retrylabtest.Builtin("quota-tiers"), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(seed))
		res.AssertPass(t)
		if res.Summary.Requests != res.Summary.Planned {
			t.Errorf("seed %d: %d of %d logical requests recorded", seed, res.Summary.Requests, res.Summary.Planned)
		}
		if seed > 1 {
			continue
		}
		// Client 0 holds free-0, client 1 paid-1 (fleet.api_keys alternate).
		policy := map[string]string{}
		d := timeline.NewDecoder(bytes.NewReader(res.Timeline))
		for {
			var rec timeline.Record
			if err := d.Decode(&rec); err != nil {
				break
			}
			if a := rec.Attempt; rec.Type == timeline.TypeAttempt && policy[a.Client] == "" {
				policy[a.Client] = strings.Clone(a.RateLimit)
			}
		}
		for client, q := range map[string]string{"0": `"second";q=5;w=1`, "1": `"second";q=50;w=1`} {
			if !strings.Contains(policy[client], q) {
				t.Errorf("client %s was sent %q; want its tier's policy %s", client, policy[client], q)
			}
		}
	}
	res := retrylabtest.Run(t, retrylabtest.Builtin("quota-tiers"), retrylabtest.Registered("retryablehttp"))
	res.AssertFails(t, analyzer.CheckPacing)
}

// secondary403 answers like GitHub's secondary rate limit: 403 with a
// Retry-After for 3 s, then 200s. The 403 is a rate limit, not a refusal.
const secondary403 = `
name: secondary-403
duration: 30s
server:
  phases:
    - {name: limited, for: 3s, respond: {status: 403, rate_limit: true}, retry_after: {form: delta, value: phase-end}}
    - {name: ok, respond: ok}
fleet: {clients: 30, start: ramp 1s, requests: 2, timeout: 20s}
subject: {policy: {base: 100ms, cap: 2s, budget: 10s, jitter: full}}
expect: {require: [retry-after, give-up]}
`

// TestRateLimited403: the reference client waits out a 403 rate limit and
// passes, without being blamed for retrying a non-retryable status; the
// controls, which take any 403 for a refusal, lose their requests
// (give-up).
func TestRateLimited403(t *testing.T) {
	sc, err := scenarios.Parse("secondary-403.yaml", []byte(secondary403))
	if err != nil {
		t.Fatal(err)
	}
	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered("retrylab"))
	res.AssertPass(t)
	if c := res.Verdict.Check(analyzer.CheckNonRetryable); c.Status == analyzer.StatusFail {
		t.Errorf("non-retryable failed the reference client for retrying a 403 rate limit: %s", c.Reason)
	}
	for _, subj := range []string{"no-retry", "ignore-retry-after"} {
		res = retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subj))
		res.AssertFails(t, analyzer.CheckGiveUp)
	}
}
