package reports

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	_ "github.com/retrylab/retrylab/subjects/thirdparty" // the scenarios' bad subjects include libraries
)

// judgedChecks selects the checks whose counts the report draws, so they
// judge even when a scenario's expect.checks leaves them out; extra specs
// set their parameters.
func judgedChecks(t *testing.T, extra ...string) analyzer.Options {
	t.Helper()
	var o analyzer.Options
	for _, s := range append([]string{analyzer.CheckRetryAfter, analyzer.CheckJitterBounds}, extra...) {
		spec, err := analyzer.ParseCheckSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		o.Checks = append(o.Checks, spec)
	}
	return o
}

// assertAgree analyzes data as `retrylab analyze` does and collects it as a
// report does (each on its own pass), and fails unless the report's retry
// counts are the verdict's. It returns the report's figures.
func assertAgree(t *testing.T, name string, data []byte, aopts analyzer.Options) Stats {
	t.Helper()
	v, err := analyzer.Analyze(bytes.NewReader(data), aopts)
	if err != nil {
		t.Fatalf("%s: analyze: %v", name, err)
	}
	c, err := Collect(bytes.NewReader(data), Options{Analyzer: aopts})
	if err != nil {
		t.Fatalf("%s: collect: %v", name, err)
	}
	s := c.Stats()

	ra := v.Check(analyzer.CheckRetryAfter)
	raJudged, raBad := int64(0), int64(0)
	if ra.Status != analyzer.StatusSkip {
		raJudged, raBad = ra.Samples, int64(ra.Figure)
	}
	if s.RetryAfterRetries != raJudged || s.EarlyRetries != raBad {
		t.Errorf("%s: report: %d retries after a usable Retry-After, %d early; verdict: retry-after %s judged %d, %d bad (%s)",
			name, s.RetryAfterRetries, s.EarlyRetries, ra.Status, raJudged, raBad, ra.Reason)
	}
	jb := v.Check(analyzer.CheckJitterBounds)
	if jb.Status != analyzer.StatusSkip {
		bad := int64(math.Round(jb.Figure * float64(jb.Samples) / 100))
		if s.OwnDelays != jb.Samples || s.BeyondBound != bad {
			t.Errorf("%s: report: %d own delays, %d beyond the bound; verdict: jitter-bounds judged %d, %d bad (%s)",
				name, s.OwnDelays, s.BeyondBound, jb.Samples, bad, jb.Reason)
		}
	} else if s.BeyondBound != 0 {
		t.Errorf("%s: report: %d beyond the bound; verdict: jitter-bounds skipped (%s)", name, s.BeyondBound, jb.Reason)
	}
	f := v.Figures
	if s.ServerPaced != f.ServerPaced || s.ClientPaced != f.ClientPaced || s.Retries != f.Retries {
		t.Errorf("%s: report: %d server-paced, %d client-paced of %d retries; verdict: %d, %d of %d",
			name, s.ServerPaced, s.ClientPaced, s.Retries, f.ServerPaced, f.ClientPaced, f.Retries)
	}
	if s.Outcomes == 0 && s.Requests != f.Requests {
		t.Errorf("%s: report: %d logical requests; verdict: %d", name, s.Requests, f.Requests)
	}
	// The one-pass verdict is the verdict.
	if got := c.Verdict(); got.Status != v.Status || len(got.Failed()) != len(v.Failed()) {
		t.Errorf("%s: the collector's verdict %s %v; analyze: %s %v", name, got.Status, got.Failed(), v.Status, v.Failed())
	}
	return s
}

// shuffleLines swaps neighbouring records (never the meta, never the end
// record) now and then, as a recorder racing a fast retry writes them.
func shuffleLines(data []byte, seed uint64) []byte {
	lines := bytes.SplitAfter(data, []byte("\n"))
	r := rand.New(rand.NewPCG(seed, 3))
	for i := 2; i < len(lines); i++ {
		if len(lines[i]) > 0 && !bytes.Contains(lines[i], []byte(`"type":"end"`)) && r.IntN(3) == 0 {
			lines[i-1], lines[i] = lines[i], lines[i-1]
		}
	}
	return bytes.Join(lines, nil)
}

// TestReportAgreesWithVerdictBuiltins: on every built-in scenario, run in
// virtual time with a small fleet by the reference client and by a client
// with the scenario's mistake, the report counts what the verdict judged.
func TestReportAgreesWithVerdictBuiltins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every built-in scenario")
	}
	// Besides the reference client, clients with the scenario's mistake
	// (as TestBuiltinsJudge has them) and, for the bound, one that waits
	// up to 1.5 times it (capped-lockstep).
	cases := []struct {
		scenario          string
		bad               []string
		clients, requests int
	}{
		{"budget-trip", []string{"unbounded"}, 20, 0},
		{"flapping", []string{"exp-no-jitter", "capped-lockstep"}, 20, 3},
		{"malformed-retry-after", []string{"unbounded"}, 20, 0},
		// The full fleet (its load is its size), through the trigger.
		{"metastable", []string{"exp-no-jitter"}, 0, 80},
		// One-request clients arriving at 200/s: 1,600 last through the
		// trigger (5-10 s) and into the recovery.
		{"metastable-open", []string{"no-retry-budget"}, 1600, 0},
		{"non-retryable", []string{"retry-4xx"}, 20, 5},
		{"outage-bare", []string{"exp-no-jitter", "capped-lockstep"}, 30, 0},
		{"outage-date", []string{"ignore-retry-after"}, 30, 0},
		{"outage-delta", []string{"ignore-retry-after"}, 30, 0},
		{"post-idempotency", []string{"retryablehttp"}, 20, 0},
		{"quota-layered", []string{"no-pacing"}, 10, 0},
		{"quota-steady", []string{"retryablehttp"}, 20, 10},
		{"quota-tiers", []string{"retryablehttp"}, 10, 0},
		{"slow-server", []string{"retryablehttp"}, 20, 0},
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.scenario)
	}
	if want := scenarios.BuiltinNamesOf("http"); len(names) != len(want) {
		t.Fatalf("cases %v; want every built-in %v", names, want)
	}
	var total Stats
	for i, c := range cases {
		if c.scenario != scenarios.BuiltinNamesOf("http")[i] {
			t.Fatalf("case %d is %s; want %s", i, c.scenario, scenarios.BuiltinNamesOf("http")[i])
		}
		if testenv.RaceEnabled && (c.scenario == "metastable" || c.scenario == "metastable-open") {
			// Thousands of attempts through the trigger: `make matrix`
			// runs this test without the race detector, these rows too.
			t.Logf("%s: not under -race (make matrix runs it without)", c.scenario)
			continue
		}
		for _, subject := range append([]string{"retrylab"}, c.bad...) {
			if _, err := subjects.Lookup(subject); err != nil {
				t.Fatalf("%s: %v", subject, err)
			}
			opts := []retrylabtest.Option{retrylabtest.WithClients(c.clients)}
			if c.requests > 0 {
				opts = append(opts, retrylabtest.WithRequests(c.requests))
			}
			res := retrylabtest.Run(t, retrylabtest.Builtin(c.scenario), retrylabtest.Registered(subject), opts...)
			name := c.scenario + "/" + subject
			s := assertAgree(t, name, res.Timeline, judgedChecks(t))
			assertAgree(t, name+" (shuffled)", shuffleLines(res.Timeline, uint64(i)), judgedChecks(t))
			total.RetryAfterRetries += s.RetryAfterRetries
			total.EarlyRetries += s.EarlyRetries
			total.OwnDelays += s.OwnDelays
			total.BeyondBound += s.BeyondBound
			total.ServerPaced += s.ServerPaced
			total.ClientPaced += s.ClientPaced
		}
	}
	t.Logf("over every scenario: %d after Retry-After (%d early), %d own delays (%d beyond), %d server-, %d client-paced", total.RetryAfterRetries, total.EarlyRetries, total.OwnDelays, total.BeyondBound, total.ServerPaced, total.ClientPaced)
	// The runs exercise every count, so agreement is not agreement on
	// zeros.
	if total.RetryAfterRetries == 0 || total.EarlyRetries == 0 || total.OwnDelays == 0 || total.BeyondBound == 0 || total.ServerPaced == 0 || total.ClientPaced == 0 {
		t.Errorf("over every scenario: %+v; want each retry count above 0", total)
	}
}

// TestReportAgreesWithVerdictSynthetic: on synthetic timelines in order and
// with records out of order, and with the checks' tolerances set as
// `--check retry-after:tolerance=…` sets them, the report counts what the
// verdict judged, and the tolerances change both alike.
func TestReportAgreesWithVerdictSynthetic(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (synth{clients: 60, requests: 4, seed: 7}).write(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	shuffled := shuffleLines(data, 1)
	if bytes.Equal(shuffled, data) {
		t.Fatal("shuffleLines changed nothing")
	}
	def := assertAgree(t, "synthetic", data, judgedChecks(t))
	assertAgree(t, "synthetic, shuffled", shuffled, judgedChecks(t))
	wide := judgedChecks(t, "retry-after:tolerance=0.5", "jitter-bounds:tolerance=0.5")
	loose := assertAgree(t, "synthetic, wide tolerances", data, wide)
	assertAgree(t, "synthetic, shuffled, wide tolerances", shuffled, wide)
	if def.EarlyRetries == 0 || def.BeyondBound == 0 {
		t.Fatalf("default tolerances: %d early, %d beyond the bound; want some of each", def.EarlyRetries, def.BeyondBound)
	}
	if loose.EarlyRetries >= def.EarlyRetries || loose.BeyondBound >= def.BeyondBound {
		t.Errorf("0.5s tolerances: %d early, %d beyond; want fewer than the default's %d, %d", loose.EarlyRetries, loose.BeyondBound, def.EarlyRetries, def.BeyondBound)
	}
	// The plots state the tolerance in force.
	c, err := Collect(bytes.NewReader(data), Options{Analyzer: wide})
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.Tolerance != 500*time.Millisecond || c.opts.BoundTolerance != 500*time.Millisecond {
		t.Errorf("collector tolerances %v, %v; want the options' 500ms, 500ms", c.opts.Tolerance, c.opts.BoundTolerance)
	}
	// A serve recording, whose keys are reused after a success.
	assertAgree(t, "serve recording", serveTimeline().Bytes(), judgedChecks(t))
	// A bad option is an error, not a silently different classification.
	if _, err := Collect(bytes.NewReader(data), Options{Analyzer: analyzer.Options{Skip: []string{"nope"}}}); err == nil {
		t.Errorf("Collect with an unknown check id succeeded")
	}
}
