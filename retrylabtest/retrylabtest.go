// Package retrylabtest owns retrylab's `go test` helpers: a scenario run in
// virtual time (a testing/synctest bubble over an in-memory network) and
// assertions on the analyzer's verdict, so a library's retry logic is gated
// by its own unit tests in seconds:
//
//	func TestRetriesAreSafe(t *testing.T) {
//		res := retrylabtest.Run(t, retrylabtest.Builtin("outage-date"), retrylabtest.Client(myClient{}))
//		res.AssertPass(t)
//	}
//
// A Run's scenario is a Builtin, a File or a Custom *scenarios.Scenario;
// its subject is a Registered name, a Client (a subjects.Subject, typically
// the library author's own adapter) or the ScenarioSubject. Only these
// constructors make a Scenario or a Subject, so a wrong kind of argument
// does not compile.
//
// Run makes a bubble of its own (synctest.Test); a test already inside one
// calls RunInBubble instead.
package retrylabtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

// DefaultSeed is the seed of a Run without WithSeed.
const DefaultSeed = 1

// DefaultStagger separates the start instants of a run's clients, so that
// the same seed gives the same timeline.
const DefaultStagger = time.Microsecond

// A Scenario is the scenario a Run plays: Builtin, File or Custom make one.
type Scenario interface {
	scenario() (*scenarios.Scenario, error)
}

type builtinScenario string

func (name builtinScenario) scenario() (*scenarios.Scenario, error) {
	return scenarios.Builtin(string(name))
}

// Builtin is the built-in scenario name (one of scenarios.BuiltinNames),
// as `retrylab run NAME` plays it; each Run gets a fresh copy.
func Builtin(name string) Scenario { return builtinScenario(name) }

type fileScenario string

func (path fileScenario) scenario() (*scenarios.Scenario, error) {
	return scenarios.Load(string(path))
}

// File is the scenario file at path (the YAML `retrylab run` reads),
// loaded when the Run starts.
func File(path string) Scenario { return fileScenario(path) }

type customScenario struct{ sc *scenarios.Scenario }

func (c customScenario) scenario() (*scenarios.Scenario, error) {
	if c.sc == nil {
		return nil, errors.New("retrylabtest.Custom(nil): no scenario")
	}
	return c.sc, nil
}

// Custom is a scenario built in Go: one scenarios.Parse returned, or a
// built-in (scenarios.Builtin) with fields changed. Run does not modify
// it (WithPolicy applies to a copy).
func Custom(sc *scenarios.Scenario) Scenario { return customScenario{sc} }

// A Subject is the retry logic a Run tests: Registered, Client or
// ScenarioSubject make one.
type Subject interface {
	subject(sc *scenarios.Scenario) (subjects.Subject, error)
}

type registeredSubject string

func (name registeredSubject) subject(*scenarios.Scenario) (subjects.Subject, error) {
	if name == "" {
		return nil, errors.New(`retrylabtest.Registered(""): no subject name (ScenarioSubject() is the one the scenario names)`)
	}
	return subjects.Lookup(string(name))
}

// Registered is the subject subjects.Lookup finds by name: "retrylab",
// a control such as "ignore-retry-after", or a third-party library's
// adapter when the test imports subjects/thirdparty.
func Registered(name string) Subject { return registeredSubject(name) }

type clientSubject struct{ s subjects.Subject }

func (c clientSubject) subject(*scenarios.Scenario) (subjects.Subject, error) {
	if c.s == nil {
		return nil, errors.New("retrylabtest.Client(nil): no subject")
	}
	return c.s, nil
}

// Client is retry logic adapted to subjects.Subject — typically the
// library author's own client, handed the harness's transport and a seeded
// random source (see the package's examples).
func Client(s subjects.Subject) Subject { return clientSubject{s} }

type scenarioSubject struct{}

func (scenarioSubject) subject(sc *scenarios.Scenario) (subjects.Subject, error) {
	return subjects.Lookup(sc.Subject.Name)
}

// ScenarioSubject is the registered subject the scenario names (its
// subject.name; retrylab when it names none).
func ScenarioSubject() Subject { return scenarioSubject{} }

// An Option tunes Run or RunInBubble.
type Option func(*config)

type config struct {
	seed     int64
	clients  int
	requests int
	duration time.Duration
	procs    int
	policy   *subjects.Policy
	checks   []string
	skip     []string
}

// WithSeed sets the run's seed (DefaultSeed otherwise).
func WithSeed(seed int64) Option { return func(c *config) { c.seed = seed } }

// WithClients replaces the scenario's fleet size.
func WithClients(n int) Option { return func(c *config) { c.clients = n } }

// WithRequests replaces the scenario's logical requests per client.
func WithRequests(n int) Option { return func(c *config) { c.requests = n } }

// WithDuration replaces the scenario's duration cap (virtual time).
func WithDuration(d time.Duration) Option { return func(c *config) { c.duration = d } }

// WithProcesses groups the fleet's clients into n processes, each with
// one instance of the subject shared by its clients, as the scenario's
// fleet.processes does (which it replaces; n ≤ 0 leaves it).
func WithProcesses(n int) Option { return func(c *config) { c.procs = n } }

// WithPolicy replaces the scenario's subject policy.
func WithPolicy(p subjects.Policy) Option { return func(c *config) { c.policy = &p } }

// WithChecks selects analyzer checks, as `--check` does
// ("waves", "waves:threshold=2.5").
func WithChecks(specs ...string) Option {
	return func(c *config) { c.checks = append(c.checks, specs...) }
}

// WithSkip skips analyzer checks by id, as `--skip` does.
func WithSkip(ids ...string) Option { return func(c *config) { c.skip = append(c.skip, ids...) } }

// Result is one virtual-time run: its timeline, summary and verdict.
type Result struct {
	Scenario *scenarios.Scenario
	Summary  *runner.Summary
	// Timeline is the whole NDJSON timeline.
	Timeline []byte
	// Hash is the hex SHA-256 of the timeline with its records in a
	// canonical order (the meta record, then the other lines sorted), so
	// records written at the same virtual instant in either order hash
	// alike. Two runs with the same scenario, subject and seed have equal
	// hashes.
	Hash string
	// Verdict is the analyzer's judgement of Timeline.
	Verdict *analyzer.Verdict
}

// Run plays scenario against subject in virtual time, in a
// testing/synctest bubble of its own (synctest.Test), and returns the
// result; it fails t (t.Fatal) when the scenario, the subject or the run
// itself is broken, never because of the verdict: assert that with the
// Result's methods.
//
// Everything the run creates — server, transport, in-memory network,
// contexts — lives inside the bubble, and the run shuts down by closing
// idle connections and then the server, so the bubble ends cleanly. A
// 60-second scenario with 1000 clients takes a few CPU-seconds.
//
// Run must not be called inside a bubble (synctest.Test panics there): a
// test already in one calls RunInBubble.
func Run(t *testing.T, scenario Scenario, subject Subject, opts ...Option) *Result {
	t.Helper()
	r := prepare(t, scenario, subject, opts)
	var res *Result
	synctest.Test(t, func(t *testing.T) { res = r.run(t) })
	if res == nil {
		t.FailNow() // the bubble failed and said why
	}
	return res
}

// RunInBubble is Run for a caller already inside a testing/synctest
// bubble (in the function synctest.Test runs, say, to check something on
// the bubble's clock around the run): it plays the run in that bubble,
// whose clock it moves, instead of making one. It must be called only
// there: outside a bubble the virtual run's stub panics ("goroutine is
// not in a bubble", from synctest.Wait), which ends the test binary.
func RunInBubble(t testing.TB, scenario Scenario, subject Subject, opts ...Option) *Result {
	t.Helper()
	return prepare(t, scenario, subject, opts).run(t)
}

// prepared is a run whose scenario, subject and options were checked.
type prepared struct {
	sc    *scenarios.Scenario
	subj  subjects.Subject
	cfg   config
	aopts analyzer.Options
}

// prepare resolves and checks a run's arguments before the run (Run:
// outside its bubble); it fails t when one is wrong.
func prepare(t testing.TB, scenario Scenario, subject Subject, opts []Option) *prepared {
	t.Helper()
	cfg := config{seed: DefaultSeed}
	for _, o := range opts {
		o(&cfg)
	}
	if scenario == nil {
		t.Fatalf("retrylabtest: no scenario (Builtin, File or Custom makes one)")
	}
	if subject == nil {
		t.Fatalf("retrylabtest: no subject (Registered, Client or ScenarioSubject makes one)")
	}
	sc, err := scenario.scenario()
	if err != nil {
		t.Fatalf("retrylabtest: %v", err)
	}
	subj, err := subject.subject(sc)
	if err != nil {
		t.Fatalf("retrylabtest: %v", err)
	}
	if err := subjects.CheckVirtual(subj); err != nil {
		t.Fatalf("retrylabtest: %v (use `retrylab run` for it)", err)
	}
	aopts := analyzer.Options{Skip: cfg.skip}
	for _, s := range cfg.checks {
		spec, err := analyzer.ParseCheckSpec(s)
		if err != nil {
			t.Fatalf("retrylabtest: %v", err)
		}
		aopts.Checks = append(aopts.Checks, spec)
	}
	if err := aopts.Validate(); err != nil {
		t.Fatalf("retrylabtest: %v", err)
	}
	if cfg.policy != nil {
		c := *sc
		c.Subject.Policy = *cfg.policy
		sc = &c
	}
	return &prepared{sc: sc, subj: subj, cfg: cfg, aopts: aopts}
}

func (p *prepared) run(t testing.TB) *Result {
	t.Helper()
	return runVirtual(t, p.sc, p.subj, p.cfg, p.aopts)
}

func runVirtual(t testing.TB, sc *scenarios.Scenario, subj subjects.Subject, cfg config, aopts analyzer.Options) *Result {
	t.Helper()
	var buf bytes.Buffer
	sum, err := runner.Run(context.Background(), sc, runner.RunOptions{
		Subject:   subj,
		Clients:   cfg.clients,
		Requests:  cfg.requests,
		Processes: cfg.procs,
		Duration:  cfg.duration,
		Seed:      cfg.seed,
		Timeline:  &buf,
		Virtual:   true,
		Stagger:   DefaultStagger,
	})
	if err != nil {
		t.Fatalf("retrylabtest: %v", err)
		return nil
	}
	v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), aopts)
	if err != nil {
		t.Fatalf("retrylabtest: analyzing the timeline: %v", err)
		return nil
	}
	return &Result{Scenario: sc, Summary: sum, Timeline: buf.Bytes(), Hash: canonicalHash(buf.Bytes()), Verdict: v}
}

// canonicalHash hashes the first line, then the others sorted.
func canonicalHash(b []byte) string {
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) > 1 {
		slices.SortFunc(lines[1:], bytes.Compare)
	}
	h := sha256.New()
	for _, l := range lines {
		h.Write(l)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Failed returns the ids of the failed checks.
func (r *Result) Failed() []string { return r.Verdict.Failed() }

// AssertPass fails t unless the verdict is PASS: every check passed or
// was skipped and the run was carried out faithfully. Its message says
// what the verdict is instead: FAIL with the failed checks, or
// INCONCLUSIVE with the analyzer's reasons (Verdict.Inconclusive), then
// the verdict's text.
func (r *Result) AssertPass(t testing.TB) {
	t.Helper()
	if r.Verdict.Status != analyzer.VerdictPass {
		t.Errorf("retrylabtest: %s: %s; want PASS\n%s", r.title(), r.why(), r.verdictText())
	}
}

// AssertFails fails t unless the verdict is FAIL and each named check
// failed; with no names, unless the verdict is FAIL. An INCONCLUSIVE
// verdict (the run could not be vouched for, nothing failed) never
// satisfies it: its message lists the analyzer's reasons. A negative
// control uses it to prove a check bites.
func (r *Result) AssertFails(t testing.TB, checks ...string) {
	t.Helper()
	if r.Verdict.Status != analyzer.VerdictFail {
		t.Errorf("retrylabtest: %s: %s; want FAIL\n%s", r.title(), r.why(), r.verdictText())
		return
	}
	for _, id := range checks {
		c := r.Verdict.Check(id)
		switch {
		case c == nil:
			t.Errorf("retrylabtest: %s: no check %q in the verdict", r.title(), id)
		case c.Status != analyzer.StatusFail:
			t.Errorf("retrylabtest: %s: check %s is %s; want fail (%s)\n%s", r.title(), id, c.Status, r.why(), r.verdictText())
		}
	}
}

// title names the run: "scenario × subject".
func (r *Result) title() string {
	if r.Summary != nil {
		return r.Summary.Scenario + " × " + r.Summary.Subject
	}
	return r.Verdict.Figures.Scenario + " × " + r.Verdict.Figures.Subject
}

// why says what the verdict is and why: "the verdict is FAIL (checks
// failed: a, b)", "the verdict is INCONCLUSIVE (reason; reason)".
func (r *Result) why() string {
	v := r.Verdict
	status := strings.ToUpper(v.Status)
	if status == "" {
		status = "unset"
	}
	var parts []string
	if failed := v.Failed(); len(failed) > 0 {
		parts = append(parts, "checks failed: "+strings.Join(failed, ", "))
	}
	if len(v.Inconclusive) > 0 {
		if len(parts) > 0 {
			parts = append(parts, "inconclusive too: "+strings.Join(v.Inconclusive, "; "))
		} else {
			parts = append(parts, strings.Join(v.Inconclusive, "; "))
		}
	}
	if len(parts) == 0 {
		return "the verdict is " + status
	}
	return "the verdict is " + status + " (" + strings.Join(parts, "; ") + ")"
}

// AssertCheck fails t unless the named check has the given status
// (analyzer.StatusPass, StatusFail or StatusSkip).
func (r *Result) AssertCheck(t testing.TB, id, status string) {
	t.Helper()
	c := r.Verdict.Check(id)
	if c == nil || c.Status != status {
		got := "absent"
		if c != nil {
			got = c.Status
		}
		t.Errorf("retrylabtest: %s: check %s is %s; want %s\n%s", r.title(), id, got, status, r.verdictText())
	}
}

// WriteTimeline writes the timeline to path, for `retrylab analyze` or
// `retrylab report` when a test fails.
func (r *Result) WriteTimeline(path string) error {
	if err := os.WriteFile(path, r.Timeline, 0o644); err != nil {
		return fmt.Errorf("retrylabtest: %w", err)
	}
	return nil
}

func (r *Result) verdictText() string {
	var b strings.Builder
	analyzer.WriteText(&b, r.Verdict)
	return b.String()
}
