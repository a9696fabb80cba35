package scenarios

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuiltins(t *testing.T) {
	want := []string{"budget-trip", "flapping", "grpc-metastable", "grpc-metastable-open", "grpc-non-retryable", "grpc-outage", "grpc-pushback-refusal", "grpc-quota-pushback", "grpc-quota-retryinfo", "malformed-retry-after", "metastable", "metastable-open", "non-retryable", "outage-bare",
		"outage-date", "outage-delta", "post-idempotency", "quota-layered", "quota-steady", "quota-tiers", "slow-server"}
	if got := BuiltinNames(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("BuiltinNames() = %v; want %v", got, want)
	}
	for _, sc := range Builtins() {
		if sc.File != "builtin/"+sc.Name+".yaml" {
			t.Errorf("%s: File = %q; want builtin/%s.yaml", sc.Name, sc.File, sc.Name)
		}
		if len(sc.Description) < 40 || !strings.Contains(sc.Description, "Exposes") {
			t.Errorf("%s: description %q does not say which mistake it exposes", sc.Name, sc.Description)
		}
		// The cap bounds a run on a busy host; on a quiet one a run ends
		// when its fleet has (retrylabtest's assertHeadroom: within 1/1.35
		// of the cap).
		if sc.Duration > 30*time.Second {
			t.Errorf("%s: duration %v; want at most 30s so a default run ends within 30 s", sc.Name, sc.Duration)
		}
		if sc.Fleet.Timeout >= sc.Duration {
			t.Errorf("%s: fleet timeout %v is not below the duration %v: the watchdog could never fire", sc.Name, sc.Fleet.Timeout, sc.Duration)
		}
		if len(sc.Expect.Checks) == 0 {
			t.Errorf("%s: no expect.checks", sc.Name)
		}
	}
}

// TestBuiltinsMakeTheirChecksMeaningful pins the properties that make each
// built-in's checks bite.
func TestBuiltinsMakeTheirChecksMeaningful(t *testing.T) {
	get := func(name string) *Scenario {
		sc, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	if sc := get("outage-bare"); sc.Server.Phases[0].RetryAfter.Form != "none" || sc.Fleet.Start.Kind != ArrivalBurst {
		t.Errorf("outage-bare: retry_after %q, start %v; want none and burst (only client backoff spreads the herd)",
			sc.Server.Phases[0].RetryAfter.Form, sc.Fleet.Start)
	}
	sc := get("quota-steady")
	q := &sc.Server.Quota.Limits[0]
	fleetRate := sc.Subject.Policy.Rate * float64(sc.Fleet.Clients)
	if q == nil || sc.Server.Headers == "none" || sc.Server.Headers == "" || fleetRate <= 0 || fleetRate >= q.Limit/q.Per.Seconds() {
		t.Errorf("quota-steady: quota %+v, headers %q, fleet rate %v; want a published quota above the fleet's policy rate", q, sc.Server.Headers, fleetRate)
	}
	sc = get("quota-layered")
	if ls := sc.Server.Quota.Limits; len(ls) != 2 || sc.Server.Headers != "" ||
		!(sc.Subject.Policy.Rate < ls[1].Limit/ls[1].Per.Seconds() && ls[1].Limit/ls[1].Per.Seconds() < 0.8*ls[0].Limit/ls[0].Per.Seconds()) {
		t.Errorf("quota-layered: limits %+v, headers %q, policy rate %v; want two limits, no headers (a client that reads them slows down by itself), "+
			"the policy under the second's sustained rate, which is under 80%% of the first's", ls, sc.Server.Headers, sc.Subject.Policy.Rate)
	}
	sc = get("quota-tiers")
	if q := sc.Server.Quota; len(q.Tiers) != 2 || !q.Tiers[0].Default || len(sc.Fleet.APIKeys) != 2 ||
		!strings.HasPrefix(sc.Fleet.APIKey(0), strings.TrimSuffix(q.Tiers[0].Keys[0], "*")) ||
		!strings.HasPrefix(sc.Fleet.APIKey(1), strings.TrimSuffix(q.Tiers[1].Keys[0], "*")) {
		t.Errorf("quota-tiers: tiers %+v, api_keys %+v; want a default free tier and a paid one, the fleet's keys in both", q.Tiers, sc.Fleet.APIKeys)
	}
	if m := sc.Meta(MetaOptions{}); m.Quota == nil || m.Quota.Tier != "free" || sc.Subject.Policy.Rate >= m.Quota.Rate {
		t.Errorf("quota-tiers: pacing judged against %+v, policy rate %v; want the free tier's tightest limit, above the policy", m.Quota, sc.Subject.Policy.Rate)
	}
	sc = get("budget-trip")
	if sc.Server.Phases[0].RetryAfter.Form != "huge" || sc.Server.Phases[0].For < sc.Duration || sc.Subject.Policy.Budget == 0 || sc.Subject.Policy.Budget >= sc.Fleet.Timeout {
		t.Errorf("budget-trip: %+v, policy %+v; want a huge Retry-After, an outage longer than the run, and a budget below the watchdog", sc.Server.Phases[0], sc.Subject.Policy)
	}
	if sc := get("post-idempotency"); sc.Fleet.Method != "POST" {
		t.Errorf("post-idempotency: method %q; want POST", sc.Fleet.Method)
	}
	sc = get("slow-server")
	if sc.Subject.Policy.Timeout == 0 || sc.Server.Phases[0].Latency <= sc.Subject.Policy.Timeout {
		t.Errorf("slow-server: latency %v, policy timeout %v; want latency past the per-attempt timeout", sc.Server.Phases[0].Latency, sc.Subject.Policy.Timeout)
	}
	// metastable-open: open-loop arrivals at about 80 % of the capacity,
	// one request a client, in processes that share a client; arrivals
	// that outlast the trigger by recovery's threshold and hold; a
	// per-attempt timeout below the full queue's delay.
	sc = get("metastable-open")
	c := sc.Server.Capacity
	capRate := float64(c.Concurrency) / c.Service.Seconds()
	queueDelay := time.Duration(float64(c.Queue) / capRate * float64(time.Second))
	arrivalsEnd := time.Duration(float64(sc.Fleet.Clients) / sc.Fleet.Start.Rate * float64(time.Second))
	triggerEnd := sc.Server.Phases[0].For + sc.Server.Phases[1].For
	if load := sc.Fleet.Start.Rate / capRate; sc.Fleet.Start.Kind != ArrivalPoisson || load < 0.75 || load > 0.85 ||
		sc.Fleet.Requests != 1 || sc.Fleet.ProcessCount() < 2 || sc.Fleet.ProcessCount() >= sc.Fleet.Clients ||
		!(sc.Server.Phases[1].Capacity > 0 && sc.Server.Phases[1].Capacity < 1) ||
		sc.Fleet.AttemptTimeout <= 0 || sc.Fleet.AttemptTimeout >= queueDelay ||
		arrivalsEnd < triggerEnd+10*time.Second || arrivalsEnd+sc.Fleet.Timeout > sc.Duration {
		t.Errorf("metastable-open: start %v (%.0f %% of %.0f/s), %d requests a client, %d processes, phases %+v, attempt timeout %v (queue delay %v), "+
			"arrivals until %v, duration %v; want poisson at ~80 %%, one request, a few processes, a trigger, a timeout under the queue's delay, "+
			"arrivals 10 s past the trigger and ending a fleet timeout before the run",
			sc.Fleet.Start, 100*sc.Fleet.Start.Rate/capRate, capRate, sc.Fleet.Requests, sc.Fleet.ProcessCount(), sc.Server.Phases,
			sc.Fleet.AttemptTimeout, queueDelay, arrivalsEnd, sc.Duration)
	}
	// grpc-metastable-open: the same shape over gRPC, with a proxy whose
	// timeout is under the full queue's delay (so a call's attempts can
	// each cost the server a call) and a call deadline with room for
	// retries past it.
	sc = get("grpc-metastable-open")
	c = sc.Server.Capacity
	capRate = float64(c.Concurrency) / c.Service.Seconds()
	queueDelay = time.Duration(float64(c.Queue) / capRate * float64(time.Second))
	if load := sc.Fleet.Start.Rate / capRate; sc.Server.Protocol != "grpc" || sc.Fleet.Start.Kind != ArrivalPoisson || load < 0.75 || load > 0.85 ||
		sc.Fleet.Requests != 1 || sc.Fleet.ProcessCount() < 2 || sc.Fleet.ProcessCount() >= sc.Fleet.Clients ||
		sc.Server.ProxyTimeout <= 0 || sc.Server.ProxyTimeout >= queueDelay || sc.Fleet.AttemptTimeout < 4*sc.Server.ProxyTimeout {
		t.Errorf("grpc-metastable-open: protocol %s, start %v (%.0f %% of %.0f/s), %d requests, %d processes, proxy timeout %v (queue delay %v), call deadline %v; "+
			"want grpc, poisson at ~80 %%, one request, a few processes, a proxy timeout under the queue's delay, a deadline with room for retries",
			sc.Server.Protocol, sc.Fleet.Start, 100*sc.Fleet.Start.Rate/capRate, capRate, sc.Fleet.Requests, sc.Fleet.ProcessCount(),
			sc.Server.ProxyTimeout, queueDelay, sc.Fleet.AttemptTimeout)
	}
}

func TestResolve(t *testing.T) {
	sc, err := Resolve("outage-date")
	if err != nil || sc.Name != "outage-date" {
		t.Fatalf("Resolve(outage-date) = %v, %v; want the built-in", sc, err)
	}
	if _, err := Resolve("no-such-scenario"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("Resolve(no-such-scenario) = %v; want ErrUnknownScenario", err)
	}
	if _, err := Builtin("../load"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("Builtin(../load) = %v; want ErrUnknownScenario", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(path, []byte("name: mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sc, err := Resolve(path); err != nil || sc.Name != "mine" || sc.File != path {
		t.Errorf("Resolve(%s) = %+v, %v; want the file", path, sc, err)
	}
	if _, err := Resolve(filepath.Join(dir, "gone.yaml")); !errors.Is(err, ErrUnknownScenario) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Resolve(missing file) = %v; want ErrUnknownScenario and os.ErrNotExist", err)
	}
}

func TestBuiltinsRoundTrip(t *testing.T) {
	for _, b := range builtinSources() {
		checkRoundTrip(t, b)
	}
}
