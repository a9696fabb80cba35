package scenarios

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/stubserver"
)

// TestMarshalJSONBytes pins the encoding byte for byte: the key order and
// omission rules are the scenario-file schema's tables', and these are the
// bytes json.go wrote before the tables replaced it (a timeline's meta
// record keeps them).
func TestMarshalJSONBytes(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{`
server:
  quota: {rate: 5/100ms, algorithm: sliding-window, key: endpoint, burst: 3}
  phases:
    - {name: a, for: 1s, respond: {mix: {503: 2, 200: 7.5, reset: 1}}, retry_after: {form: huge}, latency: 3ms}
    - {for: 2s, respond: {fault: hang}, retry_after: {form: delta, value: 2.5, spread: 3s}}
    - {for: 1s, retry_after: {form: fractional, value: 1, spread: 250ms}}
    - {respond: quota, retry_after: {form: date, value: limiter}}
fleet: {start: poisson 12.5/s, method: POST, think: 1ms}
subject: {name: "exec:sh -c 'echo ok'", policy: {rate: 3/2s, burst: 2, timeout: 1s, jitter: equal}}
expect: {skip: [pacing], thresholds: {waves.threshold: 2.5}}
`, `{"name":"t","duration":"1m0s","server":{"quota":{"algorithm":"sliding-window","rate":"5/100ms","burst":3,"key":"endpoint"},"phases":[{"name":"a","for":"1s","respond":{"mix":{"503":2,"200":7.5,"reset":1}},"retry_after":{"form":"huge"},"latency":"3ms"},{"name":"phase-2","for":"2s","respond":{"fault":"hang"},"retry_after":{"form":"delta","value":"2.5s","spread":"3s"}},{"name":"phase-3","for":"1s","respond":"ok","retry_after":{"form":"fractional","value":"1s","spread":"250ms"}},{"name":"phase-4","respond":"quota","retry_after":{"form":"date","value":"limiter"}}]},"fleet":{"clients":10,"start":"poisson 12.5/s","requests":1,"think":"1ms","method":"POST","timeout":"30s"},"subject":{"name":"exec:sh -c 'echo ok'","policy":{"jitter":"equal","rate":"1.5/s","burst":2,"timeout":"1s"}},"expect":{"skip":["pacing"],"thresholds":{"waves.threshold":2.5}}}`},
		{"server: {quota: {rate: 5/s, algorithm: leaky-bucket, burst: 3, key: client, status: 403, costs: [{method: POST, path: /search, cost: 2}], backend: redis://127.0.0.1:6379/0, on_error: open}}",
			`{"name":"t","duration":"1m0s","server":{"quota":{"algorithm":"leaky-bucket","rate":"5/1s","burst":3,"key":"client","mode":"meter","status":403,"costs":[{"method":"POST","path":"/search","cost":2}],"backend":"redis://127.0.0.1:6379/0","on_error":"open"}},"fleet":{"clients":10,"start":"burst","requests":1,"think":"0s","method":"GET","timeout":"30s"},"subject":{"name":"retrylab"}}`},
		{"server: {quota: {limits: [{name: s, rate: 10/s, burst: 20}, {rate: 300/1m, algorithm: sliding-window}], costs: [{method: POST, cost: 2}]}}",
			`{"name":"t","duration":"1m0s","server":{"quota":{"limits":[{"name":"s","algorithm":"token-bucket","rate":"10/1s","burst":20,"key":"global"},{"algorithm":"sliding-window","rate":"300/1m0s","key":"global"}],"costs":[{"method":"POST","cost":2}]}},"fleet":{"clients":10,"start":"burst","requests":1,"think":"0s","method":"GET","timeout":"30s"},"subject":{"name":"retrylab"}}`},
		{`server:
  headers: x-ratelimit
  quota:
    tiers:
      - {name: free, keys: ["free-*", trial], default: true, limits: [{rate: 5/s, algorithm: leaky-bucket, mode: shape, max_delay: 250ms}]}
      - {name: anon, anonymous: true, limits: [{rate: 5/s}]}
  capacity: {concurrency: 50, queue: 100, service: 20ms, dist: exponential, discipline: lifo, cancel_on_disconnect: true}
  phases:
    - {name: gh, for: 1s, respond: {status: 403, rate_limit: true}, retry_after: {form: delta, value: 1}, capacity: 30%}
    - {respond: quota}
fleet: {clients: 4, start: ramp 2s, attempt_timeout: 20ms, api_keys: [{prefix: free-, share: 3}, {prefix: paid-}]}
subject: {policy: {base: 100ms, cap: 2s, max_attempts: 4, budget: 10s}}
expect: {checks: [waves, pacing], require: [pacing], allow_unexercised: true}
`, `{"name":"t","duration":"1m0s","server":{"headers":"x-ratelimit","quota":{"tiers":[{"name":"free","keys":["free-*","trial"],"limits":[{"algorithm":"leaky-bucket","rate":"5/1s","key":"global","mode":"shape","max_delay":"250ms"}],"default":true},{"name":"anon","limits":[{"algorithm":"token-bucket","rate":"5/1s","key":"global"}],"anonymous":true}]},"capacity":{"concurrency":50,"queue":100,"service":"20ms","dist":"exponential","discipline":"lifo","cancel_on_disconnect":true},"phases":[{"name":"gh","for":"1s","respond":{"status":403,"rate_limit":true},"retry_after":{"form":"delta","value":"1s"},"capacity":0.3},{"name":"phase-2","respond":"quota"}]},"fleet":{"clients":4,"start":"ramp 2s","requests":1,"think":"0s","method":"GET","timeout":"30s","attempt_timeout":"20ms","api_keys":[{"prefix":"free-","share":3},{"prefix":"paid-","share":1}]},"subject":{"name":"retrylab","policy":{"base":"100ms","cap":"2s","max_attempts":4,"budget":"10s"}},"expect":{"checks":["waves","pacing"],"require":["pacing"],"allow_unexercised":true}}`},
	} {
		sc, err := Parse("t.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.yaml, err)
		}
		got, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("Marshal(Parse(%q)) =\n%s\nwant\n%s", tt.yaml, got, tt.want)
		}
	}
}

// TestUnknownKeysFromTables: a mapping's unknown-key message lists its
// table's keys, and choices are the stub's.
func TestUnknownKeysFromTables(t *testing.T) {
	for _, tt := range []struct {
		yaml, path string
		names      []string
	}{
		{"zz: 1\n", "zz", scenarioKeys.names()},
		{"server: {zz: 1}\n", "server.zz", serverKeys.names()},
		{"fleet: {zz: 1}\n", "fleet.zz", fleetKeys.names()},
		{"fleet: {api_keys: [{prefix: a, zz: 1}]}\n", "fleet.api_keys[0].zz", keyGroupKeys(nil, "").names()},
		{"subject: {zz: 1}\n", "subject.zz", subjectKeys.names()},
		{"subject: {policy: {zz: 1}}\n", "subject.policy.zz", policyKeys.names()},
		{"expect: {zz: 1}\n", "expect.zz", expectKeys.names()},
		{"server: {phases: [{zz: 1}]}\n", "server.phases[0].zz", phaseKeys(true).names()},
		{"server: {phases: [{retry_after: {zz: 1}}]}\n", "server.phases[0].retry_after.zz", retryAfterKeys.names()},
		{"server: {capacity: {concurrency: 1, service: 1s, zz: 1}}\n", "server.capacity.zz", capacityKeys.names()},
		{"server: {quota: {rate: 1/s, zz: 1}}\n", "server.quota.zz", append(limitKeys.names(), quotaKeys.names()...)},
		{"server: {quota: {limits: [{rate: 1/s, zz: 1}]}}\n", "server.quota.limits[0].zz", limitKeys.names()},
		{"server: {quota: {tiers: [{name: a, limits: [{rate: 1/s}], zz: 1}]}}\n", "server.quota.tiers[0].zz", tierKeys.names()},
		{"server: {quota: {limits: [{rate: 1/s}], costs: [{cost: 1, zz: 1}]}}\n", "server.quota.costs[0].zz", costKeys.names()},
	} {
		_, err := Parse("t.yaml", []byte(tt.yaml))
		want := tt.path + `: unknown key "zz" (want one of ` + strings.Join(tt.names, ", ") + ")"
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want ...%s", tt.yaml, err, want)
		}
	}
	if got := strings.Join(fleetKeys.names(), " "); got != "clients start requests think method timeout attempt_timeout processes api_keys" {
		t.Errorf("fleet keys = %s", got)
	}
	_, err := Parse("t.yaml", []byte("server: {quota: {rate: 1/s, algorithm: gcra}}\n"))
	if want := "want one of " + strings.Join(stubserver.AlgorithmNames(), ", ") + `, got "gcra"`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("bad algorithm: %v; want ...%s", err, want)
	}
}

// TestNullIsMissing: a required key left empty is missing.
func TestNullIsMissing(t *testing.T) {
	_, err := Parse("t.yaml", []byte("server: {capacity: {concurrency: ~, service: 1s}}\n"))
	if want := "t.yaml:1:20: server.capacity: capacity needs concurrency: N (the workers serving at once)"; err == nil || err.Error() != want {
		t.Errorf("Parse(null concurrency) = %v; want %s", err, want)
	}
}
