package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/reports"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

type runOptions struct {
	subject   string
	clients   int
	processes int
	requests  int
	seed      int64
	duration  time.Duration
	out       string
	quiet     bool
	noReport  bool
	verdict   verdictFlags
	// noDetach: wait for every run's fleet to wind down (compare runs
	// again in the same process).
	noDetach bool
	// runID names the run's quota in Redis (a redis:// backend), so that
	// each run starts with it whole: its directory's name by default.
	runID string
	// spread: run's own flags for a fleet spread over processes.
	spread spreadFlags
	// policy is --policy as written; stated, what it states once
	// validate has read it (it replaces the scenario's subject.policy).
	policy string
	stated *subjects.Policy
}

func (o *runOptions) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&o.subject, "subject", "", "library under test: a `NAME` from 'retrylab subjects', or exec:COMMAND (default: the scenario's, else retrylab)")
	fs.IntVar(&o.clients, "clients", 0, "simulated clients, at least 1 (default: the scenario's)")
	fs.IntVar(&o.processes, "processes", 0, "group the clients into `N` processes, each sharing one instance of the subject, at least 1 (default: the scenario's fleet.processes, else one per client)")
	fs.IntVar(&o.requests, "requests", 0, "logical requests per client, at least 1 (default: the scenario's)")
	fs.Int64Var(&o.seed, "seed", 1, "seed for arrivals, jitter sources and the stub's draws")
	fs.DurationVar(&o.duration, "duration", 0, "hard cap on the run, above 0 (default: the scenario's); requests in flight then become canceled, and a run the cap cut short is INCONCLUSIVE (exit 3)")
	fs.StringVar(&o.out, "out", "out", "create the run's own directory (SCENARIO-SUBJECT-TIME; compare: compare-SCENARIO-TIME) under `DIR`")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bars")
	fs.BoolVar(&o.noReport, "no-report", false, "skip the HTML report and plots")
	fs.StringVar(&o.policy, "policy", "", "the subject's retry policy, `KEY=VALUE,...` with the keys of the scenario's subject.policy (base, cap, max_attempts, budget, jitter, rate, burst, timeout), e.g. max_attempts=8,budget=6s,base=200ms,cap=4s,jitter=full; it replaces the scenario's: a subject built on a policy follows it, an exec: program states it, and the checks judge against it")
}

// validate checks the flags that scenario loading does not. set reports
// whether a flag was given: an explicit 0 is refused rather than read as
// "the scenario's value".
func (o *runOptions) validate(set func(name string) bool) error {
	switch {
	case o.clients < 0 || o.clients > scenarios.MaxClients || (o.clients == 0 && set("clients")):
		return usagef("--clients must be between 1 and %d, got %d (omit it for the scenario's)", scenarios.MaxClients, o.clients)
	case o.processes < 0 || o.processes > scenarios.MaxClients || (o.processes == 0 && set("processes")):
		return usagef("--processes must be between 1 and %d, got %d (omit it for the scenario's)", scenarios.MaxClients, o.processes)
	case o.requests < 0 || o.requests > scenarios.MaxRequests || (o.requests == 0 && set("requests")):
		return usagef("--requests must be between 1 and %d, got %d (omit it for the scenario's)", scenarios.MaxRequests, o.requests)
	case o.duration < 0 || o.duration > scenarios.MaxDuration || (o.duration == 0 && set("duration")):
		return usagef("--duration must be above 0 and at most %v, got %v (omit it for the scenario's)", scenarios.MaxDuration, o.duration)
	case o.out == "":
		return usagef("--out must name a directory")
	}
	if set("policy") {
		p, err := scenarios.ParsePolicy(o.policy)
		if err != nil {
			return usagef("--policy: %v", err)
		}
		o.stated = &p
	}
	return nil
}

// applyPolicy puts --policy, when given, in place of the scenario's
// subject.policy, so that the subject, the timeline's meta (and so the
// checks) and the scenario recorded in it all read it.
func (o *runOptions) applyPolicy(sc *scenarios.Scenario) {
	if o.stated != nil {
		sc.Subject.Policy = *o.stated
	}
}

// checkWritable finds out, before a run starts, whether the output files
// and directories the flags name can be written: a run must not be spent
// and then lost to a typo. Missing parent directories are created, as the
// writes would. Errors are bad input naming the flag.
func checkWritable(outDir string, files map[string]string) error {
	if outDir != "" {
		if err := probeDir(outDir); err != nil {
			return usagef("--out %s: %v", outDir, err)
		}
	}
	flags := make([]string, 0, len(files))
	for f := range files {
		flags = append(flags, f)
	}
	sort.Strings(flags)
	for _, flag := range flags {
		path := files[flag]
		if path == "" || path == Stdout {
			continue
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return usagef("%s %s: is a directory", flag, path)
		}
		if err := probeDir(filepath.Dir(path)); err != nil {
			return usagef("%s %s: %v", flag, path, err)
		}
	}
	return nil
}

// probeDir creates dir if needed and checks that a file can be created in
// it.
func probeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".retrylab-probe*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// resolveRun loads the scenario and the subject the flags name.
func resolveRun(arg, subjectFlag string) (*scenarios.Scenario, subjects.Subject, error) {
	sc, err := scenarios.Resolve(arg)
	if err != nil {
		return nil, nil, badInput(err)
	}
	if err := checkBackend(sc); err != nil {
		return nil, nil, err
	}
	if sc.Server.Upstream != "" {
		return nil, nil, badInput(fmt.Errorf("%s: %w (server.upstream %s); serve it with 'retrylab serve --scenario %s' in front of your application", sc.File, runner.ErrUpstream, sc.Server.Upstream, sc.File))
	}
	name := subjectFlag
	if name == "" {
		name = sc.Subject.Name
	}
	subj, err := subjects.Lookup(name)
	if err != nil {
		if subjectFlag != "" {
			return nil, nil, usagef("--subject %q: %v (see 'retrylab subjects')", subjectFlag, err)
		}
		return nil, nil, badInput(fmt.Errorf("%s: subject %q: %w", sc.File, name, err))
	}
	if err := runner.CheckProtocol(sc, subj); err != nil {
		if subjectFlag != "" {
			return nil, nil, usagef("--subject %q: %v", subjectFlag, err)
		}
		return nil, nil, badInput(fmt.Errorf("%s: %w", sc.File, err))
	}
	return sc, subj, nil
}

func cmdRun(ctx context.Context, e *env, args []string) error {
	var o runOptions
	fs := newFlags("run", e)
	o.register(fs)
	o.verdict.register(fs)
	o.spread.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("run takes one scenario (a built-in name or a file), got %d arguments", fs.NArg())
	}
	if err := o.validate(fs.Changed); err != nil {
		return err
	}
	if err := o.spread.validate(&o.verdict); err != nil {
		return err
	}
	e, err := o.verdict.redirect(e)
	if err != nil {
		return err
	}
	aopts, err := o.verdict.options()
	if err != nil {
		return err
	}
	sc, subj, err := resolveRun(fs.Arg(0), o.subject)
	if err != nil {
		return err
	}
	o.applyPolicy(sc)
	if _, ok := subj.(subjects.Program); ok && o.spread.any() {
		return usagef("--target, --shard and --epoch need a goroutine subject: an exec subject's fleet starts every process before the in-process stub opens the scenario")
	}
	if err := o.spread.checkScenario(sc, o.clients, o.duration); err != nil {
		return err
	}
	if err := checkWritable(o.out, o.verdict.files()); err != nil {
		return err
	}

	name := fmt.Sprintf("%s-%s-%s", sc.Name, runner.SafeName(subj.Name()), time.Now().Format("20060102-150405"))
	if sh := o.spread.shard.s; !sh.Whole() {
		name += fmt.Sprintf("-shard-%dof%d", sh.Index, sh.Count)
	}
	dir, err := runner.NewRunDir(o.out, name)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	sum, err := runOnce(ctx, e, sc, subj, o, dir)
	if sum != nil {
		printSummary(e.stdout, sum, policyLine(sc, subj))
		printHarness(e.stderr, sum)
	}
	if err != nil {
		return err
	}
	if o.spread.target != "" {
		// Nothing to judge here: the attempts are in the stubs' recordings.
		fmt.Fprintf(e.stdout, "fleet only: merge this timeline with the stubs' recordings and every other shard's, then analyze the result:\n  retrylab merge -o merged.ndjson STUB.ndjson... %s...\n", sum.TimelinePath)
		return nil
	}

	v, col, err := judgeFile(sum.TimelinePath, aopts, !o.noReport)
	if err != nil {
		return err
	}
	// The report is written even when a verdict file cannot be: a run
	// already made loses nothing.
	emitErr := o.verdict.emit(e, v)
	if col != nil {
		rep, err := col.Write(dir, v)
		if err != nil {
			return errors.Join(emitErr, fmt.Errorf("report: %w", err))
		}
		fmt.Fprintf(e.stdout, "report: %s\n", rep.HTML)
	}
	if emitErr != nil {
		return emitErr
	}
	return verdictErr(v)
}

// runOnce plays one scenario into dir/timeline.ndjson (dir was made for
// this run by runner.NewRunDir) with progress bars when stderr is a
// terminal. A run stopped by ctx (SIGINT) still flushes its timeline and
// returns its summary. When the timeline could not be written the run
// stopped at the first write error: runOnce returns the summary and an
// error naming the file (exit 3).
func runOnce(ctx context.Context, e *env, sc *scenarios.Scenario, subj subjects.Subject, o runOptions, dir string) (*runner.Summary, error) {
	ropts, done, err := runSetup(e, sc, subj, o, dir)
	if err != nil {
		return nil, err
	}
	sum, err := runner.RunInDir(ctx, sc, ropts, dir, e.createTimeline)
	done()
	var ce *runner.CreateError
	if errors.As(err, &ce) {
		return nil, fmt.Errorf("--out: %w", err)
	}
	return runResult(e, sum, err)
}

// runSetup is a run's options from the flags: the quota backend (its
// Redis keys named after the run), the progress bars; done closes them
// once the run is over.
func runSetup(e *env, sc *scenarios.Scenario, subj subjects.Subject, o runOptions, dir string) (ropts runner.RunOptions, done func(), err error) {
	runID := o.runID
	if runID == "" {
		runID = filepath.Base(dir)
	}
	newLimiter, closeBackend, err := quotaBackend(sc.Server, runPrefix(runID))
	if err != nil {
		return ropts, nil, err
	}
	bars := newProgressBars(e, o.quiet, fmt.Sprintf("%s · %s", sc.Name, subj.Name()))
	ropts = runner.RunOptions{
		Subject:    subj,
		Clients:    o.clients,
		Processes:  o.processes,
		Requests:   o.requests,
		Duration:   o.duration,
		Seed:       o.seed,
		Progress:   bars.update,
		Tool:       version,
		Detach:     e.exits && !o.noDetach,
		NewLimiter: newLimiter,
		Probe:      probeCommand(),
	}
	o.spread.options(&ropts)
	return ropts, func() {
		bars.finish()
		closeBackend()
	}, nil
}

// runResult is what a command makes of a run's summary and error: a
// timeline that could not be written stops the command (exit 3); any
// other error with a summary is printed and the run judged.
func runResult(e *env, sum *runner.Summary, err error) (*runner.Summary, error) {
	var te *runner.TimelineError
	switch {
	case err == nil:
	case sum == nil:
		return nil, err
	case errors.As(err, &te):
		return sum, fmt.Errorf("the run stopped because its timeline could not be written: %w", err)
	default:
		fmt.Fprintf(e.stderr, "retrylab: %v\n", err)
	}
	return sum, nil
}

// analyzeFile judges the timeline at path; a missing or malformed file,
// or a directory, is bad input naming it.
func analyzeFile(path string, opts analyzer.Options) (*analyzer.Verdict, error) {
	f, err := openTimeline(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := analyzer.Analyze(f, opts)
	if err != nil {
		return nil, timelineInputErr(path, err)
	}
	return v, nil
}

// judgeFile gives the verdict on the timeline at path and, when report is
// set, the collector that draws its report: one pass over the timeline,
// the report's figures the facts of the verdict's own analyzer.
func judgeFile(path string, opts analyzer.Options, report bool) (*analyzer.Verdict, *reports.Collector, error) {
	if !report {
		v, err := analyzeFile(path, opts)
		return v, nil, err
	}
	col, err := collectFile(path, opts)
	if err != nil {
		return nil, nil, err
	}
	return col.Verdict(), col, nil
}

// collectFile reads the timeline at path once for both the verdict and the
// report: the collector's analyzer runs with opts (Collector.Verdict) and
// the report draws its facts. Errors are analyzeFile's.
func collectFile(path string, opts analyzer.Options) (*reports.Collector, error) {
	f, err := openTimeline(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := reports.Collect(f, reports.Options{Analyzer: opts})
	if errors.Is(err, reports.ErrEmpty) {
		err = analyzer.ErrNoRecords // as analyze says it
	}
	if err != nil {
		return nil, timelineInputErr(path, err)
	}
	return c, nil
}

// openTimeline opens the timeline file at path; a missing file or a
// directory is bad input naming it.
func openTimeline(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, usagef("%s is a directory, not a timeline file (a run's is %s)", path, filepath.Join(path, "timeline.ndjson"))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, badInput(err)
	}
	return f, nil
}

// policyLine says which retry policy the run's checks judge the subject
// against (the one its timeline's meta states), and, when it states none,
// what that leaves unjudged and how to state one.
func policyLine(sc *scenarios.Scenario, subj subjects.Subject) string {
	p := sc.StatedPolicy(subj, false)
	if p == nil {
		amp := 5.0
		if c, ok := analyzer.LookupCheck(analyzer.CheckAmplification); ok {
			amp = c.Threshold.Num
		}
		return fmt.Sprintf("none stated: attempts skips without a threshold, jitter-bounds skips, budget judges only hung requests, amplification is held to its default %g attempts/request and instant-retry to its default share; state it with subject.policy or --policy", amp)
	}
	st := subjects.Stated{Base: time.Duration(p.Base), Cap: time.Duration(p.Cap), MaxAttempts: p.MaxAttempts,
		Budget: time.Duration(p.Budget), Jitter: p.Jitter}
	return "stated " + st.String() + " (attempts, amplification, budget, jitter-bounds and instant-retry judge against it)"
}

// printSummary prints the run's summary; policy is policyLine's.
func printSummary(w io.Writer, s *runner.Summary, policy string) {
	fmt.Fprintf(w, "run: %s · subject %s · seed %d · %d clients", s.Scenario, s.Subject, s.Seed, s.Clients)
	if s.Shard != "" {
		fmt.Fprintf(w, " (shard %s)", s.Shard)
	}
	if s.Target != "" {
		fmt.Fprintf(w, " · target %s", s.Target)
	}
	fmt.Fprintln(w)
	var parts []string
	keys := make([]string, 0, len(s.Results))
	for k := range s.Results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.Results[k]))
	}
	fmt.Fprintf(w, "  logical requests: %d of %d (%s)\n", s.Requests, s.Planned, strings.Join(parts, ", "))
	if g := s.Results[timeline.ResultGaveUp]; g > 0 {
		fmt.Fprintf(w, "  %s\n", gaveUpLine(g, s.Shed))
	}
	sent := ""
	if s.Target != "" {
		sent = " sent"
	}
	fmt.Fprintf(w, "  attempts%s: %d (429: %d, 503: %d)\n", sent, s.Attempts, s.Throttled429, s.Unavailable503)
	stopped := "all requests done"
	switch s.Stopped {
	case runner.StoppedDuration:
		stopped = "stopped at the duration cap"
	case runner.StoppedCanceled:
		stopped = "interrupted"
		if s.End.Signal != "" {
			stopped += " by " + s.End.Signal
		}
	case runner.StoppedWriteError:
		stopped = "stopped: the timeline could not be written"
	}
	fmt.Fprintf(w, "  run time: %v (%s; over at %v); start lateness p50 %v, p99 %v\n", s.Elapsed.Round(time.Millisecond), stopped,
		s.Flushed.Round(time.Millisecond), s.StartLateness.P50, s.StartLateness.P99)
	if policy != "" {
		fmt.Fprintf(w, "  policy: %s\n", policy)
	}
	for _, f := range harnessFacts(s) {
		fmt.Fprintf(w, "  harness: %s\n", f)
	}
	fmt.Fprintf(w, "  timeline: %s (%d bytes)\n\n", s.TimelinePath, s.TimelineBytes)
}

// gaveUpLine says what the gave-up outcomes were: how many the subject's
// retry budget shed (by design: under overload it refuses retries so that
// the server can recover), and what the give-up check makes of them, so a
// PASS with thousands given up is not read as a contradiction.
func gaveUpLine(gaveUp, shed int64) string {
	line := fmt.Sprintf("gave-up %d", gaveUp)
	switch {
	case shed == gaveUp:
		line += ", all shed by the subject's retry budget"
	case shed > 0:
		line += fmt.Sprintf(", %d of them shed by the subject's retry budget", shed)
	}
	if shed > 0 {
		line += " (it refused their retries once retries had spent their share of its calls: under overload, that is how a client lets the server recover)"
	}
	return line + "; give-up fails only requests given up although the server was serving within their budget (not down, not overloaded by the scenario's trigger): its line in the verdict says whether it ran"
}

// harnessFacts are what a user must know about how the run was carried
// out before reading its verdict: what was cut short, what the harness
// itself failed at.
func harnessFacts(s *runner.Summary) []string {
	var facts []string
	e := s.End
	if e.InFlight > 0 || e.Unstarted > 0 {
		facts = append(facts, fmt.Sprintf("%d logical requests in flight when the run stopped (canceled), %d never started", e.InFlight, e.Unstarted))
	}
	if e.DialErrors > 0 {
		facts = append(facts, fmt.Sprintf("%d dial/accept errors on the harness's side of loopback (descriptor exhaustion?)", e.DialErrors))
	}
	if s.Harness > 0 {
		facts = append(facts, fmt.Sprintf("%d logical requests failed in the subject's plumbing, not its retry logic", s.Harness))
	}
	for _, m := range e.Errors {
		facts = append(facts, m)
	}
	return facts
}

// printHarness says on stderr, in one line, when the subject's plumbing
// failed (an exec program that could not start, broke the line protocol,
// exited non-zero or printed nothing), so it is not mistaken for the
// library's behaviour.
func printHarness(w io.Writer, s *runner.Summary) {
	if s.Harness == 0 {
		return
	}
	first := ""
	for _, m := range s.End.Errors {
		if msg, ok := strings.CutPrefix(m, "subject plumbing: "); ok {
			first = ": " + msg
			break
		}
	}
	fmt.Fprintf(w, "retrylab: the subject's plumbing failed for %d of %d logical requests%s\n", s.Harness, s.Planned, first)
}

// progressBars draws the run's progress on stderr: logical requests done
// of total with elapsed time and ETA, and the attempt, 429 and 503 counts.
// It draws nothing when stderr is not a terminal or with --quiet.
type progressBars struct {
	p                    *mpb.Progress
	bar                  *mpb.Bar
	attempts, t429, t503 atomic.Int64
	done, total          atomic.Int64
}

func newProgressBars(e *env, quiet bool, name string) *progressBars {
	b := &progressBars{}
	if quiet || !e.tty {
		return b
	}
	b.p = mpb.New(mpb.WithOutput(e.stderr), mpb.WithAutoRefresh(), mpb.WithRefreshRate(150*time.Millisecond))
	b.bar = b.p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(
			decor.Name(name+" ", decor.WCSyncSpaceR),
			decor.CountersNoUnit("%d/%d requests", decor.WCSyncWidth),
		),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string {
				return fmt.Sprintf("attempts %d · 429 %d · 503 %d", b.attempts.Load(), b.t429.Load(), b.t503.Load())
			}, decor.WC{W: 5}),
			decor.Name(" · "),
			decor.Elapsed(decor.ET_STYLE_GO),
			decor.Name(" · ETA "),
			decor.AverageETA(decor.ET_STYLE_GO),
		),
	)
	return b
}

func (b *progressBars) update(p runner.Progress) {
	b.attempts.Store(p.Attempts)
	b.t429.Store(p.Throttled429)
	b.t503.Store(p.Unavailable503)
	b.done.Store(p.Done)
	b.total.Store(p.Total)
	if b.bar != nil {
		b.bar.SetTotal(p.Total, false)
		b.bar.SetCurrent(p.Done)
	}
}

// finish draws the last frame: a full bar when every request was done, the
// bar as it stood otherwise (an interrupted run).
func (b *progressBars) finish() {
	if b.p == nil {
		return
	}
	if b.done.Load() >= b.total.Load() {
		b.bar.SetTotal(-1, true)
	} else {
		b.bar.Abort(false)
	}
	b.p.Wait()
}

// files are the verdict files the flags name, by flag.
func (v *verdictFlags) files() map[string]string {
	return map[string]string{"--json": v.json, "--junit": v.junit, "--markdown": v.markdown}
}
