package grpcsubjects_test

import (
	"slices"
	"testing"

	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/subjects/grpcsubjects"
)

// grpcBuiltins are the gRPC built-in scenarios (server.protocol grpc).
func grpcBuiltins(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, sc := range scenarios.Builtins() {
		if sc.Server.Protocol == "grpc" {
			names = append(names, sc.Name)
		}
	}
	if len(names) < 5 {
		t.Fatalf("%d gRPC built-ins (%v); want at least 5", len(names), names)
	}
	return names
}

// The reference interceptor passes every gRPC built-in, in virtual time.
// -short plays the two cheapest (the race step looks for races).
func TestReferencePassesEveryBuiltin(t *testing.T) {
	for _, name := range grpcBuiltins(t) {
		if testing.Short() && name != "grpc-outage" && name != "grpc-non-retryable" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := retrylabtest.Run(t, retrylabtest.Builtin(name), retrylabtest.Registered("grpcretry"))
			r.AssertPass(t)
			// The duration cap leaves the run a third more than its
			// length, as retrylabtest's TestEveryBuiltinPassesTheReference
			// asks of the HTTP built-ins: a busy host stretches a run.
			if d := r.Scenario.Duration; float64(r.Summary.Elapsed)*1.35 > float64(d) {
				t.Errorf("the run took %v in virtual time, more than 1/1.35 of the duration cap %v", r.Summary.Elapsed, d)
			}
		})
	}
}

// The known-bad gRPC clients fail where they should (docs/grpc.md,
// "Findings"); the checks named are the ones that must fail.
func TestKnownBadFail(t *testing.T) {
	for _, tt := range []struct {
		scenario, subject string
		checks            []string
		short             bool
	}{
		// No retries at all: calls lost to an outage the budget outlasts.
		{"grpc-outage", "grpc-default", []string{"give-up"}, true},
		{"grpc-outage", "grpc-middleware", []string{"give-up"}, false},
		{"grpc-outage", "grpc-hedging", []string{"give-up"}, false},
		// A6's cap of 5 attempts is spent within ~3 s of an 8 s outage.
		{"grpc-outage", "grpc-retrypolicy", []string{"give-up"}, false},
		{"grpc-outage", "grpc-throttling", []string{"give-up"}, false},
		// Exponential backoff with ±10 % jitter comes back in waves.
		{"grpc-outage", "grpc-middleware-backoff", []string{"waves", "give-up"}, false},
		// The middleware reads neither pushback nor RetryInfo.
		{"grpc-quota-pushback", "grpc-middleware-backoff", []string{"retry-after"}, false},
		{"grpc-quota-retryinfo", "grpc-middleware-backoff", []string{"retry-after"}, false},
		// ... nor a pushback that says not to retry (gRPC A6).
		{"grpc-pushback-refusal", "grpc-middleware-backoff", []string{"retry-after"}, true},
		// grpc-go honours pushback but not RetryInfo.
		{"grpc-quota-retryinfo", "grpc-retrypolicy", []string{"retry-after"}, false},
		// A channel's throttling spends its tokens on one quota's 429s.
		{"grpc-quota-pushback", "grpc-throttling", []string{"give-up"}, false},
		// Without a retry budget the retries outlive their trigger.
		{"grpc-metastable", "grpcretry-no-budget", []string{"recovery", "load-amplification"}, false},
		{"grpc-metastable-open", "grpcretry-no-budget", []string{"recovery", "load-amplification", "wasted-work"}, false},
		// A6 retries behind a proxy that times out: every retry costs
		// the server a call it serves for nobody.
		{"grpc-metastable-open", "grpc-retrypolicy", []string{"recovery", "load-amplification", "wasted-work"}, false},
	} {
		if testing.Short() && !tt.short {
			continue
		}
		t.Run(tt.scenario+"/"+tt.subject, func(t *testing.T) {
			retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered(tt.subject)).AssertFails(t, tt.checks...)
		})
	}
}

// grpc-go's own retryThrottling decides recovery: the same retryPolicy
// that keeps grpc-metastable-open's server overloaded (TestKnownBadFail)
// stops retrying once a channel's failures spend half its tokens, and the
// server recovers. Seeds 1-3, in virtual time.
func TestThrottlingRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("three 24 s runs in virtual time: make check plays them")
	}
	for seed := int64(1); seed <= 3; seed++ {
		r := retrylabtest.Run(t, retrylabtest.Builtin("grpc-metastable-open"), retrylabtest.Registered("grpc-throttling"), retrylabtest.WithSeed(seed))
		r.AssertPass(t)
		if a := r.Verdict.Check("load-amplification"); a == nil || a.Figure > 1.1 {
			t.Errorf("seed %d: load-amplification %+v; want at most 1.1× (the retries stopped)", seed, a)
		}
	}
}

// The package registers exactly the subjects the subjects package says
// it does (subjects.Optional), so a scenario naming one loads in a
// program that does not link grpc.
func TestOptionalList(t *testing.T) {
	var names []string
	for _, s := range grpcsubjects.Subjects {
		names = append(names, s.Name())
		if pkg, ok := subjects.Optional(s.Name()); !ok || pkg != "github.com/retrylab/retrylab/subjects/grpcsubjects" {
			t.Errorf("subjects.Optional(%q) = %q, %v; want this package", s.Name(), pkg, ok)
		}
		if subjects.ProtocolOf(s) != "grpc" {
			t.Errorf("%s speaks %s; want grpc", s.Name(), subjects.ProtocolOf(s))
		}
	}
	for _, n := range []string{"grpc-default", "grpc-retrypolicy", "grpc-throttling", "grpc-hedging", "grpc-middleware", "grpc-middleware-backoff", "grpcretry", "grpcretry-no-budget"} {
		if !slices.Contains(names, n) {
			t.Errorf("subject %s not registered", n)
		}
	}
}

// An HTTP subject against a gRPC stub is refused before the run, naming
// both protocols.
func TestProtocolMismatch(t *testing.T) {
	sc, err := scenarios.Builtin("grpc-outage")
	if err != nil {
		t.Fatal(err)
	}
	_, err = runnerRun(sc, "retrylab")
	if err == nil || !contains(err.Error(), "subject retrylab speaks http, and the scenario's stub grpc") {
		t.Fatalf("run = %v; want the protocol mismatch named", err)
	}
}
