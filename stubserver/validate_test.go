package stubserver

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	okPhase := Phase{Name: "a", For: time.Second}
	tests := []struct {
		name string
		cfg  Config
		want []string // each a substring of one error, in order; nil: valid
	}{
		{"zero", Config{}, nil},
		{"full", Config{
			Latency: time.Millisecond, Headers: HeadersIETF,
			Quota: &Quota{Limits: []Limit{{Algorithm: AlgSlidingWindow, Limit: 100, Per: time.Second, Key: KeyAPIKey}}},
			Phases: []Phase{
				{For: time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}, RetryAfter: RetryAfter{Form: FormDate, Value: ValuePhaseEnd}},
				{For: time.Second, Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Status: 200, Weight: 1}, {Fault: FaultReset, Weight: 0.5}}}},
				{Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter, Spread: time.Second}},
			},
		}, nil},
		{"negative latency", Config{Latency: -1}, []string{"stubserver: latency: negative duration"}},
		{"unknown headers", Config{Headers: "ietf2"}, []string{`headers: unknown header family "ietf2" (want none, ietf, x-ratelimit)`}},
		{"quota", Config{Quota: &Quota{Limits: []Limit{{Algorithm: "leaky", Limit: 0, Per: -time.Second, Burst: -1, Key: "ip"}}}}, []string{
			`quota.limits[0].algorithm: unknown algorithm "leaky"`, "quota.limits[0].rate: limit must be a positive number, got 0",
			"quota.limits[0].rate: negative window", "quota.limits[0].burst: negative burst -1", `quota.limits[0].key: unknown key "ip"`}},
		{"quota NaN", Config{Quota: &Quota{Limits: []Limit{{Limit: math.NaN()}}}}, []string{"quota.limits[0].rate: limit must be a positive number"}},
		{"window below 1", Config{Quota: &Quota{Limits: []Limit{{Algorithm: AlgFixedWindow, Limit: 0.5}}}}, []string{"quota.limits[0].rate: a fixed-window limit needs at least 1"}},
		{"bucket below 1 is fine", Config{Quota: &Quota{Limits: []Limit{{Limit: 0.5}}}}, nil},
		{"for", Config{Phases: []Phase{{For: -1}, {Name: "b"}, {}}}, []string{
			"phases[0].for: negative duration", "phases[1].for: missing or zero"}},
		{"last may be 0", Config{Phases: []Phase{okPhase, {}}}, nil},
		{"phase latency", Config{Phases: []Phase{{Latency: -time.Second}}}, []string{"phases[0].latency: negative duration"}},
		{"spread of whole-second forms", Config{Phases: []Phase{
			{For: time.Second, RetryAfter: RetryAfter{Form: FormDelta, Spread: 500 * time.Millisecond}},
			{For: time.Second, RetryAfter: RetryAfter{Form: FormDate, Spread: 2500 * time.Millisecond}},
			{For: time.Second, RetryAfter: RetryAfter{Form: FormFractional, Spread: 500 * time.Millisecond}},
			{RetryAfter: RetryAfter{Form: FormDelta, Spread: 2 * time.Second}},
		}}, []string{
			"phases[0].retry_after.spread: spread 500ms is not whole seconds: form delta", "phases[1].retry_after.spread: spread 2.5s is not whole seconds: form date"}},
		{"passthrough", Config{Upstream: "https://api.example.com/base", Phases: []Phase{okPhase, {Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Passthrough: true, Weight: 9}, {Status: 503, Weight: 1}}}}}}, nil},
		{"passthrough without an upstream", Config{Phases: []Phase{okPhase, {Respond: Respond{Kind: RespondPassthrough}}}}, []string{
			"phases[1].respond: passthrough needs an upstream (server.upstream, or serve --upstream)"}},
		{"mix passthrough without an upstream", Config{Phases: []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Passthrough: true, Weight: 1}, {Passthrough: true, Status: 503, Weight: 1}}}}}}, []string{
			"phases[0].respond.mix[0]: passthrough needs an upstream", `phases[0].respond.mix[1]: passthrough with status 503 or fault ""; want one`}},
		{"upstream scheme", Config{Upstream: "ftp://x"}, []string{`upstream: "ftp://x" is not an http or https URL`}},
		{"upstream host", Config{Upstream: "http://"}, []string{`upstream: "http://" has no host`}},
		{"upstream user info", Config{Upstream: "http://u:secret@x"}, []string{`upstream: "http://u:xxxxx@x" carries user info`}},
		{"upstream query", Config{Upstream: "http://x/?a=1"}, []string{`upstream: "http://x/?a=1" has a query or fragment`}},
		{"upstream unparsable", Config{Upstream: "http://x:port"}, []string{`upstream: parse "http://x:port": invalid port`}},
		{"respond kind", Config{Phases: []Phase{{Respond: Respond{Kind: "teapot"}}}}, []string{`phases[0].respond: unknown behaviour "teapot"`}},
		{"quota without quota", Config{Phases: []Phase{{Respond: Respond{Kind: RespondQuota}}}}, []string{"phases[0].respond: quota needs a server quota"}},
		{"status range", Config{Phases: []Phase{okPhase, {Respond: Respond{Kind: RespondStatus, Status: 600}}}}, []string{"phases[1].respond.status: status 600 outside 200-599"}},
		{"status 1xx", Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus, Status: 101}}}}, []string{"phases[0].respond.status: status 101"}},
		{"status missing", Config{Phases: []Phase{{Respond: Respond{Kind: RespondStatus}}}}, []string{"phases[0].respond.status: status 0"}},
		{"mix empty", Config{Phases: []Phase{{Respond: Respond{Kind: RespondMix}}}}, []string{"phases[0].respond.mix: empty mix"}},
		{"mix entries", Config{Phases: []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{
			{Status: 200, Weight: 0}, {Status: 99, Weight: 1}, {Fault: "boom", Weight: 1}, {Status: 500, Fault: FaultHang, Weight: 1}, {Status: 200, Weight: math.Inf(1)},
		}}}}}, []string{
			"phases[0].respond.mix[0].weight: weight must be a positive number, got 0",
			"phases[0].respond.mix[1].status: status 99",
			`phases[0].respond.mix[2].fault: unknown fault "boom"`,
			`phases[0].respond.mix[3]: both status 500 and fault "hang"`,
			"phases[0].respond.mix[4].weight: weight must be a positive number, got +Inf"}},
		{"fault", Config{Phases: []Phase{{Respond: Respond{Kind: RespondFault}}}}, []string{`phases[0].respond.fault: unknown fault ""`}},
		{"form", Config{Phases: []Phase{okPhase, {RetryAfter: RetryAfter{Form: "dat"}}}}, []string{
			`phases[1].retry_after.form: unknown form "dat" (want none, delta, date, negative, garbage, past-date, fractional, huge)`}},
		{"grpc", Config{Protocol: ProtocolGRPC, Phases: []Phase{{For: time.Second, RetryAfter: RetryAfter{Form: FormPushback}}, {RetryAfter: RetryAfter{Form: FormRetryInfo}}}}, nil},
		{"grpc form on http", Config{Phases: []Phase{{RetryAfter: RetryAfter{Form: FormPushback}}}}, []string{
			"phases[0].retry_after.form: form pushback is gRPC's: it needs protocol grpc"}},
		{"http form on grpc", Config{Protocol: ProtocolGRPC, Phases: []Phase{{RetryAfter: RetryAfter{Form: FormDate}}}}, []string{
			"phases[0].retry_after.form: form date is an HTTP Retry-After; a gRPC stub sends none, pushback, pushback-negative, pushback-garbage, retry-info"}},
		{"grpc unknown form", Config{Protocol: ProtocolGRPC, Phases: []Phase{{RetryAfter: RetryAfter{Form: "push"}}}}, []string{
			`phases[0].retry_after.form: unknown form "push" (want none, pushback, pushback-negative, pushback-garbage, retry-info)`}},
		{"protocol", Config{Protocol: "h3"}, []string{`protocol: unknown protocol "h3" (want http, grpc)`}},
		{"proxy timeout on http", Config{ProxyTimeout: time.Second}, []string{"proxy_timeout: a proxy timeout needs protocol: grpc"}},
		{"negative proxy timeout", Config{Protocol: ProtocolGRPC, ProxyTimeout: -time.Second}, []string{"proxy_timeout: negative duration -1s"}},
		{"proxy timeout", Config{Protocol: ProtocolGRPC, ProxyTimeout: time.Second}, nil},
		{"grpc upstream", Config{Protocol: ProtocolGRPC, Upstream: "http://example.com"}, []string{"upstream: a gRPC stub has no upstream"}},
		{"value", Config{Phases: []Phase{{RetryAfter: RetryAfter{Form: FormDelta, Value: "later"}}}}, []string{`phases[0].retry_after.value: unknown value "later"`}},
		{"negative fixed", Config{Phases: []Phase{{RetryAfter: RetryAfter{Form: FormDelta, Fixed: -time.Second}}}}, []string{"phases[0].retry_after.value: negative duration"}},
		{"limiter outside quota", Config{Quota: &Quota{Limits: []Limit{{Limit: 1}}}, Phases: []Phase{{RetryAfter: RetryAfter{Value: ValueLimiter}}}}, []string{"phases[0].retry_after.value: limiter needs respond: quota"}},
		{"phase-end on last", Config{Phases: []Phase{okPhase, {RetryAfter: RetryAfter{Value: ValuePhaseEnd}}}}, []string{"phases[1].retry_after.value: phase-end on the last phase"}},
		{"spread", Config{Phases: []Phase{{RetryAfter: RetryAfter{Spread: -time.Second}}}}, []string{"phases[0].retry_after.spread: negative duration"}},
		{"capacity", Config{Capacity: &Capacity{Concurrency: 50, Queue: 100, Service: 20 * time.Millisecond, Dist: DistExponential, Discipline: DisciplineLIFO, CancelOnDisconnect: true},
			Phases: []Phase{{For: time.Second, Capacity: 0.3}, {Capacity: 1}}}, nil},
		{"capacity zero service", Config{Capacity: &Capacity{Concurrency: 1}}, nil},
		{"capacity values", Config{Capacity: &Capacity{Concurrency: 0, Queue: -1, Service: -1, Dist: "pareto", Discipline: "random"}}, []string{
			"capacity.concurrency: 0 workers; want 1 to 1048576", "capacity.queue: -1 places", "capacity.service: negative duration",
			`capacity.dist: unknown distribution "pareto" (want fixed, exponential, uniform)`, `capacity.discipline: unknown discipline "random" (want fifo, lifo)`}},
		{"capacity too many", Config{Capacity: &Capacity{Concurrency: MaxConcurrency + 1, Queue: MaxQueue + 1}}, []string{"capacity.concurrency: 1048577 workers", "capacity.queue: 1048577 places"}},
		{"phase share", Config{Capacity: &Capacity{Concurrency: 1}, Phases: []Phase{{For: time.Second, Capacity: 1.5}, {For: time.Second, Capacity: -0.1}, {Capacity: math.NaN()}}}, []string{
			"phases[0].capacity: share 1.5 outside (0, 1]", "phases[1].capacity: share -0.1 outside", "phases[2].capacity: share NaN outside"}},
		{"phase share without capacity", Config{Phases: []Phase{{Capacity: 0.3}}}, []string{"phases[0].capacity: a phase's capacity scales the server's"}},
		{"limit named capacity", Config{Capacity: &Capacity{Concurrency: 1}, Quota: &Quota{Limits: []Limit{{Name: "capacity", Limit: 1}}}}, []string{
			`quota.limits[0].name: the name "capacity" is the capacity model's`}},
		{"capacity with an upstream", Config{Capacity: &Capacity{Concurrency: 1}, Upstream: "http://127.0.0.1:1"}, []string{"capacity: capacity models the stub's own work"}},
		{"limit named capacity without capacity", Config{Quota: &Quota{Limits: []Limit{{Name: "capacity", Limit: 1}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil; want errors %q", tt.want)
			}
			var errs []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate() = %d errors:\n%v\nwant %d: %q", len(errs), err, len(tt.want), tt.want)
			}
			for i, e := range errs {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Errorf("error %d = %T; want *FieldError", i, e)
				}
				if !strings.Contains(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q; want it to contain %q", i, e, tt.want[i])
				}
			}
		})
	}
}

// TestLimitResolved: Resolved spells out the defaults the memory limiter
// applies, and keeps what is set.
func TestLimitResolved(t *testing.T) {
	for _, tt := range []struct{ in, want Limit }{
		{Limit{Limit: 10}, Limit{Algorithm: AlgTokenBucket, Limit: 10, Per: time.Second, Burst: 10, Key: KeyGlobal}},
		{Limit{Limit: 0.5}, Limit{Algorithm: AlgTokenBucket, Limit: 0.5, Per: time.Second, Burst: 1, Key: KeyGlobal}},
		{Limit{Algorithm: AlgLeakyBucket, Limit: 3, Per: time.Minute, Burst: 7, Key: KeyClient},
			Limit{Algorithm: AlgLeakyBucket, Limit: 3, Per: time.Minute, Burst: 7, Key: KeyClient, Mode: ModeMeter}},
		{Limit{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 3, Per: time.Minute},
			Limit{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 3, Per: time.Minute, Burst: 3, Key: KeyGlobal, MaxDelay: time.Minute}},
		{Limit{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 3, MaxDelay: time.Millisecond, Name: "n", Status: 403},
			Limit{Algorithm: AlgLeakyBucket, Mode: ModeShape, Limit: 3, Per: time.Second, Burst: 3, Key: KeyGlobal, MaxDelay: time.Millisecond, Name: "n", Status: 403}},
		// A window's burst is its whole limit, whatever was written.
		{Limit{Algorithm: AlgFixedWindow, Limit: 100, Per: time.Minute, Burst: 5},
			Limit{Algorithm: AlgFixedWindow, Limit: 100, Per: time.Minute, Burst: 100, Key: KeyGlobal}},
		{Limit{Algorithm: AlgSlidingWindowLog, Limit: 0.5, Per: time.Second},
			Limit{Algorithm: AlgSlidingWindowLog, Limit: 0.5, Per: time.Second, Burst: 1, Key: KeyGlobal}},
	} {
		if got := tt.in.Resolved(); got != tt.want {
			t.Errorf("%+v.Resolved() = %+v; want %+v", tt.in, got, tt.want)
		}
	}
}
