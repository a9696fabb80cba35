package scenarios

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
)

// TestParseMergeKeys: `<<: *anchor` and `<<: [*a, *b]` bring the keys the
// mapping does not set itself; the mapping's own keys win, and so do
// earlier sources over later ones.
func TestParseMergeKeys(t *testing.T) {
	src := `server:
  phases:
    - &down {name: down, for: 2s, respond: {status: 503}, retry_after: {form: delta, value: 2}}
    - <<: *down
      name: again
      respond: {status: 502}
    - &slow {name: slow, for: 1s, latency: 5ms}
    - <<: [*slow, *down]
      name: both
    - {}
subject:
  policy:
    <<: {base: 100ms, cap: 5s}
    cap: 2s
`
	sc, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ra := stubserver.RetryAfter{Form: "delta", Value: "fixed", Fixed: 2 * time.Second}
	want := []stubserver.Phase{
		{Name: "down", For: 2 * time.Second, Respond: stubserver.Respond{Kind: "status", Status: 503}, RetryAfter: ra},
		{Name: "again", For: 2 * time.Second, Respond: stubserver.Respond{Kind: "status", Status: 502}, RetryAfter: ra},
		{Name: "slow", For: time.Second, Respond: stubserver.Respond{Kind: "ok"}, Latency: 5 * time.Millisecond},
		{Name: "both", For: time.Second, Respond: stubserver.Respond{Kind: "status", Status: 503}, RetryAfter: ra, Latency: 5 * time.Millisecond},
		{Name: "phase-5", Respond: stubserver.Respond{Kind: "ok"}},
	}
	if !reflect.DeepEqual(sc.Server.Phases, want) {
		t.Errorf("phases =\n%+v\nwant\n%+v", sc.Server.Phases, want)
	}
	if p := sc.Subject.Policy; p.Base != 100*time.Millisecond || p.Cap != 2*time.Second {
		t.Errorf("policy base, cap = %v, %v; want 100ms, 2s", p.Base, p.Cap)
	}
	checkRoundTrip(t, []byte(src))
}

// TestParseMergeKeyErrors: what a merge brings is checked like the keys
// written in place, at the merged node's place.
func TestParseMergeKeyErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"server:\n  phases:\n    - &a {for: 1s, bogus: 1}\n    - <<: *a\n",
			`t.yaml:3:20: server.phases[0].bogus: unknown key "bogus"`},
		{"fleet:\n  <<: {clients: 0}\n", `t.yaml:2:17: fleet.clients: 0 is out of range [1, 1000000]`},
		{"fleet:\n  <<: 5\n", `t.yaml:2:7: fleet: want a mapping, got an integer`},
		{"fleet:\n  <<: [{clients: 2}, 5]\n", `t.yaml:2:22: fleet: want a mapping, got an integer`},
		// an anchor that merges itself ends, with an error
		{"fleet: &f\n  <<: *f\n", `t.yaml:2:7: fleet: merge keys nested too deep`},
	}
	for _, tt := range tests {
		_, err := Parse("t.yaml", []byte(tt.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want prefix %q", tt.yaml, err, tt.want)
		}
	}
}

// FuzzParseMerge is FuzzParse's round trip seeded with merge keys: what
// Parse accepts, ParseServer accepts too, and its JSON parses back equal.
func FuzzParseMerge(f *testing.F) {
	f.Add([]byte("server:\n  phases:\n    - &a {for: 1s, respond: {status: 503}}\n    - <<: *a\n      for: 2s\n    - {}\n"))
	f.Add([]byte("subject:\n  policy:\n    <<: [{base: 1s}, {base: 2s, cap: 5s}]\n"))
	f.Add([]byte("server: {quota: &q {rate: 5/s}, phases: [{respond: {mix: {<<: {200: 1}, 500: 2}}}]}\n"))
	f.Add([]byte("<<: {name: merged}\nfleet: {<<: {clients: 3}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			return
		}
		if _, err := ParseServer("f.yaml", data); err != nil {
			t.Fatalf("Parse accepts but ParseServer rejects: %v", err)
		}
		j, err := json.Marshal(sc)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse("f.yaml", j)
		if err != nil {
			t.Fatalf("Parse(Marshal(sc)) = %v\njson: %s", err, j)
		}
		back.Source, sc.Source = nil, nil
		if !reflect.DeepEqual(back, sc) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\njson: %s", back, sc, j)
		}
	})
}
