// Package runner plays scenarios: a run's lifecycle (the in-process stub,
// the fleet of simulated clients or exec processes, the timeline recording
// and its end record), a fleet spread over processes, serve's recording
// (Serving) and a comparison's runs (Compare). The scenarios package holds
// the schema and the loader; runner never prints.
package runner

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"io"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// RunOptions tune a run. The zero value runs the scenario as written, with
// seed 0, recording nothing.
type RunOptions struct {
	// Subject is the library under test (nil: subjects.Lookup of the
	// scenario's subject name).
	Subject subjects.Subject
	// Clients and Requests, when positive, replace the fleet's sizes;
	// Duration, when positive, replaces the run's hard cap.
	Clients  int
	Requests int
	Duration time.Duration
	// Processes, when positive, replaces fleet.processes: the clients
	// are grouped into that many processes, each with one instance of
	// the subject that all its clients share (see subjects.Subject).
	Processes int
	// Seed derives every random draw: arrivals, each client's jitter source
	// (subjects.Params.Rand), with processes each logical request's
	// (client.WithRand), and the stub's mix and spread draws.
	Seed int64
	// Timeline receives the NDJSON timeline (nil: nothing is recorded).
	// Run does not close it; RunInDir gives a file of the run's directory.
	Timeline io.Writer
	// Progress, when set, is called every ProgressEvery (default 200ms)
	// from one goroutine while the run lasts, and once more at its end.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Virtual runs over an in-memory network instead of loopback TCP. Run
	// must then be called inside a testing/synctest bubble (retrylabtest
	// does this); exec subjects are refused.
	Virtual bool
	// Stagger offsets client i's start by i×Stagger, so that no two
	// clients start at the same instant (what a reproducible virtual run
	// needs; 0: none).
	Stagger time.Duration
	// MaxConns, when positive, caps the harness transport's connections
	// to the stub (clients then share them). 0 lets every client hold its
	// own — two file descriptors per client in real mode — unless the
	// process's open-file limit is too low for that: then the cap is what
	// the limit allows (see connCap).
	MaxConns int
	// ReadyTimeout bounds an exec fleet's start barrier (0:
	// DefaultReadyTimeout); see programFleet.
	ReadyTimeout time.Duration
	// Start is the wall-clock time zero written into the meta record and
	// used by the stub (zero: time.Now() when the run starts).
	Start time.Time
	// Target, when set, is the base URL ("http://host:port") of a stub
	// outside the process — one `retrylab serve`, or several behind a
	// load balancer — that the fleet drives instead of starting its own.
	// The timeline then holds what only the fleet knows (the meta record,
	// the outcomes, the end record) and the stub records the attempts
	// (serve --record); timeline.Merge joins them. Run does not check that
	// the target is on loopback (the CLI does). A virtual run or an exec
	// subject cannot have one.
	Target string
	// Shard, when not whole, runs one shard of the fleet: the clients
	// whose ids are i, i+n, …, each with the arrival instant, jitter
	// source and id it has in the whole fleet's run of the same seed, so
	// n shards together run exactly the fleet one process would. Meta.Shard
	// says "i/n", Meta.Scheduled counts the shard's own requests.
	Shard timeline.Shard
	// Epoch, when set, is time zero: a wall-clock instant shared with the
	// other processes of the run (`serve --epoch`, the other shards), at
	// which the phases and the fleet's arrivals start, instead of the
	// run's own start (Start is then ignored). Run refuses an epoch that
	// CheckEpoch refuses; one in the past by less than the first phase
	// starts the clients whose arrivals have passed at once, late. Meta
	// records it in Epoch and Start.
	Epoch time.Time
	// Detach makes Run return as soon as the timeline is whole and
	// flushed, without canceling the fleet's calls or closing the stub's
	// connections (seconds of work with 100,000 clients in flight): the
	// stub holds every request from then on, unrecorded, so the fleet
	// sits idle. For a process that exits after the run, such as the
	// CLI's run; a caller that runs again in the same process, or checks
	// for leaked goroutines, must not set it.
	Detach bool
	// Tool and Host say who recorded the run, in the meta record: the
	// retrylab version, and the machine's name (Meta.Host; "" unknown),
	// so that merge can tell one host's files from several hosts'.
	Tool string
	Host string
	// NewLimiter builds the stub's quota limiters
	// (stubserver.Options.NewLimiter; nil: in memory, whatever the
	// quota's Backend). The CLI gives stubredis's for a redis:// Backend,
	// so that this package links no Redis client.
	NewLimiter func(stubserver.LimiterSpec) (stubserver.Limiter, error)
	// Probe is the command line of a noise probe process (the program
	// and its arguments; see noise.ProbeMain, which the CLI's own
	// executable runs given noise.ProbeArg). A real-time exec fleet runs
	// one beside it, so that the end record's noise holds what another
	// process on this host met. Empty: no probe source.
	Probe []string

	// off turns always-on measurements off: for BenchmarkMeasures alone,
	// which measures what each costs the fleet.
	off measures
}

// measures names the always-on measurements of a real-time run.
type measures struct {
	meter     bool // the noise meter: sleep loop, sched, PSI (and probe)
	sleep     bool // the meter's sleep loop alone
	stamps    bool // the stub's receipt stamps
	heapFloor bool // keepHeapFloor
}

// Progress is a snapshot of a running run.
type Progress struct {
	Done, Total    int64 // logical requests finished / planned
	Attempts       int64 // requests the stub has seen
	Throttled429   int64
	Unavailable503 int64
	Elapsed        time.Duration
}

// Why a run stopped, Summary.Stopped.
const (
	StoppedDone     = ""         // every client finished its requests
	StoppedDuration = "duration" // the run's duration cap
	StoppedCanceled = "canceled" // the caller's context
	// StoppedWriteError: writing the timeline failed, so the run stopped
	// at once instead of going on unrecorded.
	StoppedWriteError = "write-error"
)

// Interrupt is the cause a command cancels a run's context with when a
// signal stops it (context.WithCancelCause); the run's end record then
// names the signal.
type Interrupt struct {
	Signal string // "SIGINT", "SIGTERM"
}

func (i *Interrupt) Error() string { return "interrupted by " + i.Signal }

// StopGrace is how long past its duration cap (or a signal, or a write
// error) a run may take to write its timeline whole: at the stop instant
// the stub holds new requests, every request in flight is recorded
// "canceled" (seal), the stub hands over its last records, and the
// timeline is flushed; only then is the fleet canceled and the stub closed
// (or, with RunOptions.Detach, left as it is). TestRunStopsAtCap holds the
// runner to it in virtual time; BENCHMARKS.md has the real-time figures for
// 100,000 and 1,000,000 clients.
const StopGrace = 2 * time.Second

// Summary is what a run did.
type Summary struct {
	Scenario string
	Subject  string
	Seed     int64
	Clients  int // the shard's, with RunOptions.Shard
	// Shard is RunOptions.Shard as "i/n" ("" for the whole fleet); Target
	// RunOptions.Target. With a target, Attempts, Throttled429 and
	// Unavailable503 are what the harness sent and received.
	Shard  string
	Target string
	// Planned is clients × requests; Requests is how many logical requests
	// got an outcome, Results counts them by timeline result.
	Planned  int64
	Requests int64
	Results  map[string]int64
	// Attempts, Throttled429 and Unavailable503 are as the stub counted.
	Attempts       int64
	Throttled429   int64
	Unavailable503 int64
	Elapsed        time.Duration
	// Flushed is when the run was over: the stub shut down and the
	// timeline flushed with its end record (from time zero, like Elapsed).
	// Flushed - the duration cap is how far past its cap a run ended.
	Flushed time.Duration
	Stopped string // StoppedDone, StoppedDuration, StoppedCanceled or StoppedWriteError
	// Harness counts outcomes marked Harness: the subject's plumbing, not
	// its retry logic, failed them.
	Harness int64
	// Shed counts the gave-up outcomes (of Results) that the subject's
	// retry budget ended: it refused a retry because the retries of all
	// its calls had spent their share (subjects.ShedByRetryBudget), as it
	// does under overload so that the server can recover.
	Shed int64
	// End is the end record the run wrote last (or would have, when the
	// timeline could not be written): why it stopped, what was in flight,
	// what never started, harness errors.
	End timeline.End
	// StartLateness is how late logical requests started after their
	// scheduled instant (the fleet's own timer and scheduling delay).
	StartLateness Lateness
	// TimelinePath is the timeline file RunInDir recorded into ("" for
	// Run's own Timeline writer).
	TimelinePath  string
	TimelineBytes int64
}

// Lateness summarizes delays; the quantiles are read from buckets 1/16
// (or 1 µs) wide: at most that above the exact value, never below it.
type Lateness struct{ P50, P99, Max time.Duration }

// latenessLayout buckets start lateness: 16 buckets per power of two of
// microseconds.
var latenessLayout = loghist.Layout{Unit: int64(time.Microsecond), Bits: 4}

// summarizeLateness reads a run's start lateness.
func summarizeLateness(h *loghist.Atomic) Lateness {
	s := h.Snapshot()
	return Lateness{P50: time.Duration(s.Quantile(0.5)), P99: time.Duration(s.Quantile(0.99)), Max: time.Duration(s.Max())}
}

// ErrUpstream is wrapped by Run's error for a scenario with an upstream
// (server.upstream): the fleet is simulated, and must not load a real API.
var ErrUpstream = errors.New("a simulated fleet does not run against an upstream")

// ErrNoSubject is wrapped by Run's error when the scenario's subject
// cannot be found.
var ErrNoSubject = errors.New("runner: no such subject")

// Run plays sc: it starts the stub server in-process (loopback TCP on
// 127.0.0.1:0, or an in-memory network when opts.Virtual), starts the
// fleet of simulated clients, each calling through a Caller the subject
// builds over one shared harness http.Transport, and records the
// timeline: the meta record, every attempt the stub sees and one outcome
// per logical request. With opts.Target it starts no stub: the fleet
// drives the one at that URL and the timeline holds no attempt; with
// opts.Shard it runs one shard of the fleet; with opts.Epoch its time zero
// is an instant shared with other processes (see RunOptions).
//
// Each logical request is watched: past the fleet's timeout its outcome is
// "hung" and the client moves on; when the run's duration cap passes or ctx
// ends, requests in flight become "canceled" and no new ones start. Either
// way Run shuts the stub down, flushes the timeline and returns the
// Summary; its error reports setup and write failures only. Run never
// prints; progress goes to opts.Progress. A scenario with server.upstream
// is refused (ErrUpstream).
func Run(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) (*Summary, error) {
	eff := *sc
	if opts.Clients > 0 {
		eff.Fleet.Clients = opts.Clients
	}
	if opts.Requests > 0 {
		eff.Fleet.Requests = opts.Requests
	}
	if opts.Duration > 0 {
		eff.Duration = opts.Duration
	}
	if opts.Processes > 0 {
		eff.Fleet.Processes = opts.Processes
	}
	if eff.Fleet.Clients <= 0 || eff.Fleet.Requests <= 0 || eff.Duration <= 0 {
		return nil, fmt.Errorf("runner: run %s: clients, requests and duration must be positive", sc.Name)
	}
	if u := sc.Server.Upstream; u != "" {
		// A simulated fleet would load the real API: only `retrylab serve`
		// proxies, and its load is what the application sends.
		return nil, fmt.Errorf("runner: run %s: %w (server.upstream %s): serve it with `retrylab serve` in front of your application", sc.Name, ErrUpstream, u)
	}
	if eff.Fleet.Method == "" {
		eff.Fleet.Method = scenarios.DefaultMethod
	}
	if eff.Fleet.Timeout <= 0 {
		eff.Fleet.Timeout = scenarios.DefaultTimeout
	}
	subj := opts.Subject
	if subj == nil {
		name := eff.Subject.Name
		if name == "" {
			name = scenarios.DefaultSubject
		}
		s, err := subjects.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("runner: run %s: %w: %w", sc.Name, ErrNoSubject, err)
		}
		subj = s
	}
	eff.Subject.Name = subj.Name()
	if opts.Virtual {
		if err := subjects.CheckVirtual(subj); err != nil {
			return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
		}
	}
	_, program := subj.(subjects.Program)
	if err := checkProtocol(&eff, subj, program, opts.Target != ""); err != nil {
		return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
	}
	if err := checkSpread(&eff, opts, program); err != nil {
		return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
	}
	var late time.Duration
	if !opts.Epoch.IsZero() {
		var err error
		if late, err = CheckEpoch(&eff, opts.Epoch, time.Now()); err != nil {
			return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
		}
	}

	if !opts.Virtual && !opts.off.heapFloor {
		defer keepHeapFloor()()
	}
	r := &runner{sc: &eff, opts: opts, subj: subj, late: loghist.NewAtomic(latenessLayout), epochLate: late, turnsOff: make(chan struct{})}
	return r.run(ctx)
}

// TimelineError is Run's error when the timeline could not be written:
// the run stopped at the first write error.
type TimelineError struct {
	Path string // the file RunInDir recorded into ("" from Run)
	Err  error
}

func (e *TimelineError) Error() string {
	if e.Path == "" {
		return "timeline: " + e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *TimelineError) Unwrap() error { return e.Err }
