package scenarios

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

func mustParse(t *testing.T, src string) *Scenario {
	t.Helper()
	sc, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func mustSubject(t *testing.T, name string) subjects.Subject {
	t.Helper()
	s, err := subjects.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMeta(t *testing.T) {
	sc, err := Builtin("quota-steady")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := sc.Meta(MetaOptions{Subject: mustSubject(t, "retrylab"), Seed: 9, Start: start, Tool: "v1"})
	if m.Scenario != "quota-steady" || m.Subject != "retrylab" || m.Recorder != "run" || m.Seed != 9 || !m.Start.Equal(start) || m.Tool != "v1" {
		t.Errorf("meta header = %+v", m)
	}
	if m.Quota == nil || m.Quota.Rate != 200 || m.Quota.Burst != 50 || m.Quota.Key != "global" {
		t.Errorf("meta.Quota = %+v; want 200/s burst 50 global", m.Quota)
	}
	if m.Fleet == nil || m.Fleet.Clients != 50 || m.Fleet.Requests != 30 || m.Fleet.Start != "ramp 2s" || m.Fleet.Timeout != int64(20*time.Second) {
		t.Errorf("meta.Fleet = %+v", m.Fleet)
	}
	if len(m.Phases) != 1 || m.Phases[0].Name != "steady" || m.Duration != int64(25*time.Second) {
		t.Errorf("meta phases %+v, duration %d", m.Phases, m.Duration)
	}
	if m.Policy == nil || m.Policy.Base != int64(100*time.Millisecond) || m.Policy.MaxAttempts != 25 || m.Policy.Budget != int64(10*time.Second) {
		t.Errorf("meta.Policy = %+v; want the scenario's policy as the subject states it (25 attempts derived from the 10s budget)", m.Policy)
	}
	if m.Expect == nil || !strings.Contains(strings.Join(m.Expect.Checks, ","), "pacing") {
		t.Errorf("meta.Expect = %+v; want the scenario's checks", m.Expect)
	}
	back, err := Parse("meta.json", m.Source)
	if err != nil {
		t.Fatalf("Parse(meta.Source) = %v", err)
	}
	if !reflect.DeepEqual(back.Fleet, sc.Fleet) || back.Name != sc.Name {
		t.Errorf("meta.Source parses to %+v; want the scenario", back)
	}
}

// TestMetaCapacity: the meta record carries the stub's capacity, defaults
// filled in, and each phase's share of the workers.
func TestMetaCapacity(t *testing.T) {
	sc := &Scenario{Name: "c", Server: stubserver.Config{
		Capacity: &stubserver.Capacity{Concurrency: 50, Queue: 100, Service: 20 * time.Millisecond, CancelOnDisconnect: true},
		Phases: []stubserver.Phase{
			{Name: "before", For: time.Second},
			{Name: "trigger", For: 5 * time.Second, Capacity: 0.3},
			{Name: "after"},
		}}}
	m := sc.Meta(MetaOptions{})
	want := timeline.Capacity{Concurrency: 50, Queue: 100, Service: int64(20 * time.Millisecond), Dist: "fixed", Discipline: "fifo", CancelOnDisconnect: true}
	if m.Capacity == nil || *m.Capacity != want {
		t.Errorf("meta.Capacity = %+v; want %+v", m.Capacity, want)
	}
	if len(m.Phases) != 3 || m.Phases[0].Capacity != 0 || m.Phases[1].Capacity != 0.3 || m.Phases[1].Start != int64(time.Second) || m.Phases[2].Capacity != 0 {
		t.Errorf("meta.Phases = %+v; want the trigger at 0.3 from 1s, the others unscaled", m.Phases)
	}
	sc.Server.Capacity.Dist, sc.Server.Capacity.Discipline = stubserver.DistExponential, stubserver.DisciplineLIFO
	if m := sc.Meta(MetaOptions{}); m.Capacity.Dist != "exponential" || m.Capacity.Discipline != "lifo" {
		t.Errorf("meta.Capacity = %+v; want exponential, lifo", m.Capacity)
	}
	if m := (&Scenario{Name: "none"}).Meta(MetaOptions{}); m.Capacity != nil {
		t.Errorf("meta.Capacity without capacity = %+v; want nil", m.Capacity)
	}
}

// TestMetaExecStatesTheScenarioPolicy: an exec subject's meta carries the
// scenario's subject.policy as its stated policy, as a Go subject's does
// (the analyzer reads only meta.Policy); with none, meta states none, and
// StatedPolicy says the same as Meta.
func TestMetaExecStatesTheScenarioPolicy(t *testing.T) {
	exec := mustSubject(t, "exec:python3 client.py")
	sc := mustParse(t, "subject: {name: retrylab, policy: {max_attempts: 8, budget: 6s, base: 200ms, cap: 4s}}\n")
	want := &timeline.Policy{MaxAttempts: 8, Budget: int64(6 * time.Second), Base: int64(200 * time.Millisecond), Cap: int64(4 * time.Second), Jitter: "full"}
	m := sc.Meta(MetaOptions{Subject: exec})
	if !reflect.DeepEqual(m.Policy, want) {
		t.Errorf("exec meta.Policy = %+v; want %+v", m.Policy, want)
	}
	if got := sc.StatedPolicy(exec, false); !reflect.DeepEqual(got, m.Policy) {
		t.Errorf("StatedPolicy = %+v; want meta's %+v", got, m.Policy)
	}
	if !strings.Contains(m.Summary, "stated policy base=200ms,cap=4s,max_attempts=8,budget=6s,jitter=full") {
		t.Errorf("exec meta.Summary = %q; want the stated policy", m.Summary)
	}
	bare := mustParse(t, "name: bare\n")
	if m := bare.Meta(MetaOptions{Subject: exec}); m.Policy != nil || bare.StatedPolicy(exec, false) != nil {
		t.Errorf("exec without a policy: meta.Policy = %+v; want none", m.Policy)
	}
	if p := bare.StatedPolicy(mustSubject(t, "retrylab"), false); p == nil || p.MaxAttempts == 0 {
		t.Errorf("retrylab StatedPolicy = %+v; want the client's defaults", p)
	}
}
