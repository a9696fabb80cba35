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
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

const runUsage = "run SCENARIO|FILE [--subject NAME] [--clients N] [--requests N] [--seed N] [--duration D] [--out DIR] [--quiet] [--no-report] [--check ...] [--json F] [--junit F] [--markdown F]"

type runOptions struct {
	subject  string
	clients  int
	requests int
	seed     int64
	duration time.Duration
	out      string
	quiet    bool
	noReport bool
	verdict  verdictFlags
}

func (o *runOptions) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&o.subject, "subject", "", "library under test: a name from 'retrylab subjects', or exec:COMMAND (default: the scenario's, else retrylab)")
	fs.IntVar(&o.clients, "clients", 0, "simulated clients (default: the scenario's)")
	fs.IntVar(&o.requests, "requests", 0, "logical requests per client (default: the scenario's)")
	fs.Int64Var(&o.seed, "seed", 1, "seed for arrivals, jitter sources and the stub's draws")
	fs.DurationVar(&o.duration, "duration", 0, "hard cap on the run (default: the scenario's)")
	fs.StringVar(&o.out, "out", "out", "write the run's directory under `DIR`")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bars")
	fs.BoolVar(&o.noReport, "no-report", false, "skip the HTML report and plots")
}

// validate checks the flags that scenario loading does not.
func (o *runOptions) validate() error {
	switch {
	case o.clients < 0 || o.clients > scenarios.MaxClients:
		return usagef("--clients must be between 1 and %d, got %d", scenarios.MaxClients, o.clients)
	case o.requests < 0 || o.requests > scenarios.MaxRequests:
		return usagef("--requests must be between 1 and %d, got %d", scenarios.MaxRequests, o.requests)
	case o.duration < 0 || o.duration > scenarios.MaxDuration:
		return usagef("--duration must be between 0 and %v, got %v", scenarios.MaxDuration, o.duration)
	case o.out == "":
		return usagef("--out must name a directory")
	}
	return nil
}

// resolveRun loads the scenario and the subject the flags name.
func resolveRun(arg, subjectFlag string) (*scenarios.Scenario, subjects.Subject, error) {
	sc, err := scenarios.Resolve(arg)
	if err != nil {
		return nil, nil, badInput(err)
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
	return sc, subj, nil
}

func cmdRun(ctx context.Context, e *env, args []string) error {
	var o runOptions
	fs := newFlags("run", runUsage, e)
	o.register(fs)
	o.verdict.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("run takes one scenario (a built-in name or a file), got %d arguments", fs.NArg())
	}
	if err := o.validate(); err != nil {
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

	dir := filepath.Join(o.out, fmt.Sprintf("%s-%s-%s", sc.Name, safeName(subj.Name()), time.Now().Format("20060102-150405")))
	sum, err := runOnce(ctx, e, sc, subj, o, dir)
	if err != nil {
		return err
	}
	printSummary(e.stdout, sum)

	v, err := analyzeFile(sum.TimelinePath, aopts)
	if err != nil {
		return err
	}
	// The report is written even when a verdict file cannot be: a run
	// already made loses nothing.
	emitErr := o.verdict.emit(e, v)
	if !o.noReport {
		rep, err := reports.Write(dir, sum.TimelinePath, v, reports.Options{})
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

// runOnce plays one scenario into dir/timeline.ndjson with progress bars
// when stderr is a terminal. A run stopped by ctx (SIGINT) still flushes
// its timeline and returns its summary.
func runOnce(ctx context.Context, e *env, sc *scenarios.Scenario, subj subjects.Subject, o runOptions, dir string) (*scenarios.Summary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	path := filepath.Join(dir, "timeline.ndjson")
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	bars := newProgressBars(e, o.quiet, fmt.Sprintf("%s · %s", sc.Name, subj.Name()))
	sum, err := scenarios.Run(ctx, sc, scenarios.RunOptions{
		Subject:      subj,
		Clients:      o.clients,
		Requests:     o.requests,
		Duration:     o.duration,
		Seed:         o.seed,
		Timeline:     f,
		TimelinePath: path,
		Progress:     bars.update,
		Tool:         version,
	})
	bars.finish()
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("timeline: %w", cerr)
	}
	if err != nil {
		if sum == nil {
			return nil, err
		}
		fmt.Fprintf(e.stderr, "retrylab: %v\n", err)
	}
	return sum, nil
}

// analyzeFile judges the timeline at path; a missing or malformed file is
// bad input naming it.
func analyzeFile(path string, opts analyzer.Options) (*analyzer.Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, badInput(err)
	}
	defer f.Close()
	v, err := analyzer.Analyze(f, opts)
	if err != nil {
		return nil, timelineInputErr(path, err)
	}
	return v, nil
}

func printSummary(w io.Writer, s *scenarios.Summary) {
	fmt.Fprintf(w, "run: %s · subject %s · seed %d · %d clients\n", s.Scenario, s.Subject, s.Seed, s.Clients)
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
	fmt.Fprintf(w, "  attempts: %d (429: %d, 503: %d)\n", s.Attempts, s.Throttled429, s.Unavailable503)
	stopped := "all requests done"
	switch s.Stopped {
	case scenarios.StoppedDuration:
		stopped = "stopped at the duration cap"
	case scenarios.StoppedCanceled:
		stopped = "interrupted"
	}
	fmt.Fprintf(w, "  run time: %v (%s); start lateness p50 %v, p99 %v\n", s.Elapsed.Round(time.Millisecond), stopped, s.StartLateness.P50, s.StartLateness.P99)
	fmt.Fprintf(w, "  timeline: %s (%d bytes)\n\n", s.TimelinePath, s.TimelineBytes)
}

// safeName makes a subject name usable in a directory name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
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

func (b *progressBars) update(p scenarios.Progress) {
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
