package runner

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/timeline"
)

// TestRunAPIKeys: fleet.api_keys reach the stub as Bearer tokens, and its
// tiers tell them apart: paid clients meet their tier's tight limit, free
// ones never; without keys, a quota with no default or anonymous tier
// answers 401.
func TestRunAPIKeys(t *testing.T) {
	const src = `
duration: 10s
server:
  quota:
    tiers:
      - {name: free, keys: ["free-*"], limits: [{rate: 1000/s, key: api-key}]}
      - {name: paid, keys: ["paid-*"], limits: [{name: tight, rate: 1/s, burst: 1, key: api-key}]}
  phases: [{respond: quota, retry_after: {form: delta, value: limiter}}]
fleet: {clients: 4, requests: 3, start: ramp 100ms, timeout: 8s}
subject: {name: retrylab, policy: {base: 10ms, cap: 100ms, budget: 5s}}
`
	run := func(t *testing.T, sc *scenarios.Scenario) ([]timeline.Attempt, []timeline.Outcome) {
		t.Helper()
		var buf bytes.Buffer
		synctest.Test(t, func(t *testing.T) {
			if _, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 1, Timeline: &buf}); err != nil {
				t.Fatal(err)
			}
		})
		_, atts, outs := decodeAll(t, buf.Bytes())
		return atts, outs
	}
	t.Run("keys", func(t *testing.T) {
		sc := mustParse(t, src)
		sc.Fleet.APIKeys = []scenarios.KeyGroup{{Prefix: "free-", Share: 1}, {Prefix: "paid-", Share: 1}}
		atts, outs := run(t, sc)
		if len(outs) != 12 {
			t.Fatalf("%d outcomes; want 12", len(outs))
		}
		rejected := map[string]int{}
		for _, a := range atts {
			if a.Status == 401 {
				t.Fatalf("attempt %+v: 401; want every client's key taken by a tier", a)
			}
			if a.Status == 429 {
				rejected[a.Client]++
				if a.Limit != "paid/tight" {
					t.Errorf("attempt %+v: rejected by %q; want paid/tight", a, a.Limit)
				}
			}
		}
		// Clients 0 and 2 are free, 1 and 3 paid: three requests at once
		// overrun a paid key's 1/s.
		if rejected["0"]+rejected["2"] != 0 || rejected["1"] == 0 || rejected["3"] == 0 {
			t.Errorf("429s by client %v; want the paid clients 1 and 3 only", rejected)
		}
		for _, o := range outs {
			if o.Result != timeline.ResultOK {
				t.Errorf("outcome %+v; want ok", o)
			}
		}
	})
	t.Run("no keys", func(t *testing.T) {
		_, outs := run(t, mustParse(t, src))
		if len(outs) != 12 {
			t.Fatalf("%d outcomes; want 12", len(outs))
		}
		for _, o := range outs {
			if o.Status != 401 {
				t.Errorf("outcome %+v; want 401: no key, no default tier", o)
			}
		}
	})
}
