package scenarios

import (
	"os"
	"reflect"
	"strings"
	"testing"
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

// TestReadmeQuotaExamples: the README's quota examples parse.
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
