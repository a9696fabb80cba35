// A run's lifecycle: the runner's state, and run: the harness transport
// and listener, the stub (none with a target), the meta record, the
// fleet, the stop and the end record (see run_end.go), the summary.

package runner

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

type runner struct {
	sc   *scenarios.Scenario
	opts RunOptions
	subj subjects.Subject
	// procs holds the shared instance of each process that has begun
	// (fleet.processes; see processCaller), made by the launcher.
	procs map[int]subjects.Caller
	// turnsOff is closed when the fleet is sealed: the shared instances'
	// inTurn transports then hand over what they hold at once (the bubble's
	// clock stops with the run, and the steps that order them with it).
	turnsOff chan struct{}

	start time.Time
	rec   *timeline.Recorder
	srv   *stubserver.Server // nil with RunOptions.Target
	base  string
	tr    *http.Transport
	// next is what the subjects call through: tr, or with a target tr
	// wrapped by counted, the harness's own count of the stub's answers.
	next      http.RoundTripper
	counted   *countingTransport
	epochLate time.Duration // how far past the epoch the run starts
	total     int64
	done      atomic.Int64
	// inFlight counts outcomes made "canceled" because the run stopped;
	// dialErrors the harness's own dial and accept failures.
	inFlight   atomic.Int64
	dialErrors atomic.Int64
	capAt      time.Time    // the duration cap's instant
	harness    atomic.Int64 // outcomes marked Harness
	// harnessErrs collects harness problems in words for the end record.
	errMu        sync.Mutex
	harnessErrs  []string
	plumbingSeen map[string]bool
	// slots hold each goroutine client's request in flight (see seal);
	// sealed is set when the run stops for good.
	slots   []slot
	sealed  atomic.Bool
	writing atomic.Int64 // outcome writes being claimed or made (see slot)
	// dropped counts logical requests of exec processes still running
	// past the grace: in flight, with no outcome.
	dropped atomic.Int64
	results [len(resultNames)]atomic.Int64
	shed    atomic.Int64 // gave-up outcomes the subject's retry budget ended
	// unstarted counts clients launched whose goroutine has not run yet.
	unstarted atomic.Int64
	late      *loghist.Atomic // start lateness
	// meter measures the host's noise from before the fleet starts to its
	// stop, for End.Noise; nil in a virtual run (no host noise, and
	// nothing of it may run in the bubble).
	meter  *noise.Meter
	stamps *noise.Stamps // the stub's stamps, measured with the meter
	// dial is the harness's counted dial to the stub, and subjRun the
	// subjects' Params.Run, ended at the teardown (endSubjects).
	dial        func(context.Context, string, string) (net.Conn, error)
	subjRun     context.Context
	endSubjects context.CancelFunc
}

func (r *runner) run(ctx context.Context) (sum *Summary, err error) {
	sc, opts := r.sc, r.opts
	r.total = int64(opts.Shard.Clients(sc.Fleet.Clients)) * int64(sc.Fleet.Requests)

	var cw *countingWriter
	var enc *timeline.Encoder
	if opts.Timeline != nil {
		cw = &countingWriter{w: opts.Timeline}
		enc = timeline.NewEncoder(cw)
	}

	// The in-process stub's listener; nil with a target.
	var l net.Listener
	if opts.Target != "" {
		r.base = trimTarget(opts.Target)
		r.dial = r.countDials((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
		r.tr = r.transport((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
		r.counted = &countingTransport{next: r.tr}
		r.next = r.counted
	} else {
		ln, dial, closeNet, err := listen(opts.Virtual)
		if err != nil {
			return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
		}
		defer closeNet()
		l = &countingListener{Listener: ln, errs: &r.dialErrors}
		r.base = "http://" + l.Addr().String()
		r.dial = r.countDials(dial)
		r.tr = r.transport(dial)
		r.next = r.tr
	}
	if _, ok := r.subj.(subjects.Program); !ok {
		r.slots = make([]slot, opts.Shard.Clients(sc.Fleet.Clients))
	}
	r.subjRun, r.endSubjects = context.WithCancel(context.Background())
	defer r.endSubjects()

	// An exec fleet starts every process first and opens the scenario
	// only when all are ready (the start barrier): time zero is then.
	var pf *programFleet
	if prog, ok := r.subj.(subjects.Program); ok {
		pf = r.startPrograms(ctx, prog, l)
		l = pf.gate
	}
	if !opts.Virtual {
		if !opts.off.stamps {
			r.stamps = noise.NewStamps()
		}
		if !opts.off.meter {
			var probe []string
			if pf != nil {
				// An exec fleet's clients are processes: a probe
				// process sees what they see.
				probe = opts.Probe
			}
			r.meter = noise.Start(noise.Options{Probe: probe, Stamps: r.stamps, NoSleep: opts.off.sleep})
			defer r.meter.Stop() // a run that ends early; a no-op after the stop below
		}
	}
	r.start = opts.Start
	if r.start.IsZero() || pf != nil {
		r.start = time.Now()
	}
	if !opts.Epoch.IsZero() {
		r.start = AnchorEpoch(opts.Epoch)
	}
	if pf != nil {
		pf.open(r)
	}

	if enc != nil {
		r.rec = timeline.NewRecorder(enc, 4096)
	}
	closeListener := func() {
		if l != nil {
			l.Close()
		}
	}
	var phases []timeline.Phase // nil with a target: Meta lays them out
	if opts.Target == "" {
		var onAttempt func(*timeline.Attempt)
		if pf != nil {
			onAttempt = pf.stamps.add // the evidence its outcomes are stamped with
		}
		srv, err := stubserver.New(sc.Server, stubserver.Options{Start: r.start, Recorder: r.rec, Seed: opts.Seed, NewLimiter: opts.NewLimiter, Virtual: opts.Virtual, Stamps: r.stamps, OnAttempt: onAttempt})
		if err != nil {
			r.abortPrograms(pf)
			closeListener()
			r.closeRecorder()
			return nil, fmt.Errorf("runner: run %s: %w", sc.Name, err)
		}
		r.srv = srv
		phases = srv.Phases()
	}
	if enc != nil {
		meta := sc.Meta(scenarios.MetaOptions{Subject: r.subj, Phases: phases, Seed: opts.Seed,
			Start: r.start.Round(0), Virtual: opts.Virtual, Tool: opts.Tool,
			Shard: opts.Shard.String(), Epoch: opts.Epoch, Host: opts.Host})
		meta.Notes = append(meta.Notes, r.metaNotes(r.epochLate)...)
		// The Recorder has not been handed a record yet, so writing the
		// meta record through the encoder first keeps it first.
		if err := enc.EncodeMeta(meta); err != nil {
			r.abortPrograms(pf)
			closeListener()
			r.closeRecorder()
			return nil, fmt.Errorf("runner: run %s: timeline: %w", sc.Name, err)
		}
	}
	served := make(chan struct{})
	if srv := r.srv; srv != nil {
		go func() {
			defer close(served)
			srv.Serve(l)
		}()
	} else {
		close(served)
	}

	// The run stops at its duration cap, on ctx (a signal), or at the
	// first timeline write error, whichever comes first.
	//
	// A goroutine fleet's context is not canceled by the cap itself:
	// waitFleet's timer ends the wait, seal records what is in flight,
	// and only then are the calls canceled (stop below). Canceling at the
	// cap would wake every client at the instant seal needs the CPU, and
	// with a million clients seal would take seconds among them. An exec
	// fleet's processes are killed at the cap by its context.
	r.capAt = r.start.Add(sc.Duration)
	if r.srv != nil {
		// A request arriving at the cap's instant is not part of the run,
		// whether it is handled before or after the stop below.
		r.srv.HoldFrom(sc.Duration)
	}
	fleetCtx := ctx
	if pf != nil {
		capCtx, capCancel := context.WithTimeoutCause(ctx, time.Until(r.capAt), errDurationCap)
		defer capCancel()
		fleetCtx = capCtx
	}
	runCtx, stop := context.WithCancelCause(fleetCtx)
	detached := false
	defer func() {
		// Canceling wakes every client in flight, each context of the
		// hundreds of thousands derived from runCtx in turn: a detached
		// run leaves them be.
		if !detached {
			stop(nil)
		}
	}()
	if r.rec != nil {
		go func() {
			select {
			case <-r.rec.Failed():
				stop(errWriteFailed)
			case <-runCtx.Done():
			}
		}()
	}

	stopProgress := r.progress()
	if pf != nil {
		pf.wait(runCtx, r)
	} else {
		r.fleet(runCtx)
	}
	// A run stopped before its epoch (a signal while it waits) stopped at
	// time zero: the timeline has no instant before it.
	stoppedAt := max(0, r.since())
	elapsed := max(0, time.Since(r.start))
	// First the stub stops answering: it holds every new request,
	// unrecorded, so the fleet waiting on it goes quiet and leaves the CPU
	// to what follows. (An external stub goes on answering: seal stops
	// the fleet's outcomes all the same.)
	srv := r.srv
	if srv != nil {
		srv.Hold()
	}
	r.meter.Stop() // the fleet has stopped: so does the noise's measure (fillEnd)
	// From here no client writes an outcome: requests still in flight are
	// recorded canceled, whether or not their goroutines have run since
	// the run stopped (with 100,000 clients they may not for seconds).
	pending := r.seal(stoppedAt)
	// Then the stub releases hanging requests and waits for the requests
	// being handled to hand over their records. The timeline is then
	// whole, and is closed and flushed before anything wakes the fleet:
	// canceling a hundred thousand calls and closing their connections
	// takes seconds that the timeline need not wait for.
	shCtx, shCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	var sealErr error
	if srv != nil {
		sealErr = srv.Seal(shCtx)
	}
	stopped, end := r.stopReason(ctx, stoppedAt)
	stopProgress()
	r.fillEnd(&end, pf, sealErr)
	recErr := r.closeRecorder()
	if enc != nil && recErr == nil {
		if recErr = writeEnd(enc, pending, &end); recErr != nil && end.Reason != timeline.EndWriteError {
			stopped, end.Reason = StoppedWriteError, timeline.EndWriteError
			end.Errors = append(end.Errors, recErr.Error())
		}
	}
	flushed := max(0, time.Since(r.start))

	// Last, the fleet's calls are canceled, the stub's listener and
	// connections are closed, and the handlers still running (answering
	// without a record since Seal) are waited for. With 200,000 calls in
	// flight this takes seconds; a caller that exits after the run
	// (RunOptions.Detach) skips it.
	teardown := func() error {
		defer shCancel()
		stop(nil)
		closeListener()
		var err error
		if srv != nil {
			err = srv.Close(shCtx)
		}
		<-served
		r.tr.CloseIdleConnections()
		r.endSubjects() // their own connections (gRPC channels) too
		return err
	}
	shErr := sealErr
	if opts.Detach {
		// Left as it is: the fleet's calls wait on the stub, which holds
		// them (Seal), so the process exits without the teardown's work
		// (an external stub's answers wake nobody: seal has closed every
		// client's slot).
		detached = true
		shCancel()
	} else if err := teardown(); shErr == nil {
		shErr = err
	}

	sum = r.summary(elapsed, flushed, stopped, end)
	if cw != nil {
		sum.TimelineBytes = cw.n
	}
	if recErr != nil {
		return sum, &TimelineError{Err: recErr}
	}
	if shErr != nil {
		return sum, fmt.Errorf("runner: run %s: %w", sc.Name, shErr)
	}
	return sum, nil
}

var (
	errDurationCap = errors.New("the run's duration cap passed")
	errWriteFailed = errors.New("writing the timeline failed")
)

// harnessError records a harness problem for the end record.
func (r *runner) harnessError(msg string) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.harnessErrs) < 20 {
		r.harnessErrs = append(r.harnessErrs, msg)
	}
}

func (r *runner) closeRecorder() error {
	if r.rec == nil {
		return nil
	}
	return r.rec.Close()
}

// since is the run instant of now, ns.
func (r *runner) since() int64 { return int64(time.Since(r.start)) }
