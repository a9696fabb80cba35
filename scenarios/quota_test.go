package scenarios

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestMetaLimits: the meta record lists every limit of every tier with the
// stub's defaults filled in, and its Quota is the limit with the lowest
// sustained rate among those every client meets: all of them without
// tiers, the default tier's under tiers, every tier's without a default.
func TestMetaLimits(t *testing.T) {
	second := timeline.Quota{Name: "second", Algorithm: "token-bucket", Rate: 20, Burst: 20, Key: "client", Limit: 20, Window: int64(time.Second)}
	ten := timeline.Quota{Name: "10s", Algorithm: "sliding-window", Rate: 10, Burst: 100, Key: "client", Limit: 100, Window: int64(10 * time.Second)}
	tests := []struct {
		name   string
		yaml   string
		quota  *timeline.Quota
		limits []timeline.Quota
	}{
		{"none", "{}", nil, nil},
		{"one limit, defaults filled", "server: {quota: {rate: 50/s}}",
			&timeline.Quota{Name: "default", Algorithm: "token-bucket", Rate: 50, Burst: 50, Key: "global", Limit: 50, Window: int64(time.Second)}, nil},
		{"layered: the lowest sustained rate", "server: {quota: {limits: [{name: second, rate: 20/s, burst: 20, key: client}, {name: 10s, rate: 100/10s, algorithm: sliding-window, key: client}]}}",
			&ten, []timeline.Quota{second, ten}},
		{"leaky bucket: its mode, its queue", "server: {quota: {limits: [{rate: 5/s, algorithm: leaky-bucket, burst: 3}, {rate: 1000/1d, algorithm: fixed-window}]}}",
			&timeline.Quota{Name: "day", Algorithm: "fixed-window", Rate: 1000 / 86400.0, Burst: 1000, Key: "global", Limit: 1000, Window: int64(24 * time.Hour)},
			[]timeline.Quota{
				{Name: "second", Algorithm: "leaky-bucket", Mode: "meter", Rate: 5, Burst: 3, Key: "global", Limit: 5, Window: int64(time.Second)},
				{Name: "day", Algorithm: "fixed-window", Rate: 1000 / 86400.0, Burst: 1000, Key: "global", Limit: 1000, Window: int64(24 * time.Hour)}}},
		{"tiers: the default tier's, though another is stricter", `server: {quota: {tiers: [
			{name: trial, keys: [t-*], limits: [{rate: 1/s, key: api-key}]},
			{name: free, keys: [f-*], default: true, limits: [{rate: 5/s, key: api-key}, {name: m, rate: 120/1m, key: api-key}]}]}}`,
			&timeline.Quota{Name: "m", Tier: "free", Algorithm: "token-bucket", Rate: 2, Burst: 120, Key: "api-key", Limit: 120, Window: int64(time.Minute)},
			[]timeline.Quota{
				{Name: "default", Tier: "trial", Algorithm: "token-bucket", Rate: 1, Burst: 1, Key: "api-key", Limit: 1, Window: int64(time.Second)},
				{Name: "second", Tier: "free", Algorithm: "token-bucket", Rate: 5, Burst: 5, Key: "api-key", Limit: 5, Window: int64(time.Second)},
				{Name: "m", Tier: "free", Algorithm: "token-bucket", Rate: 2, Burst: 120, Key: "api-key", Limit: 120, Window: int64(time.Minute)}}},
		{"tiers without a default: every tier's", `server: {quota: {tiers: [
			{name: paid, keys: [p-*], limits: [{rate: 50/s}]},
			{name: free, keys: [f-*], limits: [{rate: 5/s}]}]}}`,
			&timeline.Quota{Name: "default", Tier: "free", Algorithm: "token-bucket", Rate: 5, Burst: 5, Key: "global", Limit: 5, Window: int64(time.Second)},
			[]timeline.Quota{
				{Name: "default", Tier: "paid", Algorithm: "token-bucket", Rate: 50, Burst: 50, Key: "global", Limit: 50, Window: int64(time.Second)},
				{Name: "default", Tier: "free", Algorithm: "token-bucket", Rate: 5, Burst: 5, Key: "global", Limit: 5, Window: int64(time.Second)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := mustParse(t, tt.yaml)
			m := sc.Meta(MetaOptions{})
			if !reflect.DeepEqual(m.Quota, tt.quota) {
				t.Errorf("Quota = %+v; want %+v", m.Quota, tt.quota)
			}
			want := tt.limits
			if want == nil && tt.quota != nil {
				want = []timeline.Quota{*tt.quota}
			}
			if !reflect.DeepEqual(m.Limits, want) {
				t.Errorf("Limits =\n%+v\nwant\n%+v", m.Limits, want)
			}
		})
	}
}

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
	run := func(t *testing.T, sc *Scenario) ([]timeline.Attempt, []timeline.Outcome) {
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
		sc.Fleet.APIKeys = []KeyGroup{{Prefix: "free-", Share: 1}, {Prefix: "paid-", Share: 1}}
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

// TestReadmeQuotaExamples: the quota examples of docs/scenarios.md (the
// scenario reference, moved out of the README) parse.
func TestReadmeQuotaExamples(t *testing.T) {
	readme, err := os.ReadFile("../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Quotas: layered limits, tiers, costs")
	if !ok {
		t.Fatal("docs/scenarios.md has no quota section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := strings.Split(section, "```yaml\n")[1:]
	if len(blocks) != 2 {
		t.Fatalf("quota section has %d yaml blocks; want 2", len(blocks))
	}
	for i, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		sc, err := Parse("docs/scenarios.md", []byte(b))
		if err != nil {
			t.Errorf("block %d: %v", i+1, err)
			continue
		}
		if q := sc.Server.Quota; q == nil || len(q.Limits)+len(q.Tiers) < 3 {
			t.Errorf("block %d: quota %+v; want its three limits or tiers", i+1, q)
		}
	}
}
