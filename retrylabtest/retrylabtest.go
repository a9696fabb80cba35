// Package retrylabtest owns retrylab's `go test` helpers: a scenario run in
// virtual time (a testing/synctest bubble over an in-memory network) and
// assertions on the analyzer's verdict, so a library's retry logic is gated
// by its own unit tests in seconds.
package retrylabtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// An Option tunes Run.
type Option func(*config)

type config struct {
	seed     int64
	clients  int
	requests int
	duration time.Duration
	stagger  time.Duration
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

// WithPolicy replaces the scenario's subject policy.
func WithPolicy(p subjects.Policy) Option { return func(c *config) { c.policy = &p } }

// WithStagger sets the gap between client start instants (DefaultStagger
// otherwise; 0 starts a burst fleet at one instant, which makes the
// timeline's order depend on scheduling).
func WithStagger(d time.Duration) Option { return func(c *config) { c.stagger = d } }

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

// Run plays scenario against subject in virtual time and returns the
// result; it fails t (t.Fatal) when the scenario, the subject or the run
// itself is broken, never because of the verdict: assert that with the
// Result's methods.
//
// scenario is a built-in name, a file path (see scenarios.Resolve) or a
// *scenarios.Scenario; subject is a subjects.Lookup name or a
// subjects.Subject — typically the library author's own adapter.
//
// With a *testing.T, Run wraps the run in synctest.Test; called inside a
// bubble already, it runs there. With another testing.TB (a benchmark), it
// runs the bubble in an inner test. Everything the run creates — server,
// transport, in-memory network, contexts — lives inside the bubble, and the
// run shuts down by closing idle connections and then the server, so the
// bubble ends cleanly. A 60-second scenario with 1000 clients takes a few
// CPU-seconds.
func Run(t testing.TB, scenario any, subject any, opts ...Option) *Result {
	t.Helper()
	cfg := config{seed: DefaultSeed, stagger: DefaultStagger}
	for _, o := range opts {
		o(&cfg)
	}
	sc, err := resolveScenario(scenario)
	if err != nil {
		t.Fatalf("retrylabtest: %v", err)
	}
	subj, err := resolveSubject(subject, sc)
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

	var res *Result
	body := func(t testing.TB) { res = runVirtual(t, sc, subj, cfg, aopts) }
	switch tt := t.(type) {
	case *testing.T:
		if inBubble() {
			body(tt)
		} else {
			synctest.Test(tt, func(t *testing.T) { body(t) })
		}
	default:
		if inBubble() {
			body(t)
			break
		}
		ok := testing.RunTests(func(string, string) (bool, error) { return true, nil },
			[]testing.InternalTest{{Name: t.Name() + "/retrylabtest", F: func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { body(t) })
			}}})
		if !ok {
			t.Fatalf("retrylabtest: the virtual run of %s failed (see above)", sc.Name)
		}
	}
	if res == nil {
		t.FailNow() // the bubble failed and said why
	}
	return res
}

// inBubble reports whether the calling goroutine is in a synctest bubble.
func inBubble() (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	synctest.Wait()
	return true
}

func runVirtual(t testing.TB, sc *scenarios.Scenario, subj subjects.Subject, cfg config, aopts analyzer.Options) *Result {
	t.Helper()
	var buf bytes.Buffer
	sum, err := runner.Run(context.Background(), sc, runner.RunOptions{
		Subject:  subj,
		Clients:  cfg.clients,
		Requests: cfg.requests,
		Duration: cfg.duration,
		Seed:     cfg.seed,
		Timeline: &buf,
		Virtual:  true,
		Stagger:  cfg.stagger,
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

func resolveScenario(s any) (*scenarios.Scenario, error) {
	switch v := s.(type) {
	case *scenarios.Scenario:
		if v == nil {
			return nil, fmt.Errorf("nil scenario")
		}
		return v, nil
	case string:
		return scenarios.Resolve(v)
	}
	return nil, fmt.Errorf("scenario %T: want a name, a path or a *scenarios.Scenario", s)
}

func resolveSubject(s any, sc *scenarios.Scenario) (subjects.Subject, error) {
	switch v := s.(type) {
	case subjects.Subject:
		if v == nil {
			return nil, fmt.Errorf("nil subject")
		}
		return v, nil
	case string:
		if v == "" {
			v = sc.Subject.Name
		}
		return subjects.Lookup(v)
	case nil:
		return subjects.Lookup(sc.Subject.Name)
	}
	return nil, fmt.Errorf("subject %T: want a name or a subjects.Subject", s)
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
