package scenarios

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
)

// designExample is the scenario file of the project's design, verbatim:
// the user-facing shape every loader change must keep accepting.
const designExample = `name: outage-date
description: Everyone gets 503 with an HTTP-date Retry-After until the outage ends.
duration: 30s                 # hard cap on the whole run
server:
  latency: 2ms                # added to every response
  headers: ietf               # ietf | x-ratelimit | none
  quota: {algorithm: token-bucket, rate: 100/s, burst: 20, key: global}
  phases:                     # in order; the last lasts until the run ends
    - name: outage
      for: 5s
      respond: {status: 503}  # ok | quota | {status: N} | {mix: {200: 90, 500: 5, 404: 5}} | {fault: reset|hang}
      retry_after: {form: date, value: phase-end}
    - name: recovered
      respond: quota
      retry_after: {form: delta, value: limiter}
fleet:
  clients: 1000
  start: burst                # burst | ramp 10s | poisson 200/s
  requests: 3                 # logical requests per client
  think: 100ms
  method: GET                 # POST exercises the idempotency check
  timeout: 60s                # watchdog per logical request: past it, the outcome is "hung"
subject:
  name: retrylab
  policy: {base: 100ms, cap: 5s, max_attempts: 5, budget: 20s, jitter: full}
expect:
  checks: [retry-after, instant-retry, waves, non-retryable, attempts, budget]
  thresholds: {amplification: 3}
`

func TestParseDesignExample(t *testing.T) {
	sc, err := Parse("ci.yaml", []byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		Name:        "outage-date",
		Description: "Everyone gets 503 with an HTTP-date Retry-After until the outage ends.",
		Duration:    30 * time.Second,
		Server: stubserver.Config{
			Latency: 2 * time.Millisecond,
			Headers: stubserver.HeadersIETF,
			Quota:   &stubserver.Quota{Limits: []stubserver.Limit{{Algorithm: "token-bucket", Limit: 100, Per: time.Second, Burst: 20, Key: "global"}}},
			Phases: []stubserver.Phase{
				{Name: "outage", For: 5 * time.Second, Respond: stubserver.Respond{Kind: "status", Status: 503},
					RetryAfter: stubserver.RetryAfter{Form: "date", Value: "phase-end"}},
				{Name: "recovered", Respond: stubserver.Respond{Kind: "quota"},
					RetryAfter: stubserver.RetryAfter{Form: "delta", Value: "limiter"}},
			},
		},
		Fleet: Fleet{Clients: 1000, Start: Arrival{Kind: "burst"}, Requests: 3, Think: 100 * time.Millisecond,
			Method: "GET", Timeout: 60 * time.Second},
		Subject: SubjectSpec{Name: "retrylab"},
		Expect: Expect{
			Checks:     []string{"retry-after", "instant-retry", "waves", "non-retryable", "attempts", "budget"},
			Thresholds: map[string]float64{"amplification": 3},
		},
		Source: []byte(designExample),
		File:   "ci.yaml",
	}
	want.Subject.Policy.Base = 100 * time.Millisecond
	want.Subject.Policy.Cap = 5 * time.Second
	want.Subject.Policy.MaxAttempts = 5
	want.Subject.Policy.Budget = 20 * time.Second
	want.Subject.Policy.Jitter = "full"
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("Parse(design example) =\n%+v\nwant\n%+v", sc, want)
	}
}

func TestParseDefaults(t *testing.T) {
	sc, err := Parse("dir/minimal.yml", []byte("description: all defaults\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "minimal" {
		t.Errorf("Name = %q; want minimal (from the file name)", sc.Name)
	}
	if sc.Duration != DefaultDuration {
		t.Errorf("Duration = %v; want %v", sc.Duration, DefaultDuration)
	}
	wantFleet := Fleet{Clients: DefaultClients, Start: Arrival{Kind: ArrivalBurst}, Requests: DefaultRequests,
		Method: DefaultMethod, Timeout: DefaultTimeout}
	if !reflect.DeepEqual(sc.Fleet, wantFleet) {
		t.Errorf("Fleet = %+v; want %+v", sc.Fleet, wantFleet)
	}
	if sc.Subject.Name != DefaultSubject {
		t.Errorf("Subject.Name = %q; want %q", sc.Subject.Name, DefaultSubject)
	}
	if len(sc.Server.Phases) != 0 || sc.Server.Quota != nil {
		t.Errorf("Server = %+v; want the zero Config", sc.Server)
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		yaml  string
		check func(sc *Scenario) (got, want any)
	}{
		{"fleet: {start: ramp 10s}", func(sc *Scenario) (any, any) {
			return sc.Fleet.Start, Arrival{Kind: ArrivalRamp, Over: 10 * time.Second}
		}},
		{"fleet: {start: poisson 200/s}", func(sc *Scenario) (any, any) {
			return sc.Fleet.Start, Arrival{Kind: ArrivalPoisson, Rate: 200}
		}},
		{"fleet: {start: poisson 30/1m}", func(sc *Scenario) (any, any) {
			return sc.Fleet.Start, Arrival{Kind: ArrivalPoisson, Rate: 0.5}
		}},
		{"server: {quota: {rate: 5/100ms}}", func(sc *Scenario) (any, any) {
			return sc.Server.Quota.Limits[0], stubserver.Limit{Algorithm: "token-bucket", Limit: 5, Per: 100 * time.Millisecond, Key: "global"}
		}},
		{"server: {quota: {rate: 100/1m, key: client, algorithm: fixed-window}}", func(sc *Scenario) (any, any) {
			return sc.Server.Quota.Limits[0], stubserver.Limit{Algorithm: "fixed-window", Limit: 100, Per: time.Minute, Key: "client"}
		}},
		{"server: {quota: {rate: 50}}", func(sc *Scenario) (any, any) {
			return sc.Server.Quota.Limits[0].Limit / sc.Server.Quota.Limits[0].Per.Seconds(), 50.0
		}},
		{"server: {quota: {limits: [{name: second, rate: 10/s, burst: 20}, {name: minute, rate: 300/1m, algorithm: sliding-window}, {rate: 10000/1d, algorithm: fixed-window, key: api-key}]}}", func(sc *Scenario) (any, any) {
			return sc.Server.Quota, &stubserver.Quota{Limits: []stubserver.Limit{
				{Name: "second", Algorithm: "token-bucket", Limit: 10, Per: time.Second, Burst: 20, Key: "global"},
				{Name: "minute", Algorithm: "sliding-window", Limit: 300, Per: time.Minute, Key: "global"},
				{Algorithm: "fixed-window", Limit: 10000, Per: 24 * time.Hour, Key: "api-key"}}}
		}},
		{"server: {quota: {rate: 5/s, algorithm: leaky-bucket, burst: 3, key: client, status: 403, costs: [{method: POST, path: /search, cost: 2}], backend: redis://127.0.0.1:6379/0, on_error: open}}", func(sc *Scenario) (any, any) {
			return sc.Server.Quota, &stubserver.Quota{
				Limits:  []stubserver.Limit{{Algorithm: "leaky-bucket", Mode: "meter", Limit: 5, Per: time.Second, Burst: 3, Key: "client", Status: 403}},
				Costs:   []stubserver.Cost{{Method: "POST", Path: "/search", Cost: 2}},
				Backend: "redis://127.0.0.1:6379/0", OnError: "open"}
		}},
		{"server: {quota: {limits: [{rate: 2/s, algorithm: leaky-bucket, mode: shape, max_delay: 500ms}], costs: [{cost: 1}]}}", func(sc *Scenario) (any, any) {
			return []any{sc.Server.Quota.Limits[0].Mode, sc.Server.Quota.Limits[0].MaxDelay, sc.Server.Quota.Costs}, []any{"shape", 500 * time.Millisecond, []stubserver.Cost{{Cost: 1}}}
		}},
		{`server:
  quota:
    tiers:
      - {name: free, keys: ["free-*"], default: true, limits: [{rate: 2/s, key: api-key}]}
      - {name: paid, keys: ["paid-*", vip], limits: [{rate: 20/s, key: api-key}, {name: day, rate: 1000/1d}]}
      - {name: anon, anonymous: true, limits: [{rate: 1/s}]}
`, func(sc *Scenario) (any, any) {
			return sc.Server.Quota.Tiers, []stubserver.Tier{
				{Name: "free", Keys: []string{"free-*"}, Default: true, Limits: []stubserver.Limit{{Algorithm: "token-bucket", Limit: 2, Per: time.Second, Key: "api-key"}}},
				{Name: "paid", Keys: []string{"paid-*", "vip"}, Limits: []stubserver.Limit{{Algorithm: "token-bucket", Limit: 20, Per: time.Second, Key: "api-key"},
					{Name: "day", Algorithm: "token-bucket", Limit: 1000, Per: 24 * time.Hour, Key: "global"}}},
				{Name: "anon", Anonymous: true, Limits: []stubserver.Limit{{Algorithm: "token-bucket", Limit: 1, Per: time.Second, Key: "global"}}}}
		}},
		{"server: {phases: [{respond: {status: 403, rate_limit: true}, retry_after: {form: delta, value: 60}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].Respond, stubserver.Respond{Kind: "status", Status: 403, RateLimit: true}
		}},
		{"fleet: {clients: 10, processes: 3}", func(sc *Scenario) (any, any) {
			return []int{sc.Fleet.Processes, sc.Fleet.ProcessCount(), sc.Fleet.ProcessOf(0), sc.Fleet.ProcessOf(4), sc.Fleet.ProcessOf(9)}, []int{3, 3, 0, 1, 0}
		}},
		{"fleet: {clients: 2, processes: 5}", func(sc *Scenario) (any, any) {
			return []int{sc.Fleet.ProcessCount(), sc.Fleet.ProcessOf(1)}, []int{2, 1}
		}},
		{"fleet: {clients: 4, api_keys: [{prefix: free-, share: 3}, {prefix: paid-}]}", func(sc *Scenario) (any, any) {
			return sc.Fleet.APIKeys, []KeyGroup{{Prefix: "free-", Share: 3}, {Prefix: "paid-", Share: 1}}
		}},
		{"server: {phases: [{respond: {mix: {200: 90, 500: 5, reset: 2, hang: 0.5}}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].Respond, stubserver.Respond{Kind: "mix", Mix: []stubserver.Weighted{
				{Status: 200, Weight: 90}, {Status: 500, Weight: 5}, {Fault: "reset", Weight: 2}, {Fault: "hang", Weight: 0.5}}}
		}},
		{"server: {phases: [{respond: {fault: hang}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].Respond, stubserver.Respond{Kind: "fault", Fault: "hang"}
		}},
		{"server: {phases: [{for: 1s}, {}]}", func(sc *Scenario) (any, any) {
			return []string{sc.Server.Phases[0].Name, sc.Server.Phases[1].Name, sc.Server.Phases[1].Respond.Kind}, []string{"phase-1", "phase-2", "ok"}
		}},
		{"server: {phases: [{retry_after: {form: delta, value: 2}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].RetryAfter, stubserver.RetryAfter{Form: "delta", Value: "fixed", Fixed: 2 * time.Second}
		}},
		{"server: {phases: [{retry_after: {form: delta, value: 1.5, spread: 1s}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].RetryAfter, stubserver.RetryAfter{Form: "delta", Value: "fixed", Fixed: 1500 * time.Millisecond, Spread: time.Second}
		}},
		{"server: {phases: [{retry_after: {form: date, value: 2500ms}}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].RetryAfter.Fixed, 2500 * time.Millisecond
		}},
		{"server: {phases: [{retry_after: garbage}]}", func(sc *Scenario) (any, any) {
			return sc.Server.Phases[0].RetryAfter, stubserver.RetryAfter{Form: "garbage"}
		}},
		{"subject: {policy: {rate: 10/s, burst: 5, timeout: 2s}}", func(sc *Scenario) (any, any) {
			return []any{sc.Subject.Policy.Rate, sc.Subject.Policy.Burst, sc.Subject.Policy.Timeout}, []any{10.0, 5, 2 * time.Second}
		}},
		{"expect: {skip: [waves], thresholds: {waves.threshold: 2.5}}", func(sc *Scenario) (any, any) {
			return []any{sc.Expect.Skip, sc.Expect.Thresholds}, []any{[]string{"waves"}, map[string]float64{"waves.threshold": 2.5}}
		}},
		{"expect: {thresholds: {waves.window: 10ms, retry-after.tolerance: 0.02, non-retryable.statuses: 404, amplification: 3, jitter-bounds.first_exponent: 1}}", func(sc *Scenario) (any, any) {
			return sc.Expect.Thresholds, map[string]float64{"waves.window": 0.01, "retry-after.tolerance": 0.02, "non-retryable.statuses": 404, "amplification": 3, "jitter-bounds.first_exponent": 1}
		}},
		{"server:\n  phases:\n    - &down {for: 2s, respond: {status: 503}}\n    - *down\n    - {}\n", func(sc *Scenario) (any, any) {
			return []any{sc.Server.Phases[1].For, sc.Server.Phases[1].Respond.Status}, []any{2 * time.Second, 503}
		}},
		{`subject: {name: "exec:python3 client.py --fast"}`, func(sc *Scenario) (any, any) {
			return sc.Subject.Name, "exec:python3 client.py --fast"
		}},
		{"server: {capacity: {concurrency: 50, queue: 100, service: 20ms, dist: exponential, discipline: lifo, cancel_on_disconnect: true}}", func(sc *Scenario) (any, any) {
			return sc.Server.Capacity, &stubserver.Capacity{Concurrency: 50, Queue: 100, Service: 20 * time.Millisecond, Dist: "exponential", Discipline: "lifo", CancelOnDisconnect: true}
		}},
		{"server: {capacity: {concurrency: 4, service: 1s}}", func(sc *Scenario) (any, any) {
			return sc.Server.Capacity, &stubserver.Capacity{Concurrency: 4, Service: time.Second, Dist: "fixed", Discipline: "fifo"}
		}},
		{"server: {capacity: {concurrency: 10, service: 1ms}, phases: [{for: 1s, capacity: 30%}, {for: 1s, capacity: 0.25}, {for: 1s, capacity: 1}, {for: 1s, capacity: \"2.5 %\"}, {}]}", func(sc *Scenario) (any, any) {
			var got []float64
			for _, p := range sc.Server.Phases {
				got = append(got, p.Capacity)
			}
			return got, []float64{0.3, 0.25, 1, 0.025, 0}
		}},
		{"fleet: {method: POST, think: 0, timeout: 1m30s}", func(sc *Scenario) (any, any) {
			return []any{sc.Fleet.Method, sc.Fleet.Think, sc.Fleet.Timeout}, []any{"POST", time.Duration(0), 90 * time.Second}
		}},
	}
	for _, tt := range tests {
		sc, err := Parse("t.yaml", []byte(tt.yaml))
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.yaml, err)
			continue
		}
		if got, want := tt.check(sc); !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v; want %+v", tt.yaml, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		yaml string
		want string // the whole first line of the error
	}{
		{"nmae: x\n", `t.yaml:1:1: nmae: unknown key "nmae" (want one of name, description, duration, server, fleet, subject, expect)`},
		{"duration: 5x\n", `t.yaml:1:11: duration: bad duration "5x" (want e.g. 250ms, 5s, 1m30s)`},
		{"duration: 5\n", `t.yaml:1:11: duration: duration "5" has no unit (write 5s or 5ms)`},
		{"duration: -5s\n", `t.yaml:1:11: duration: negative duration "-5s"`},
		{"duration: 0\n", `t.yaml:1:11: duration: duration 0s is out of range [1ns, 24h0m0s]`},
		{"server:\n  phases:\n    - for: -1s\n", `t.yaml:3:12: server.phases[0].for: negative duration "-1s"`},
		{"server:\n  latency: fast\n", `t.yaml:2:12: server.latency: bad duration "fast" (want e.g. 250ms, 5s, 1m30s)`},
		{"server:\n  headers: github\n", `t.yaml:2:12: server.headers: want one of ietf, x-ratelimit, none, got "github"`},
		{"server:\n  quota: {rate: 100/fortnight}\n", `t.yaml:2:17: server.quota.rate: bad rate "100/fortnight": interval "fortnight" is not a duration (want e.g. 100/s, 100/1m, 5/100ms)`},
		{"server:\n  quota: {rate: 0/s}\n", `t.yaml:2:17: server.quota.rate: rate "0/s" must be positive`},
		{"server:\n  quota: {rate: lots}\n", `t.yaml:2:17: server.quota.rate: bad rate "lots" (want e.g. 100/s, 100/1m, 5/100ms)`},
		{"server:\n  quota: {burst: 3}\n", `t.yaml:2:10: server.quota: quota needs a rate (e.g. rate: 100/s)`},
		{"server:\n  quota: {rate: 1/s, key: user}\n", `t.yaml:2:27: server.quota.key: want one of global, client, api-key, endpoint, got "user"`},
		{"server:\n  phases:\n    - respond: quota\n", `t.yaml:3:16: server.phases[0].respond: respond: quota needs server.quota`},
		{"server:\n  phases:\n    - respond: {status: 700}\n", `t.yaml:3:25: server.phases[0].respond.status: 700 is out of range [200, 599]`},
		{"server:\n  phases:\n    - respond: {status: 503, fault: reset}\n", `t.yaml:3:16: server.phases[0].respond: want ok, quota, passthrough, {status: N}, {mix: {...}} or {fault: reset|hang}`},
		{"server:\n  phases:\n    - respond: {mix: {200: 9, 600: 1}}\n", `t.yaml:3:31: server.phases[0].respond.mix.600: want a status 200-599, a fault (reset, hang) or passthrough, got "600"`},
		{"server:\n  phases:\n    - respond: passthrough\n", `t.yaml:3:16: server.phases[0].respond: respond: passthrough needs server.upstream (the URL of the API to forward to)`},
		{"server:\n  phases:\n    - respond: {mix: {503: 1, passthrough: 9}}\n", `t.yaml:3:31: server.phases[0].respond.mix.passthrough: passthrough needs server.upstream (the URL of the API to forward to)`},
		{"server:\n  upstream: [x]\n", `t.yaml:2:13: server.upstream: want a string, got a sequence`},
		{"server:\n  proxy_timeout: 200ms\n", `t.yaml:2:18: server.proxy_timeout: a proxy timeout needs protocol: grpc (an HTTP client's own per-attempt timeout plays it)`},
		{"server:\n  protocol: grpc\n  proxy_timeout: -1s\n", `t.yaml:3:18: server.proxy_timeout: negative duration "-1s"`},
		{"server:\n  upstream: ftp://api\n", `t.yaml:2:13: server.upstream: "ftp://api" is not an http or https URL (want e.g. http://127.0.0.1:9000)`},
		{"server:\n  upstream: http://me:pw@api\n", `t.yaml:2:13: server.upstream: "http://me:xxxxx@api" carries user info; put credentials in the application's requests`},
		{"server:\n  phases:\n    - respond: {mix: {200: 0}}\n", `t.yaml:3:28: server.phases[0].respond.mix.200: weight must be positive`},
		{"server:\n  phases:\n    - respond: {fault: delay}\n", `t.yaml:3:24: server.phases[0].respond.fault: want one of reset, hang, got "delay"`},
		{"server:\n  phases:\n    - respond: {statuz: 503}\n", `t.yaml:3:17: server.phases[0].respond.statuz: unknown key "statuz" (want one of status, mix, fault)`},
		{"server:\n  phases:\n    - respond: teapot\n", `t.yaml:3:16: server.phases[0].respond: want ok, quota, passthrough, {status: N}, {mix: {...}} or {fault: reset|hang}, got "teapot"`},
		{"server:\n  phases:\n    - {respond: ok}\n    - {respond: ok}\n", `t.yaml:3:7: server.phases[0]: every phase but the last needs a positive ` + "`for`" + ` (e.g. for: 5s)`},
		{"server:\n  phases:\n    - {name: a, for: 1s}\n    - {name: a}\n", `t.yaml:4:14: server.phases[1].name: phase name "a" used twice`},
		{"server:\n  phases:\n    - retry_after: {form: later}\n", `t.yaml:3:27: server.phases[0].retry_after.form: want one of none, delta, date, negative, garbage, past-date, fractional, huge, pushback, pushback-negative, pushback-garbage, retry-info, got "later"`},
		{"server:\n  phases:\n    - retry_after: {value: 5}\n", `t.yaml:3:28: server.phases[0].retry_after.value: value given but form is none`},
		{"server:\n  phases:\n    - retry_after: {form: delta, value: -2}\n", `t.yaml:3:41: server.phases[0].retry_after.value: -2 is out of range [0, 1e+09]`},
		{"server:\n  phases:\n    - retry_after: {form: delta, value: soon}\n", `t.yaml:3:41: server.phases[0].retry_after.value: want seconds, a duration, limiter or phase-end, got "soon"`},
		{"server:\n  phases:\n    - retry_after: {form: delta, value: limiter}\n", `t.yaml:3:41: server.phases[0].retry_after.value: value: limiter needs server.quota`},
		{"server:\n  phases:\n    - retry_after: {form: delta, spread: -1s}\n", `t.yaml:3:42: server.phases[0].retry_after.spread: negative duration "-1s"`},
		// found by stubserver.Config.Validate: delta and date send whole seconds
		{"server:\n  phases:\n    - retry_after: {form: delta, value: 2, spread: 500ms}\n",
			`t.yaml:3:52: server.phases[0].retry_after.spread: spread 500ms is not whole seconds: form delta sends whole seconds, so its spread is drawn in whole seconds (use e.g. 1s)`},
		{"server:\n  phases:\n    - {for: 1s, retry_after: {form: date, value: 1, spread: 1500ms}}\n    - {}\n",
			`t.yaml:3:61: server.phases[0].retry_after.spread: spread 1.5s is not whole seconds: form date sends whole seconds, so its spread is drawn in whole seconds (use e.g. 1s)`},
		{"server:\n  phases: {a: 1}\n", `t.yaml:2:11: server.phases: want a sequence, got a mapping`},
		// found by stubserver.Config.Validate, placed by its field path
		{"server:\n  quota: {rate: 1/s}\n  phases:\n    - {respond: {status: 503}, retry_after: {form: delta, value: limiter}}\n",
			`t.yaml:4:66: server.phases[0].retry_after.value: limiter needs respond: quota`},
		{"server:\n  phases:\n    - retry_after: {form: date, value: phase-end}\n",
			`t.yaml:3:40: server.phases[0].retry_after.value: phase-end on the last phase, which never ends`},
		{"server:\n  quota: {rate: 0.5/s, algorithm: fixed-window}\n",
			`t.yaml:2:17: server.quota.rate: a fixed-window limit needs at least 1 request per window, got 0.5`},
		// server.quota: layered limits, tiers, costs, backend, on_error
		{"server:\n  quota: {limits: [{rate: 1/s}], rate: 2/s}\n", `t.yaml:2:34: server.quota.rate: rate belongs to a limit: with limits or tiers, write it in each limit`},
		{"server:\n  quota: {rate: 1/s, tiers: []}\n", `t.yaml:2:11: server.quota.rate: rate belongs to a limit: with limits or tiers, write it in each limit`},
		{"server:\n  quota: {backend: memory}\n", `t.yaml:2:10: server.quota: quota needs a rate (e.g. rate: 100/s), limits or tiers`},
		{"server:\n  quota: {limitz: []}\n", `t.yaml:2:10: server.quota: quota needs a rate (e.g. rate: 100/s), limits or tiers`},
		{"server:\n  quota: {limits: [{rate: 1/s}], tierz: []}\n", `t.yaml:2:34: server.quota.tierz: unknown key "tierz" (want one of limits, tiers, costs, backend, on_error)`},
		{"server:\n  quota: {limits: [{burst: 3}]}\n", `t.yaml:2:20: server.quota.limits[0]: a limit needs a rate (e.g. rate: 100/s)`},
		{"server:\n  quota: {limits: [{rate: 1/s, algorithm: gcra}]}\n", `t.yaml:2:43: server.quota.limits[0].algorithm: want one of token-bucket, fixed-window, sliding-window, sliding-window-log, leaky-bucket, got "gcra"`},
		{"server:\n  quota: {limits: [{rate: 1/s, per: 1s}]}\n", `t.yaml:2:32: server.quota.limits[0].per: unknown key "per" (want one of name, algorithm, rate, burst, key, mode, max_delay, status)`},
		{"server:\n  quota: {limits: [{rate: 1/s, mode: shape}]}\n", `t.yaml:2:38: server.quota.limits[0].mode: mode is the leaky bucket's; this limit is token-bucket`},
		{"server:\n  quota: {rate: 1/s, mode: shape}\n", `t.yaml:2:28: server.quota.mode: mode is the leaky bucket's; this limit is token-bucket`},
		{"server:\n  quota: {limits: [{rate: 1/s, algorithm: leaky-bucket, mode: drip}]}\n", `t.yaml:2:63: server.quota.limits[0].mode: want one of meter, shape, got "drip"`},
		{"server:\n  quota: {limits: [{rate: 1/s, algorithm: leaky-bucket, max_delay: 1s}]}\n", `t.yaml:2:68: server.quota.limits[0].max_delay: max_delay bounds a shaper's hold; set mode: shape`},
		{"server:\n  quota: {limits: [{rate: 1/s, algorithm: leaky-bucket, mode: shape, max_delay: -1s}]}\n", `t.yaml:2:81: server.quota.limits[0].max_delay: negative duration "-1s"`},
		{"server:\n  quota: {limits: [{rate: 1/s, status: 404}]}\n", `t.yaml:2:40: server.quota.limits[0].status: a limit answers 429, 403 or 503, not 404`},
		{"server:\n  quota: {limits: [{rate: 1/s, status: 700}]}\n", `t.yaml:2:40: server.quota.limits[0].status: 700 is out of range [100, 599]`},
		{"server:\n  quota: {limits: [{rate: 1/s}, {rate: 2/s}]}\n", `t.yaml:2:33: server.quota.limits[1].name: limits[0] and limits[1] are both named "second"; name them`},
		{"server:\n  quota: {limits: [{name: a/b, rate: 1/s}]}\n", `t.yaml:2:27: server.quota.limits[0].name: limit name "a/b" holds a '/', '"', '\' or NUL`},
		{"server:\n  quota: {limits: [{rate: 70000/s, algorithm: sliding-window-log}]}\n", `t.yaml:2:27: server.quota.limits[0].rate: a sliding-window-log keeps one timestamp per request: at most 65536 per window, got 70000`},
		{"server:\n  quota: {limits: [{rate: 1/s}], tiers: [{name: a, limits: [{rate: 1/s}]}]}\n", `t.yaml:2:19: server.quota.limits: limits and tiers both set; with tiers, each tier has its own limits`},
		{"server:\n  quota:\n    tiers:\n      - {name: a, keys: [a-*], default: true, limits: [{rate: 1/s}]}\n      - {name: b, keys: [b-*], default: true, limits: [{rate: 1/s}]}\n",
			`t.yaml:5:41: server.quota.tiers[1].default: tier "b" is default, and so is tier "a"; at most one may be`},
		{"server:\n  quota:\n    tiers:\n      - {name: a, anonymous: true, limits: [{rate: 1/s}]}\n      - {name: b, anonymous: true, limits: [{rate: 1/s}]}\n",
			`t.yaml:5:30: server.quota.tiers[1].anonymous: tier "b" is anonymous, and so is tier "a"; at most one may be`},
		{"server:\n  quota: {tiers: [{name: a, limits: [{rate: 1/s}], default: yes}]}\n", `t.yaml:2:61: server.quota.tiers[0].default: want true or false, got "yes"`},
		{"server:\n  quota: {tiers: [{name: a, keys: [\"x*y\"], limits: [{rate: 1/s}]}]}\n", `t.yaml:2:36: server.quota.tiers[0].keys[0]: key "x*y": "*" may only end a prefix`},
		{"server:\n  quota: {tiers: [{name: a, keys: [k], limits: [{rate: 1/s}]}, {name: b, keys: [k], limits: [{rate: 1/s}]}]}\n",
			`t.yaml:2:81: server.quota.tiers[1].keys[0]: key "k" already in tier "a"`},
		{"server:\n  quota: {tiers: [{name: a, keys: [[k]], limits: [{rate: 1/s}]}]}\n", `t.yaml:2:36: server.quota.tiers[0].keys[0]: want an API key or a prefix ending in *, got a sequence`},
		{"server:\n  quota: {tiers: [{keys: [k], limits: [{rate: 1/s}]}]}\n", `t.yaml:2:19: server.quota.tiers[0].name: a tier needs a name`},
		{"server:\n  quota: {tiers: [{name: a}]}\n", `t.yaml:2:19: server.quota.tiers[0].limits: tier "a" has no limits`},
		{"server:\n  quota: {tiers: [{name: a, limits: [{rate: 1/fortnight}]}]}\n", `t.yaml:2:45: server.quota.tiers[0].limits[0].rate: bad rate "1/fortnight": interval "fortnight" is not a duration (want e.g. 100/s, 100/1m, 5/100ms)`},
		{"server:\n  quota: {tiers: [{name: a, plan: pro, limits: [{rate: 1/s}]}]}\n", `t.yaml:2:29: server.quota.tiers[0].plan: unknown key "plan" (want one of name, keys, limits, default, anonymous)`},
		{"server:\n  quota:\n    limits: [{rate: 10/s, burst: 4}]\n    costs: [{method: POST, path: /search, cost: 5}]\n",
			`t.yaml:4:49: server.quota.costs[0].cost: cost 5 exceeds limit "default"'s capacity of 4: such requests could never be allowed`},
		{"server:\n  quota:\n    limits: [{rate: 10/s}]\n    costs: [{path: \"/[\", cost: 1}]\n", `t.yaml:4:20: server.quota.costs[0].path: bad path pattern "/[": syntax error in pattern`},
		{"server:\n  quota:\n    limits: [{rate: 10/s}]\n    costs: [{path: search, cost: 1}]\n",
			`t.yaml:4:20: server.quota.costs[0].path: want a path pattern below /c/{client}/r/{n}, starting with / (e.g. /search, /items/*), got "search"`},
		{"server:\n  quota:\n    limits: [{rate: 10/s}]\n    costs: [{method: POST}]\n", `t.yaml:4:13: server.quota.costs[0]: a cost needs cost: N (the units each matching request spends)`},
		{"server:\n  quota:\n    limits: [{rate: 10/s}]\n    costs: [{method: post, cost: 1}]\n", `t.yaml:4:22: server.quota.costs[0].method: want an upper-case HTTP method like GET or POST, got "post"`},
		{"server:\n  quota:\n    limits: [{rate: 10/s}]\n    costs: [{cost: 0}]\n", `t.yaml:4:20: server.quota.costs[0].cost: 0 is out of range [1, 1000000000]`},
		{"server:\n  quota: {rate: 1/s, backend: mysql://x}\n", `t.yaml:2:31: server.quota.backend: unknown backend "mysql://x" (want memory or a redis://HOST:PORT/DB URL)`},
		{"server:\n  quota: {rate: 1/s, on_error: maybe}\n", `t.yaml:2:32: server.quota.on_error: want one of closed, open, got "maybe"`},
		// respond: {status: N, rate_limit: true}
		{"server:\n  phases:\n    - respond: {status: 200, rate_limit: true}\n", `t.yaml:3:42: server.phases[0].respond.rate_limit: status 200 is not an error; a rate limit answers 4xx or 5xx`},
		{"server:\n  phases:\n    - respond: {rate_limit: true}\n", `t.yaml:3:17: server.phases[0].respond.rate_limit: rate_limit marks a {status: N} answer as a rate limit: add status (e.g. {status: 403, rate_limit: true})`},
		{"server:\n  phases:\n    - respond: {fault: reset, rate_limit: true}\n", `t.yaml:3:31: server.phases[0].respond.rate_limit: rate_limit goes with {status: N} only`},
		{"server:\n  phases:\n    - respond: {status: 403, rate_limit: 1}\n", `t.yaml:3:42: server.phases[0].respond.rate_limit: want true or false, got "1"`},
		// fleet.api_keys
		{"fleet:\n  api_keys: [{prefix: free-, share: 2}, {prefix: free-x}]\n", `t.yaml:2:50: fleet.api_keys[1].prefix: prefix "free-x" and prefix "free-" of fleet.api_keys[0] could make the same key; make neither begin the other`},
		{"fleet:\n  api_keys: [{prefix: \"a b\"}]\n", `t.yaml:2:23: fleet.api_keys[0].prefix: want a key prefix of 1-64 letters, digits or -._~+/, got "a b"`},
		{"fleet:\n  api_keys: [{share: 2}]\n", `t.yaml:2:14: fleet.api_keys[0]: a key group needs a prefix (e.g. prefix: free-)`},
		{"fleet:\n  api_keys: [{prefix: a-, share: 0}]\n", `t.yaml:2:34: fleet.api_keys[0].share: 0 is out of range [1, 1000000]`},
		{"fleet:\n  api_keys: [{prefix: a-, key: x}]\n", `t.yaml:2:27: fleet.api_keys[0].key: unknown key "key" (want one of prefix, share)`},
		{"fleet:\n  api_keys: []\n", `t.yaml:2:13: fleet.api_keys: want at least one {prefix: P}, or leave api_keys out`},
		{"fleet:\n  clients: 0\n", `t.yaml:2:12: fleet.clients: 0 is out of range [1, 1000000]`},
		{"fleet:\n  clients: many\n", `t.yaml:2:12: fleet.clients: want an integer, got "many"`},
		{"fleet:\n  clients: 2.5\n", `t.yaml:2:12: fleet.clients: want an integer, got "2.5"`},
		{"fleet:\n  start: ramp\n", `t.yaml:2:10: fleet.start: ramp needs a duration (e.g. ramp 10s)`},
		{"fleet:\n  start: ramp -3s\n", `t.yaml:2:10: fleet.start: ramp duration -3s is out of range (0, 24h0m0s]`},
		{"fleet:\n  start: poisson fast\n", `t.yaml:2:10: fleet.start: poisson: bad rate "fast" (want e.g. 100/s, 100/1m, 5/100ms)`},
		{"fleet:\n  start: gradual\n", `t.yaml:2:10: fleet.start: bad start "gradual" (want burst, ramp DURATION or poisson RATE)`},
		{"fleet:\n  method: post\n", `t.yaml:2:11: fleet.method: want an upper-case HTTP method like GET or POST, got "post"`},
		{"fleet:\n  timeout: 0s\n", `t.yaml:2:12: fleet.timeout: duration 0s is out of range [1ns, 24h0m0s]`},
		{"fleet:\n  processes: 0\n", `t.yaml:2:14: fleet.processes: 0 is out of range [1, 1000000]`},
		{"fleet:\n  attempt_timeout: -1s\n", `t.yaml:2:20: fleet.attempt_timeout: negative duration "-1s"`},
		{"subject:\n  policy: {jitter: lots}\n", `t.yaml:2:20: subject.policy.jitter: want one of full, equal, decorrelated, got "lots"`},
		{"subject:\n  policy: {base: 1s, cap: 100ms}\n", `t.yaml:2:27: subject.policy.cap: cap 100ms is below base 1s`},
		{"subject:\n  policy: {max_attempts: -1}\n", `t.yaml:2:26: subject.policy.max_attempts: -1 is out of range [0, 1000000]`},
		{"subject:\n  name: a/b\n", `t.yaml:2:9: subject.name: unknown subject "a/b" (known: ` + strings.Join(subjects.Names(), ", ") + `, exec:COMMAND)`},
		{"expect:\n  checks: [waves, wavez]\n", `t.yaml:2:19: expect.checks[1]: want one of retry-after, instant-retry, waves, non-retryable, idempotency, attempts, budget, give-up, amplification, pacing, jitter-bounds, recovery, load-amplification, wasted-work, got "wavez"`},
		{"expect:\n  checks: [waves]\n  skip: [waves]\n", `t.yaml:3:9: expect.skip: check "waves" is both in checks and in skip`},
		{"expect:\n  skip: [waves]\n  require: [waves]\n", `t.yaml:3:12: expect.require: check "waves" is both required and skipped`},
		{"expect:\n  require: [wavez]\n", `t.yaml:2:13: expect.require[0]: want one of retry-after, instant-retry, waves, non-retryable, idempotency, attempts, budget, give-up, amplification, pacing, jitter-bounds, recovery, load-amplification, wasted-work, got "wavez"`},
		{"expect:\n  thresholds: {amplification: -1}\n", `t.yaml:2:31: expect.thresholds.amplification: -1 is out of range [0, 1e+12]`},
		{"expect:\n  thresholds: {speed: 1}\n", `t.yaml:2:16: expect.thresholds.speed: unknown check "speed" (want one of retry-after, instant-retry, waves, non-retryable, idempotency, attempts, budget, give-up, amplification, pacing, jitter-bounds, recovery, load-amplification, wasted-work, optionally .PARAM)`},
		{"expect:\n  thresholds: {waves.bogus: 3}\n", `t.yaml:2:16: expect.thresholds.waves.bogus: unknown parameter "bogus" of check waves (want one of threshold, min_clients, min_samples, slack, window)`},
		{"expect:\n  thresholds: {waves.threshold.x: 3}\n", `t.yaml:2:16: expect.thresholds.waves.threshold.x: unknown parameter "threshold.x" of check waves (want one of threshold, min_clients, min_samples, slack, window)`},
		{"expect:\n  thresholds: {idempotency.window: 1}\n", `t.yaml:2:16: expect.thresholds.idempotency.window: unknown parameter "window" of check idempotency (want one of threshold)`},
		{"expect:\n  thresholds: {wavez.threshold: 1}\n", `t.yaml:2:16: expect.thresholds.wavez.threshold: unknown check "wavez.threshold" (want one of retry-after, instant-retry, waves, non-retryable, idempotency, attempts, budget, give-up, amplification, pacing, jitter-bounds, recovery, load-amplification, wasted-work, optionally .PARAM)`},
		{"expect:\n  thresholds: {waves: 10ms}\n", `t.yaml:2:23: expect.thresholds.waves: want a number, got "10ms"`},
		{"expect:\n  thresholds: {waves.min_samples: many}\n", `t.yaml:2:35: expect.thresholds.waves.min_samples: want a number, got "many"`},
		{"expect:\n  thresholds: {waves.window: soon}\n", `t.yaml:2:30: expect.thresholds.waves.window: want a duration such as 10ms, or seconds, got "soon"`},
		{"expect:\n  thresholds: {waves.window: -1}\n", `t.yaml:2:30: expect.thresholds.waves.window: -1 is out of range [0, 1e+12]`},
		{"expect:\n  thresholds: {waves.window: [1]}\n", `t.yaml:2:30: expect.thresholds.waves.window: want a duration, got a sequence`},
		{"expect:\n  thresholds: {non-retryable.statuses: 400|404}\n", `t.yaml:2:40: expect.thresholds.non-retryable.statuses: want one HTTP status like 404, got "400|404"`},
		{"expect:\n  thresholds: {non-retryable.statuses: 4040}\n", `t.yaml:2:40: expect.thresholds.non-retryable.statuses: "4040" is not an HTTP status`},
		{"name: a b\n", `t.yaml:1:7: name: "a b" is not a usable name (letters, digits, '.', '_', '-')`},
		{"name: x\nname: y\n", `t.yaml:2:1: mapping key "name" already defined at [1:1]`},
		{"- a\n", `t.yaml:1:1: want a mapping, got a sequence`},
		{"", `t.yaml: empty scenario`},
		{"name: a\n---\nname: b\n", `t.yaml:3:1: a scenario file holds one YAML document`},
		{"server: *nowhere\n", `t.yaml:1:9: server: unknown alias "nowhere"`},
		{"a: {b: 1}\nserver:\n  <<: {latency: 1s}\n", `t.yaml:1:1: a: unknown key "a" (want one of name, description, duration, server, fleet, subject, expect)`},
		{"name: \xff\n", `t.yaml: file is not valid UTF-8`},
		{"server:\n  capacity: {queue: 5, service: 1s}\n", `t.yaml:2:13: server.capacity: capacity needs concurrency: N (the workers serving at once)`},
		{"server:\n  capacity: {concurrency: 5}\n", `t.yaml:2:13: server.capacity: capacity needs service: DURATION (the mean service time, e.g. 20ms)`},
		{"server:\n  capacity: {concurrency: 0, service: 1s}\n", `t.yaml:2:27: server.capacity.concurrency: 0 is out of range [1, 1048576]`},
		{"server:\n  capacity: {concurrency: 1, queue: -1, service: 1s}\n", `t.yaml:2:37: server.capacity.queue: -1 is out of range [0, 1048576]`},
		{"server:\n  capacity: {concurrency: 1, service: 0}\n", `t.yaml:2:39: server.capacity.service: duration 0s is out of range [1ns, 24h0m0s]`},
		{"server:\n  capacity: {concurrency: 1, service: 1s, dist: pareto}\n", `t.yaml:2:49: server.capacity.dist: want one of fixed, exponential, uniform, got "pareto"`},
		{"server:\n  capacity: {concurrency: 1, service: 1s, discipline: random}\n", `t.yaml:2:55: server.capacity.discipline: want one of fifo, lifo, got "random"`},
		{"server:\n  capacity: {concurrency: 1, service: 1s, cancel_on_disconnect: yes}\n", `t.yaml:2:65: server.capacity.cancel_on_disconnect: want true or false, got "yes"`},
		{"server:\n  capacity: {concurrency: 1, service: 1s, workers: 2}\n", `t.yaml:2:43: server.capacity.workers: unknown key "workers" (want one of concurrency, queue, service, dist, discipline, cancel_on_disconnect)`},
		{"server:\n  capacity: 5\n", `t.yaml:2:13: server.capacity: want a mapping, got an integer`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  phases:\n    - {capacity: 130%}\n", `t.yaml:4:18: server.phases[0].capacity: want a share of the workers like 30% or 0.3, in (0, 1]: "130%" is outside (0, 1]`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  phases:\n    - {capacity: 0}\n", `t.yaml:4:18: server.phases[0].capacity: want a share of the workers like 30% or 0.3, in (0, 1]: "0" is outside (0, 1]`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  phases:\n    - {capacity: lots}\n", `t.yaml:4:18: server.phases[0].capacity: want a share of the workers like 30% or 0.3, in (0, 1]: "lots" is not a number or a percentage`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  phases:\n    - {capacity: true}\n", `t.yaml:4:18: server.phases[0].capacity: want a share of the workers like 30% or 0.3, in (0, 1], got a boolean`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  phases:\n    - {capacity: .nan}\n", `t.yaml:4:18: server.phases[0].capacity: want a share of the workers like 30% or 0.3, in (0, 1]: ".nan" is not a number or a percentage`},
		{"server:\n  phases:\n    - {capacity: 30%}\n", `t.yaml:3:18: server.phases[0].capacity: a phase's capacity scales the server's; set server capacity: {concurrency: N, ...}`},
		{"server:\n  upstream: http://127.0.0.1:9\n  capacity: {concurrency: 1, service: 1s}\n", `t.yaml:3:13: server.capacity: capacity models the stub's own work, and with an upstream the upstream does it; set capacity or upstream, not both`},
		{"server:\n  capacity: {concurrency: 1, service: 1s}\n  quota: {name: capacity, rate: 1/s}\n", `t.yaml:3:17: server.quota.name: the name "capacity" is the capacity model's, which records its rejections under it; rename the limit`},
	}
	for _, tt := range tests {
		_, err := Parse("t.yaml", []byte(tt.yaml))
		if err == nil {
			t.Errorf("Parse(%q) = nil error; want %q", tt.yaml, tt.want)
			continue
		}
		if got, _, _ := strings.Cut(err.Error(), "\n"); got != tt.want {
			t.Errorf("Parse(%q) error = %q; want %q", tt.yaml, got, tt.want)
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error %T is not a *SyntaxError", tt.yaml, err)
		}
	}
}

func TestParseReportsEveryProblemInOrder(t *testing.T) {
	src := "fleet:\n  clients: 0\nduration: -1s\nbogus: 1\n"
	_, err := Parse("t.yaml", []byte(src))
	if err == nil {
		t.Fatal("Parse = nil error; want three problems")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"t.yaml:2:12: fleet.clients", "t.yaml:3:11: duration", "t.yaml:4:1: bogus"}
	if len(lines) != len(want) {
		t.Fatalf("Parse error has %d lines; want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("error line %d = %q; want prefix %q", i, lines[i], want[i])
		}
	}
}

func TestParseServer(t *testing.T) {
	cfg, err := ParseServer("s.yaml", []byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Phases) != 2 || cfg.Phases[0].Name != "outage" || cfg.Quota == nil {
		t.Errorf("ParseServer(design example) = %+v; want its two phases and quota", cfg)
	}
	// Only the server section is read: a bad fleet does not matter, an
	// unknown top-level key does.
	if _, err := ParseServer("s.yaml", []byte("fleet: {clients: -1}\nserver: {latency: 1ms}\n")); err != nil {
		t.Errorf("ParseServer(bad fleet) = %v; want nil", err)
	}
	_, err = ParseServer("s.yaml", []byte("server: {latency: 1ms}\nservr: {}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "s.yaml:2:1: servr: unknown key") {
		t.Errorf("ParseServer(unknown key) = %v; want s.yaml:2:1: servr: unknown key ...", err)
	}
	_, err = ParseServer("s.yaml", []byte("server:\n  phases:\n    - for: 1h1s\n      latency: -1ms\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "s.yaml:4:16: server.phases[0].latency: negative duration") {
		t.Errorf("ParseServer(negative latency) = %v; want s.yaml:4:16: ...", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ci.yaml")
	if err := os.WriteFile(path, []byte("duration: 1x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":1:11: duration:") {
		t.Errorf("Load(bad file) = %v; want %s:1:11: duration: ...", err, path)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v; want os.ErrNotExist", err)
	}
	big := make([]byte, MaxFileSize+10)
	for i := range big {
		big[i] = '#'
	}
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(huge file) = %v; want a size error", err)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in    string
		count float64
		per   time.Duration
		err   bool
	}{
		{"100/s", 100, time.Second, false},
		{"100/1s", 100, time.Second, false},
		{"100/1m", 100, time.Minute, false},
		{"100/m", 100, time.Minute, false},
		{"5/100ms", 5, 100 * time.Millisecond, false},
		{"0.5/s", 0.5, time.Second, false},
		{" 7 / h ", 7, time.Hour, false},
		{"50", 50, time.Second, false},
		{"100/", 0, 0, true},
		{"/s", 0, 0, true},
		{"-1/s", 0, 0, true},
		{"1/0s", 0, 0, true},
		{"1/-1s", 0, 0, true},
		{"NaN/s", 0, 0, true},
		{"Inf/s", 0, 0, true},
		{"1e10/1ns", 0, 0, true},
		{"10000/1d", 10000, 24 * time.Hour, false},
		{"1/d", 1, 24 * time.Hour, false},
		{"7/0.5d", 7, 12 * time.Hour, false},
		{"1/xd", 0, 0, true},
		{"1/-1d", 0, 0, true},
		{"1/1e9d", 0, 0, true},
	}
	for _, tt := range tests {
		count, per, err := parseRate(tt.in)
		if (err != nil) != tt.err || count != tt.count || per != tt.per {
			t.Errorf("parseRate(%q) = %v, %v, %v; want %v, %v, error %v", tt.in, count, per, err, tt.count, tt.per, tt.err)
		}
	}
}

// quotaExample uses every key of a layered, tiered quota, a rate-limit
// status phase and the fleet's API keys.
const quotaExample = `
server:
  headers: x-ratelimit
  quota:
    tiers:
      - name: free
        keys: ["free-*", trial]
        default: true
        limits:
          - {name: second, rate: 5/s, burst: 5, key: api-key}
          - {rate: 100/1m, algorithm: sliding-window-log, key: api-key, status: 403}
      - name: paid
        keys: ["paid-*"]
        limits:
          - {rate: 50/s, algorithm: leaky-bucket, mode: shape, max_delay: 250ms, burst: 10, key: api-key}
          - {name: day, rate: 100000/1d, algorithm: fixed-window}
          - {name: ten, rate: 300/10s, algorithm: sliding-window, key: endpoint, status: 503}
      - {name: anon, anonymous: true, limits: [{rate: 5/s}]}
    costs: [{method: POST, path: /search, cost: 3}, {path: "/bulk/*", cost: 2}]
    backend: memory
    on_error: open
  phases:
    - {name: gh, for: 1s, respond: {status: 403, rate_limit: true}, retry_after: {form: delta, value: 1}}
    - {respond: quota, retry_after: {form: delta, value: limiter}}
fleet:
  api_keys: [{prefix: free-, share: 3}, {prefix: paid-}]
`

func TestFleetAPIKey(t *testing.T) {
	f := Fleet{APIKeys: []KeyGroup{{Prefix: "free-", Share: 3}, {Prefix: "paid-", Share: 1}}}
	want := []string{"free-0", "free-1", "free-2", "paid-3", "free-4", "free-5", "free-6", "paid-7"}
	for id, w := range want {
		if got := f.APIKey(id); got != w {
			t.Errorf("APIKey(%d) = %q; want %q", id, got, w)
		}
	}
	if got := (&Fleet{}).APIKey(3); got != "" {
		t.Errorf("APIKey without api_keys = %q; want none", got)
	}
}

// TestJSONRoundTrip: the JSON kept in the timeline's meta parses back into
// the same scenario.
func TestJSONRoundTrip(t *testing.T) {
	srcs := []string{designExample, "{}", quotaExample, "server: {quota: {limits: [{rate: 1/s}]}}", `
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
`, `
server:
  capacity: {concurrency: 50, queue: 100, service: 20ms, dist: exponential, discipline: lifo, cancel_on_disconnect: true}
  phases:
    - {name: warm, for: 5s}
    - {name: trigger, for: 5s, capacity: 30%}
    - {name: third, for: 1s, capacity: 33.3%}
    - {name: after, capacity: 1}
`, "server: {capacity: {concurrency: 3, service: 1ms}}"}
	for _, src := range srcs {
		checkRoundTrip(t, []byte(src))
	}
}

func checkRoundTrip(t *testing.T, src []byte) {
	t.Helper()
	sc, err := Parse("t.yaml", src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	j, err := json.Marshal(sc)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := Parse("t.yaml", j)
	if err != nil {
		t.Fatalf("Parse(Marshal(Parse(%q))) = %v\njson: %s", src, err, j)
	}
	back.Source, sc.Source = nil, nil
	if !reflect.DeepEqual(back, sc) {
		t.Errorf("round trip of %q:\n got %+v\nwant %+v\njson: %s", src, back, sc, j)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(designExample))
	f.Add([]byte(quotaExample))
	f.Add([]byte("server: {quota: {limits: [{name: s, rate: 10/s, burst: 20}, {rate: 300/1m, algorithm: sliding-window}], costs: [{method: POST, cost: 2}]}}"))
	f.Add([]byte("server: {quota: {rate: 1/s, algorithm: leaky-bucket, mode: shape, max_delay: 1s, status: 403}, phases: [{respond: {status: 403, rate_limit: true}}]}"))
	f.Add([]byte("server: {phases: [{for: 1s, respond: {mix: {200: 1, reset: 1}}}, {respond: {fault: hang}}]}"))
	f.Add([]byte("server: {upstream: http://127.0.0.1:9000/api, phases: [{for: 1s, respond: {mix: {passthrough: 90, 503: 10}}}, {respond: passthrough}]}"))
	f.Add([]byte("server: {phases: [{respond: {mix: {passthrough: 1}}}]}"))
	f.Add([]byte("fleet: {start: poisson 5/100ms, clients: 3}\nexpect: {checks: [waves]}"))
	f.Add([]byte("server:\n  phases:\n    - &x {for: 2s}\n    - *x\n"))
	f.Add([]byte("duration: -1s\nbogus: [1, {a: b}]\n"))
	f.Add([]byte("server: {capacity: {concurrency: 50, queue: 100, service: 20ms, dist: uniform, discipline: lifo, cancel_on_disconnect: true}, phases: [{for: 5s, capacity: 30%}, {capacity: 0.5}]}"))
	for _, b := range builtinSources() {
		f.Add(b)
	}
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

// TestAttemptTimeout: fleet.attempt_timeout reaches every subject's
// Params, and is the policy's timeout when the policy states none.
func TestAttemptTimeout(t *testing.T) {
	for _, tt := range []struct {
		yaml         string
		attempt, pol time.Duration
	}{
		{"fleet: {attempt_timeout: 30ms}\n", 30 * time.Millisecond, 30 * time.Millisecond},
		{"fleet: {attempt_timeout: 30ms}\nsubject: {policy: {timeout: 1s}}\n", 30 * time.Millisecond, time.Second},
		{"subject: {policy: {timeout: 1s}}\n", 0, time.Second},
	} {
		sc, err := Parse("t.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		p := sc.SubjectParams(3, nil, false)
		if p.AttemptTimeout != tt.attempt || p.Policy.Timeout != tt.pol || p.Client != 3 {
			t.Errorf("%q: Params attempt timeout %v, policy timeout %v, client %d; want %v, %v, 3", tt.yaml, p.AttemptTimeout, p.Policy.Timeout, p.Client, tt.attempt, tt.pol)
		}
	}
}

// TestOneErrorPerCause: a value of the wrong shape where a mapping goes
// is one error, at its place, not followed by the keys it then lacks
// (a list-shaped mix, quota, capacity, limit or key group); a list-shaped
// mix says the shape that works.
func TestOneErrorPerCause(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"server:\n  phases:\n    - respond: {mix: [200, 500]}\n",
			`t.yaml:3:22: server.phases[0].respond.mix: want a mapping of statuses or faults to weights, like {200: 90, 500: 10}, got a sequence`},
		{"server:\n  phases:\n    - respond:\n        mix:\n          - 200: 90\n          - 500: 10\n",
			`t.yaml:5:11: server.phases[0].respond.mix: want a mapping of statuses or faults to weights, like {200: 90, 500: 10}, got a sequence`},
		{"server:\n  phases:\n    - respond: {mix: 5}\n", `t.yaml:3:22: server.phases[0].respond.mix: want a mapping, got an integer`},
		{"server:\n  quota: [1]\n", `t.yaml:2:10: server.quota: want a mapping, got a sequence`},
		{"server:\n  capacity: [1]\n", `t.yaml:2:13: server.capacity: want a mapping, got a sequence`},
		{"server:\n  quota: {limits: [1]}\n", `t.yaml:2:20: server.quota.limits[0]: want a mapping, got an integer`},
		{"fleet:\n  api_keys: [1]\n", `t.yaml:2:14: fleet.api_keys[0]: want a mapping, got an integer`},
	}
	for _, tt := range tests {
		_, err := Parse("t.yaml", []byte(tt.yaml))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) = %v; want the one error %q", tt.yaml, err, tt.want)
		}
	}
	// A mapping that is one, but empty, still lacks its keys.
	if _, err := Parse("t.yaml", []byte("server:\n  phases:\n    - respond: {mix: {}}\n")); err == nil || !strings.Contains(err.Error(), "mix needs at least one status or fault") {
		t.Errorf("an empty mix: %v; want mix needs at least one status or fault", err)
	}
	if _, err := Parse("t.yaml", []byte("server:\n  capacity: {queue: 3}\n")); err == nil || !strings.Contains(err.Error(), "capacity needs concurrency") {
		t.Errorf("a capacity without concurrency: %v; want capacity needs concurrency", err)
	}
}
