package retrylabtest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	_ "github.com/retrylab/retrylab/subjects/thirdparty" // retryablehttp, among the subjects tested
	"github.com/retrylab/retrylab/timeline"
)

// TestBuiltinsJudge is the project's end-to-end test: for each built-in
// scenario, the reference client passes and a subject with the mistake the
// scenario exposes fails the check that names it.
func TestBuiltinsJudge(t *testing.T) {
	tests := []struct {
		scenario          string
		bad               string           // subject with the mistake
		fails             string           // the check it must fail
		clients, requests int              // 0: the scenario's
		badPolicy         *subjects.Policy // the bad subject's policy (nil: the scenario's)
	}{
		{"outage-delta", "ignore-retry-after", "retry-after", 50, 0, nil},
		{"outage-date", "ignore-retry-after", "retry-after", 50, 0, nil},
		{"outage-bare", "exp-no-jitter", "waves", 100, 0, nil},
		{"quota-steady", "retryablehttp", "pacing", 0, 20, nil},
		// Paced at 80% of the per-second limit, above the sustained one.
		{"quota-layered", "retrylab", "pacing", 0, 0, &subjects.Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second,
			Budget: 10 * time.Second, Jitter: "full", Rate: 8, Burst: 1}},
		{"quota-tiers", "retryablehttp", "pacing", 0, 0, nil},
		{"non-retryable", "retry-4xx", "non-retryable", 30, 10, nil},
		{"budget-trip", "unbounded", "budget", 30, 0, nil},
		// The scenario derives the attempt cap from its budget (45); a
		// stated cap of 12 is what unbounded's ~23 attempts break.
		{"malformed-retry-after", "unbounded", "attempts", 30, 0, &subjects.Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second,
			MaxAttempts: 12, Budget: 20 * time.Second, Jitter: "full"}},
		{"post-idempotency", "retryablehttp", "idempotency", 30, 0, nil},
		{"flapping", "exp-no-jitter", "waves", 0, 4, nil},
		{"slow-server", "retryablehttp", "budget", 20, 0, nil},
		// The retrying control with the fewest attempts there: its retry
		// budget lets the server recover, but its lockstep waves hit the
		// full queue together (load-amplification 12× against 8).
		{"metastable", "exp-no-jitter", "load-amplification", 0, 0, nil},
		// Open loop, the control without a retry budget (its arrivals cut
		// short: badClients).
		{"metastable-open", "no-retry-budget", "load-amplification", 0, 0, nil},
	}
	// badClients trims the bad subject's fleet alone: metastable-open's
	// storm, cut inside the trigger (1,600 clients at 200/s: 8 s), stays
	// cheap under -race, and the attempts it multiplies while the workers
	// are down already fail load-amplification.
	badClients := map[string]int{"metastable-open": 1600}
	// storm: the scenarios whose runs are storms of a server at capacity,
	// left to make check under -short (TestSameSeedSameTimelineAtCapacity
	// keeps a server at capacity in make test).
	storm := map[string]bool{"metastable": true, "metastable-open": true}
	// The gRPC built-ins are judged with the gRPC subjects, in
	// subjects/grpcsubjects (this package does not link grpc).
	http := 0
	for _, sc := range scenarios.Builtins() {
		if sc.Server.Protocol != "grpc" {
			http++
		}
	}
	if got := len(tests); got != http {
		t.Errorf("%d scenarios judged; want every HTTP built-in (%d)", got, http)
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			if storm[tt.scenario] && testing.Short() {
				t.Skip("a metastable storm is most of this test's CPU: make check plays it")
			}
			var opts []retrylabtest.Option
			if tt.clients > 0 {
				opts = append(opts, retrylabtest.WithClients(tt.clients))
			}
			if tt.requests > 0 {
				opts = append(opts, retrylabtest.WithRequests(tt.requests))
			}
			good := retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered("retrylab"), opts...)
			good.AssertPass(t)
			if good.Summary.Requests != good.Summary.Planned {
				t.Errorf("retrylab: %d of %d logical requests recorded", good.Summary.Requests, good.Summary.Planned)
			}
			if tt.badPolicy != nil {
				opts = append(opts, retrylabtest.WithPolicy(*tt.badPolicy))
			}
			if n := badClients[tt.scenario]; n > 0 {
				opts = append(opts, retrylabtest.WithClients(n))
			}
			bad := retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered(tt.bad), opts...)
			bad.AssertFails(t, tt.fails)
		})
	}
}

// TestSameSeedSameTimeline: a virtual run replays exactly.
func TestSameSeedSameTimeline(t *testing.T) {
	a := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(100), retrylabtest.WithSeed(42))
	b := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(100), retrylabtest.WithSeed(42))
	if a.Hash != b.Hash {
		t.Errorf("two runs with seed 42: hashes %s and %s; want equal", a.Hash, b.Hash)
	}
	if len(a.Timeline) != len(b.Timeline) {
		t.Errorf("two runs with seed 42: %d and %d timeline bytes; want equal", len(a.Timeline), len(b.Timeline))
	}
	c := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(100), retrylabtest.WithSeed(43))
	if a.Hash == c.Hash {
		t.Errorf("seeds 42 and 43 give the same timeline %s; want different jitter", a.Hash)
	}
	// Clock-aligned clients retry at the same instants: the stub's
	// Retry-After spread must be drawn per attempt, not in arrival order.
	d := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("clock-aligned"), retrylabtest.WithClients(100), retrylabtest.WithSeed(42))
	e := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("clock-aligned"), retrylabtest.WithClients(100), retrylabtest.WithSeed(42))
	if d.Hash != e.Hash {
		t.Errorf("clock-aligned, two runs with seed 42: hashes %s and %s; want equal", d.Hash, e.Hash)
	}
}

// TestSameSeedSameTimelineAtCapacity: a virtual run against a server of
// finite capacity replays exactly, with subjects whose attempts fall at
// the same instants (clock-aligned retries, fixed delays): the queue's
// order, its rejections, and responses that end as their client's
// timeout fires do not depend on which goroutine runs first.
func TestSameSeedSameTimelineAtCapacity(t *testing.T) {
	sc, err := scenarios.Parse("capacity.yaml", []byte(`
duration: 6s
server:
  capacity: {concurrency: 2, queue: 6, service: 10ms}
  phases:
    - {for: 1s, respond: ok}
    - {for: 2s, respond: ok, capacity: 50%}
    - {respond: ok}
fleet: {clients: 30, start: ramp 300ms, requests: 30, think: 100ms}
subject:
  policy: {base: 10ms, cap: 50ms, budget: 1s, jitter: full, timeout: 30ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	replays := 2
	if testing.Short() {
		replays = 1 // make test; make check replays twice
	}
	for _, subj := range []string{"clock-aligned", "fixed-delay"} {
		a := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subj), retrylabtest.WithSeed(7))
		for i := range replays {
			if b := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subj), retrylabtest.WithSeed(7)); b.Hash != a.Hash {
				t.Errorf("%s, run %d with seed 7: hash %s; the first run's %s", subj, i+2, b.Hash, a.Hash)
			}
		}
	}
}

func TestRunOptions(t *testing.T) {
	res := retrylabtest.Run(t, retrylabtest.Builtin("outage-bare"), retrylabtest.Registered("retrylab"),
		retrylabtest.WithClients(40), retrylabtest.WithRequests(2), retrylabtest.WithDuration(20*time.Second),
		retrylabtest.WithPolicy(subjects.Policy{Base: 300 * time.Millisecond, Cap: 5 * time.Second, MaxAttempts: 9}),
		retrylabtest.WithChecks("amplification:threshold=1.5"), retrylabtest.WithSkip("waves"))
	if res.Summary.Planned != 80 || res.Summary.Clients != 40 {
		t.Errorf("Summary = %+v; want 40 clients × 2", res.Summary)
	}
	if !bytes.Contains(res.Timeline, []byte(`"base":300000000`)) {
		t.Errorf("timeline meta does not state the replaced policy (base 300ms)")
	}
	res.AssertCheck(t, "waves", analyzer.StatusSkip)
	res.AssertFails(t, "amplification")
	res.AssertFails(t)
	path := filepath.Join(t.TempDir(), "t.ndjson")
	if err := res.WriteTimeline(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, res.Timeline) {
		t.Errorf("WriteTimeline wrote %d bytes, %v; want the timeline", len(b), err)
	}
}

// TestRunInsideBubble: RunInBubble runs in the caller's bubble, on its
// clock.
func TestRunInsideBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		res := retrylabtest.RunInBubble(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(20))
		res.AssertPass(t)
		if time.Since(start) < 6*time.Second {
			t.Errorf("the bubble's clock moved %v; want past the 6s outage", time.Since(start))
		}
	})
}

func TestRunScenarioValue(t *testing.T) {
	sc, err := scenarios.Parse("mine.yaml", []byte(`
duration: 30s
server: {phases: [{for: 2s, respond: {status: 429}, retry_after: {form: delta, value: 1}}, {respond: ok}]}
fleet: {clients: 10, requests: 2}
expect: {checks: [retry-after, instant-retry]}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.ScenarioSubject())
	res.AssertPass(t)
	if res.Summary.Subject != "retrylab" || res.Summary.Throttled429 < 10 {
		t.Errorf("Summary = %+v; want the scenario's default subject, every client throttled first", res.Summary)
	}

	// The same scenario from a file, against the subject it names.
	path := filepath.Join(t.TempDir(), "mine.yaml")
	named := strings.Replace(string(sc.Source), "duration: 30s", "duration: 30s\nsubject: {name: ignore-retry-after}", 1)
	if err := os.WriteFile(path, []byte(named), 0o644); err != nil {
		t.Fatal(err)
	}
	res = retrylabtest.Run(t, retrylabtest.File(path), retrylabtest.ScenarioSubject())
	if res.Summary.Scenario != "mine" || res.Summary.Subject != "ignore-retry-after" || res.Summary.Throttled429 < 10 {
		t.Errorf("Summary = %+v; want the file's scenario (mine) against the subject it names (ignore-retry-after), every client throttled first", res.Summary)
	}
	res.AssertFails(t, analyzer.CheckRetryAfter)
}

// fakeTB records a RunInBubble's fatal errors and an assertion's
// errors; only the methods they call before a run, and Errorf, are
// implemented.
type fakeTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
	errs []string
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "fake" }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

// TestRunRejects: a scenario or subject that cannot be had fails the
// test before any run, with a message naming it. The arguments are
// checked outside the bubble, by the code Run and RunInBubble share;
// RunInBubble takes the fake testing.TB.
func TestRunRejects(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\nduration: forever\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		scenario retrylabtest.Scenario
		subject  retrylabtest.Subject
		want     string
	}{
		{retrylabtest.Builtin("no-such-scenario"), retrylabtest.Registered("retrylab"), "unknown scenario"},
		{retrylabtest.Builtin("../outage-date"), retrylabtest.Registered("retrylab"), "unknown scenario"},
		{retrylabtest.File(filepath.Join(dir, "missing.yaml")), retrylabtest.Registered("retrylab"), "no such file"},
		{retrylabtest.File(bad), retrylabtest.Registered("retrylab"), "bad.yaml"},
		{retrylabtest.Custom(nil), retrylabtest.Registered("retrylab"), "retrylabtest.Custom(nil): no scenario"},
		{nil, retrylabtest.Registered("retrylab"), "no scenario (Builtin, File or Custom makes one)"},
		{retrylabtest.Builtin("outage-date"), retrylabtest.Registered("no-such-subject"), "unknown subject"},
		{retrylabtest.Builtin("outage-date"), retrylabtest.Registered(""), `retrylabtest.Registered(""): no subject name`},
		{retrylabtest.Builtin("outage-date"), retrylabtest.Client(nil), "retrylabtest.Client(nil): no subject"},
		{retrylabtest.Builtin("outage-date"), nil, "no subject (Registered, Client or ScenarioSubject makes one)"},
		{retrylabtest.Builtin("outage-date"), retrylabtest.Client(subjects.Program{Path: "true"}), "real time only"},
		{retrylabtest.Builtin("outage-date"), retrylabtest.Registered("exec:true"), "real time only"},
	}
	for _, tt := range tests {
		f := &fakeTB{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			retrylabtest.RunInBubble(f, tt.scenario, tt.subject)
		}()
		<-done
		if len(f.msgs) != 1 || !strings.Contains(f.msgs[0], tt.want) {
			t.Errorf("RunInBubble(%#v, %#v) fatal messages %q; want one containing %q", tt.scenario, tt.subject, f.msgs, tt.want)
		}
	}
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		retrylabtest.RunInBubble(f, retrylabtest.Builtin("outage-date"), retrylabtest.Registered("retrylab"), retrylabtest.WithChecks("speed"))
	}()
	<-done
	if len(f.msgs) != 1 || !strings.Contains(f.msgs[0], "unknown check") {
		t.Errorf("RunInBubble(WithChecks(speed)) fatal messages %q; want unknown check", f.msgs)
	}
}

// A subject built in the test, as a library author writes one.
type naive struct{}

func (naive) Name() string { return "naive" }
func (naive) New(next http.RoundTripper, _ subjects.Params) subjects.Caller {
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		for attempt := 1; ; attempt++ {
			resp, err := next.RoundTrip(req)
			if err != nil || resp.StatusCode < 500 || attempt == 5 {
				return resp, err
			}
			resp.Body.Close() // and retry at once: the mistake
		}
	}
}

func TestCustomSubjectFails(t *testing.T) {
	sc, err := scenarios.Parse("short.yaml", []byte(`
duration: 10s
server: {phases: [{for: 1s, respond: {status: 503}}, {respond: ok}]}
fleet: {clients: 20, requests: 2, start: ramp 2s}
expect: {checks: [instant-retry, attempts]}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Client(naive{}))
	res.AssertFails(t, "instant-retry")
	res.AssertCheck(t, "attempts", analyzer.StatusSkip) // naive states no policy
}

// TestExampleGate runs the example's gate.
func TestExampleGate(t *testing.T) { gateMyClient(t) }

// TestAbandonedAttemptsCount: in slow-server the client gives up on
// attempts during the added latency; the stub records them as abandoned,
// never as the 200 it would have sent. Before, the analyzer read such a
// "200" as a success, took the next attempt for a new logical request, and
// counted 5 attempts where the client made 9, and attempts passed against
// a stated cap of 8. Now the analyzer's most attempts equals the client's,
// and a cap the client breaks fails (unbounded states 5, makes up to 8).
func TestAbandonedAttemptsCount(t *testing.T) {
	policy := subjects.Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second, MaxAttempts: 5, Budget: 20 * time.Second, Jitter: "full", Timeout: time.Second}
	res := retrylabtest.Run(t, retrylabtest.Builtin("slow-server"), retrylabtest.Registered("unbounded"), retrylabtest.WithClients(20), retrylabtest.WithPolicy(policy))
	dec := timeline.NewDecoder(bytes.NewReader(res.Timeline))
	var rec timeline.Record
	abandoned, most := 0, 0
	for dec.Decode(&rec) == nil {
		switch rec.Type {
		case timeline.TypeAttempt:
			if rec.Attempt.Fault == timeline.FaultAbandoned {
				abandoned++
				if rec.Attempt.Status == 0 {
					t.Errorf("abandoned attempt without the status it would have had: %+v", rec.Attempt)
				}
			}
		case timeline.TypeOutcome:
			most = max(most, rec.Outcome.Attempts)
		}
	}
	if abandoned == 0 {
		t.Fatal("no attempt recorded abandoned: the scenario no longer makes clients give up during latency")
	}
	t.Logf("%d attempts abandoned; the most attempts one logical request made: %d", abandoned, most)
	c := res.Verdict.Check(analyzer.CheckAttempts)
	if c == nil || int(c.Figure) != most {
		t.Errorf("attempts figure %v; want %d, the most attempts any client made", c, most)
	}
	if most <= 5 {
		t.Fatalf("the most attempts was %d: unbounded no longer breaks the stated cap of 5 here", most)
	}
	res.AssertFails(t, analyzer.CheckAttempts)
}

// verdictResult is a Result around a verdict built by hand.
func verdictResult(status string, inconclusive []string, checks ...analyzer.CheckResult) *retrylabtest.Result {
	return &retrylabtest.Result{
		Summary: &runner.Summary{Scenario: "outage-date", Subject: "mine"},
		Verdict: &analyzer.Verdict{Status: status, Pass: status == analyzer.VerdictPass, Inconclusive: inconclusive, Checks: checks},
	}
}

// TestAssertionsNeedTheVerdict: AssertPass needs PASS and AssertFails
// needs FAIL (and, with names, each named check failed); an INCONCLUSIVE
// verdict satisfies neither, and the message says INCONCLUSIVE with the
// analyzer's reasons. Before, AssertFails() passed on an INCONCLUSIVE
// verdict and AssertPass said "checks failed: " with an empty list.
func TestAssertionsNeedTheVerdict(t *testing.T) {
	const (
		noEnd   = "the timeline has no end record: the run was killed or the file was cut short"
		missing = "3 of 5 scheduled logical requests have an outcome"
	)
	pass := verdictResult(analyzer.VerdictPass, nil,
		analyzer.CheckResult{ID: "retry-after", Status: analyzer.StatusPass}, analyzer.CheckResult{ID: "waves", Status: analyzer.StatusSkip})
	fail := verdictResult(analyzer.VerdictFail, nil,
		analyzer.CheckResult{ID: "retry-after", Status: analyzer.StatusFail}, analyzer.CheckResult{ID: "waves", Status: analyzer.StatusPass},
		analyzer.CheckResult{ID: "budget", Status: analyzer.StatusFail})
	failToo := verdictResult(analyzer.VerdictFail, []string{missing},
		analyzer.CheckResult{ID: "retry-after", Status: analyzer.StatusFail})
	inconclusive := verdictResult(analyzer.VerdictInconclusive, []string{noEnd, missing},
		analyzer.CheckResult{ID: "retry-after", Status: analyzer.StatusPass}, analyzer.CheckResult{ID: "waves", Status: analyzer.StatusSkip})

	for _, c := range []struct {
		name   string
		assert func(t testing.TB)
		want   []string // each error's wanted substrings; nil: no error
	}{
		{"pass/AssertPass", pass.AssertPass, nil},
		{"fail/AssertPass", fail.AssertPass, []string{"outage-date × mine: the verdict is FAIL (checks failed: retry-after, budget); want PASS"}},
		{"fail+inconclusive/AssertPass", failToo.AssertPass, []string{"the verdict is FAIL (checks failed: retry-after; inconclusive too: " + missing + "); want PASS"}},
		{"inconclusive/AssertPass", inconclusive.AssertPass, []string{"the verdict is INCONCLUSIVE (" + noEnd + "; " + missing + "); want PASS"}},

		{"fail/AssertFails()", func(t testing.TB) { fail.AssertFails(t) }, nil},
		{"fail/AssertFails(named)", func(t testing.TB) { fail.AssertFails(t, "retry-after", "budget") }, nil},
		{"fail/AssertFails(a passed check)", func(t testing.TB) { fail.AssertFails(t, "retry-after", "waves") },
			[]string{"check waves is pass; want fail (the verdict is FAIL (checks failed: retry-after, budget))"}},
		{"fail/AssertFails(an absent check)", func(t testing.TB) { fail.AssertFails(t, "speed") }, []string{`no check "speed" in the verdict`}},
		{"pass/AssertFails()", func(t testing.TB) { pass.AssertFails(t) }, []string{"the verdict is PASS; want FAIL"}},
		{"inconclusive/AssertFails()", func(t testing.TB) { inconclusive.AssertFails(t) },
			[]string{"the verdict is INCONCLUSIVE (" + noEnd + "; " + missing + "); want FAIL"}},
		{"inconclusive/AssertFails(named)", func(t testing.TB) { inconclusive.AssertFails(t, "retry-after", "waves") },
			[]string{"the verdict is INCONCLUSIVE (" + noEnd + "; " + missing + "); want FAIL"}},
	} {
		f := &fakeTB{}
		c.assert(f)
		if len(f.errs) != len(c.want) {
			t.Errorf("%s: %d errors %q; want %d", c.name, len(f.errs), f.errs, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(f.errs[i], w) {
				t.Errorf("%s: error %q; want it to contain %q", c.name, f.errs[i], w)
			}
			if strings.Contains(f.errs[i], "checks failed: \n") || strings.Contains(f.errs[i], "checks failed: ;") {
				t.Errorf("%s: error %q names an empty list of failed checks", c.name, f.errs[i])
			}
		}
	}
}

// TestAssertFailsInconclusiveRun: a run the duration cap stops in the
// middle of the outage is INCONCLUSIVE, and AssertFails() does not take
// it for a failure.
func TestAssertFailsInconclusiveRun(t *testing.T) {
	res := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered("retrylab"), retrylabtest.WithClients(20), retrylabtest.WithDuration(2*time.Second))
	if res.Verdict.Status != analyzer.VerdictInconclusive || len(res.Verdict.Inconclusive) == 0 {
		t.Fatalf("a 2 s cap on outage-delta: verdict %s %q; want INCONCLUSIVE with reasons (the test needs another way to make one)",
			res.Verdict.Status, res.Verdict.Inconclusive)
	}
	f := &fakeTB{}
	res.AssertFails(f)
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "the verdict is INCONCLUSIVE ("+res.Verdict.Inconclusive[0]) {
		t.Errorf("AssertFails() of an INCONCLUSIVE run: errors %q; want one naming INCONCLUSIVE and its reasons %q", f.errs, res.Verdict.Inconclusive)
	}
}

// TestEverySubjectReplays: every registered subject that says it replays
// (Info.Replayable) and runs in virtual time gives the same timeline twice
// with one seed, with one instance per client and with the clients
// grouped into 4 processes sharing one instance each (fleet.processes),
// whose calls interleave in any order: each logical request draws from
// a source of its own, and a shared instance hears one instant's answers
// in turn.
func TestEverySubjectReplays(t *testing.T) {
	for _, name := range subjects.Names() {
		t.Run(name, func(t *testing.T) {
			s, err := subjects.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := subjects.CheckVirtual(s); err != nil {
				t.Skipf("real time only: %v", err)
			}
			for _, procs := range []int{0, 4} {
				d, ok := s.(subjects.Describer)
				if !ok {
					t.Skipf("%s does not describe itself: whether it replays is unknown", name)
				}
				if !d.Describe(subjects.Params{Clients: max(1, 16/max(procs, 1))}).Replayable {
					t.Skipf("%s says it does not replay (it draws from a source of its own)", name)
				}
				opts := []retrylabtest.Option{retrylabtest.WithClients(16), retrylabtest.WithRequests(2),
					retrylabtest.WithSeed(5), retrylabtest.WithProcesses(procs)}
				a := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered(name), opts...)
				b := retrylabtest.Run(t, retrylabtest.Builtin("outage-delta"), retrylabtest.Registered(name), opts...)
				if a.Hash != b.Hash {
					t.Errorf("processes %d, two runs with seed 5: hashes %s and %s; want equal", procs, a.Hash, b.Hash)
				}
				if a.Summary.Requests != 32 || a.Summary.Unavailable503 == 0 {
					t.Errorf("processes %d: %d requests, %d 503s; want 32 requests, some met the outage", procs, a.Summary.Requests, a.Summary.Unavailable503)
				}
			}
		})
	}
}
