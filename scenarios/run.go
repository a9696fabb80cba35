package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/internal/memnet"
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
	// Seed derives every random draw: arrivals, each client's jitter source
	// (subjects.Params.Rand) and the stub's mix and spread draws.
	Seed int64
	// Timeline receives the NDJSON timeline (nil: nothing is recorded).
	// Run does not close it.
	Timeline io.Writer
	// TimelinePath is only echoed into the Summary.
	TimelinePath string
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
	// Tool is the retrylab version written into the meta record.
	Tool string
	// Start is the wall-clock time zero written into the meta record and
	// used by the stub (zero: time.Now() when the run starts).
	Start time.Time
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
// error) a run may take to stop: at the stop instant every request in
// flight is recorded "canceled" (seal), the stub shuts down, and the
// timeline is flushed. TestRunStopsAtCap holds the runner to it in virtual
// time; BENCHMARKS.md has the real-time figure for 100,000 clients.
const StopGrace = 2 * time.Second

// Summary is what a run did.
type Summary struct {
	Scenario string
	Subject  string
	Seed     int64
	Clients  int
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
	// End is the end record the run wrote last (or would have, when the
	// timeline could not be written): why it stopped, what was in flight,
	// what never started, harness errors.
	End timeline.End
	// StartLateness is how late logical requests started after their
	// scheduled instant (the fleet's own timer and scheduling delay).
	StartLateness Lateness
	TimelinePath  string
	TimelineBytes int64
}

// Lateness summarizes delays; values are bucketed to within 1/16.
type Lateness struct{ P50, P99, Max time.Duration }

// ErrNoSubject is wrapped by Run's error when the scenario's subject
// cannot be found.
var ErrNoSubject = errors.New("scenarios: no such subject")

// Run plays sc: it starts the stub server in-process (loopback TCP on
// 127.0.0.1:0, or an in-memory network when opts.Virtual), starts the
// fleet of simulated clients, each calling through a Caller the subject
// builds over one shared harness http.Transport, and records the
// timeline: the meta record, every attempt the stub sees and one outcome
// per logical request.
//
// Each logical request is watched: past the fleet's timeout its outcome is
// "hung" and the client moves on; when the run's duration cap passes or ctx
// ends, requests in flight become "canceled" and no new ones start. Either
// way Run shuts the stub down, flushes the timeline and returns the
// Summary; its error reports setup and write failures only. Run never
// prints; progress goes to opts.Progress.
func Run(ctx context.Context, sc *Scenario, opts RunOptions) (*Summary, error) {
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
	if eff.Fleet.Clients <= 0 || eff.Fleet.Requests <= 0 || eff.Duration <= 0 {
		return nil, fmt.Errorf("scenarios: run %s: clients, requests and duration must be positive", sc.Name)
	}
	if eff.Fleet.Method == "" {
		eff.Fleet.Method = DefaultMethod
	}
	if eff.Fleet.Timeout <= 0 {
		eff.Fleet.Timeout = DefaultTimeout
	}
	subj := opts.Subject
	if subj == nil {
		name := eff.Subject.Name
		if name == "" {
			name = DefaultSubject
		}
		s, err := subjects.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("scenarios: run %s: %w: %w", sc.Name, ErrNoSubject, err)
		}
		subj = s
	}
	eff.Subject.Name = subj.Name()
	if opts.Virtual {
		if err := subjects.CheckVirtual(subj); err != nil {
			return nil, fmt.Errorf("scenarios: run %s: %w", sc.Name, err)
		}
	}

	r := &runner{sc: &eff, opts: opts, subj: subj}
	return r.run(ctx)
}

type runner struct {
	sc   *Scenario
	opts RunOptions
	subj subjects.Subject

	start time.Time
	rec   *timeline.Recorder
	srv   *stubserver.Server
	base  string
	tr    *http.Transport
	total int64
	done  atomic.Int64
	// inFlight counts outcomes made "canceled" because the run stopped;
	// dialErrors the harness's own dial and accept failures.
	inFlight   atomic.Int64
	dialErrors atomic.Int64
	fleetReady atomic.Int64 // End.FleetReady of a goroutine fleet
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
	late    histogram
}

var resultNames = [...]string{
	timeline.ResultOK, timeline.ResultGaveUp, timeline.ResultBudget, timeline.ResultNonRetryable,
	timeline.ResultError, timeline.ResultHung, timeline.ResultCanceled,
}

// resultIndex is s's index in resultNames; an unknown result counts as
// an error.
func resultIndex(s string) int {
	for i, n := range resultNames {
		if n == s {
			return i
		}
	}
	return resultIndex(timeline.ResultError)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (r *runner) run(ctx context.Context) (sum *Summary, err error) {
	sc, opts := r.sc, r.opts
	r.total = int64(sc.Fleet.Clients) * int64(sc.Fleet.Requests)

	var cw *countingWriter
	var enc *timeline.Encoder
	if opts.Timeline != nil {
		cw = &countingWriter{w: opts.Timeline}
		enc = timeline.NewEncoder(cw)
	}

	var l net.Listener
	dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	if opts.Virtual {
		nw := memnet.New()
		defer nw.Close()
		l = nw.Listen()
		dial = nw.DialContext
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("scenarios: run %s: %w", sc.Name, err)
		}
	}
	l = &countingListener{Listener: l, errs: &r.dialErrors}
	r.base = "http://" + l.Addr().String()
	if _, ok := r.subj.(subjects.Program); !ok {
		r.slots = make([]slot, sc.Fleet.Clients)
	}
	r.tr = &http.Transport{
		Proxy:                 nil, // loopback only, whatever the environment says
		DialContext:           r.countDials(dial),
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   sc.Fleet.Clients + 16,
		MaxConnsPerHost:       connCap(opts.MaxConns, sc.Fleet.Clients, opts.Virtual, openFileLimit()),
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 0,
	}

	// An exec fleet starts every process first and opens the scenario
	// only when all are ready (the start barrier): time zero is then.
	var pf *programFleet
	if prog, ok := r.subj.(subjects.Program); ok {
		pf = r.startPrograms(ctx, prog, l)
		l = pf.gate
	}
	r.start = opts.Start
	if r.start.IsZero() || pf != nil {
		r.start = time.Now()
	}
	if pf != nil {
		pf.open(r)
	}

	if enc != nil {
		r.rec = timeline.NewRecorder(enc, 4096)
	}
	srv, err := stubserver.New(sc.Server, stubserver.Options{Start: r.start, Recorder: r.rec, Seed: opts.Seed})
	if err != nil {
		r.abortPrograms(pf)
		l.Close()
		r.closeRecorder()
		return nil, fmt.Errorf("scenarios: run %s: %w", sc.Name, err)
	}
	r.srv = srv
	if enc != nil {
		meta := sc.Meta(MetaOptions{Subject: r.subj, Phases: srv.Phases(), Seed: opts.Seed,
			Start: r.start.Round(0), Virtual: opts.Virtual, Tool: opts.Tool})
		// The Recorder has not been handed a record yet, so writing the
		// meta record through the encoder first keeps it first.
		if err := enc.EncodeMeta(meta); err != nil {
			r.abortPrograms(pf)
			l.Close()
			r.closeRecorder()
			return nil, fmt.Errorf("scenarios: run %s: timeline: %w", sc.Name, err)
		}
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l)
	}()

	// The run stops at its duration cap, on ctx (a signal), or at the
	// first timeline write error, whichever comes first.
	r.capAt = r.start.Add(sc.Duration)
	capCtx, capCancel := context.WithTimeoutCause(ctx, time.Until(r.capAt), errDurationCap)
	defer capCancel()
	runCtx, stop := context.WithCancelCause(capCtx)
	defer stop(nil)
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
	stoppedAt := r.since()
	elapsed := time.Since(r.start)
	// From here no client writes an outcome: requests still in flight are
	// recorded canceled, whether or not their goroutines have run since
	// the run stopped (with 100,000 clients they may not for seconds).
	pending := r.seal()
	// Then the fleet's calls are canceled (if the cap's timer has not done
	// it already), the stub's listener is closed (a call that fails and
	// retries is refused at once), and the server releases hanging requests
	// and waits for the active ones.
	stop(nil)
	l.Close()
	shCtx, shCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	shErr := srv.Shutdown(shCtx)
	shCancel()
	end := timeline.End{At: stoppedAt, Reason: timeline.EndCompleted}
	stopped := StoppedDone
	switch {
	case r.rec != nil && r.rec.Err() != nil:
		stopped, end.Reason = StoppedWriteError, timeline.EndWriteError
		end.Errors = append(end.Errors, r.rec.Err().Error())
	case ctx.Err() != nil:
		stopped, end.Reason = StoppedCanceled, timeline.EndInterrupted
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) {
			end.Signal = in.Signal
		}
	case r.inFlight.Load() > 0 || r.done.Load() < r.total:
		// The cap, whether or not its context has noticed yet.
		stopped, end.Reason = StoppedDuration, timeline.EndDuration
	}

	<-served
	r.tr.CloseIdleConnections()
	stopProgress()

	end.InFlight = r.inFlight.Load() + r.dropped.Load()
	end.Unstarted = max(0, r.total-r.done.Load()-r.dropped.Load())
	end.DialErrors = r.dialErrors.Load()
	end.FleetReady = r.fleetReady.Load()
	if pf != nil {
		end.FleetReady = pf.readyAt
	}
	r.errMu.Lock()
	end.Errors = append(end.Errors, r.harnessErrs...)
	r.errMu.Unlock()
	if shErr != nil {
		end.Errors = append(end.Errors, shErr.Error())
	}
	recErr := r.closeRecorder()
	if enc != nil && recErr == nil {
		// The recorder is closed: the encoder is the runner's again.
		for i := range pending {
			if recErr = enc.EncodeOutcome(&pending[i]); recErr != nil {
				break
			}
		}
		if recErr == nil {
			recErr = enc.EncodeEnd(&end)
		}
		if recErr == nil {
			recErr = enc.Flush()
		}
		if recErr != nil && end.Reason != timeline.EndWriteError {
			stopped, end.Reason = StoppedWriteError, timeline.EndWriteError
			end.Errors = append(end.Errors, recErr.Error())
		}
	}

	flushed := time.Since(r.start)

	st := srv.Stats()
	sum = &Summary{
		Scenario: sc.Name, Subject: r.subj.Name(), Seed: opts.Seed, Clients: sc.Fleet.Clients,
		Planned: r.total, Requests: r.done.Load(), Results: map[string]int64{},
		Attempts: st.Attempts, Throttled429: st.Throttled429, Unavailable503: st.Unavailable503,
		Elapsed: elapsed, Flushed: flushed, Stopped: stopped, End: end, Harness: r.harness.Load(), StartLateness: r.late.summary(),
		TimelinePath: opts.TimelinePath,
	}
	for i := range r.results {
		if n := r.results[i].Load(); n > 0 {
			sum.Results[resultNames[i]] = n
		}
	}
	if cw != nil {
		sum.TimelineBytes = cw.n
	}
	if recErr != nil {
		return sum, &TimelineError{Path: opts.TimelinePath, Err: recErr}
	}
	if shErr != nil {
		return sum, fmt.Errorf("scenarios: run %s: %w", sc.Name, shErr)
	}
	return sum, nil
}

var (
	errDurationCap = errors.New("the run's duration cap passed")
	errWriteFailed = errors.New("writing the timeline failed")
)

// TimelineError is Run's error when the timeline could not be written:
// the run stopped at the first write error.
type TimelineError struct {
	Path string // RunOptions.TimelinePath ("" when not given)
	Err  error
}

func (e *TimelineError) Error() string {
	if e.Path == "" {
		return "timeline: " + e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *TimelineError) Unwrap() error { return e.Err }

// slot is one goroutine client's logical request in flight. A goroutine
// client claims the right to write each outcome from its slot, and seal
// takes the slots of requests still in flight and records them canceled
// itself, at once, without waiting for (possibly 100,000) client
// goroutines to be scheduled. The slot is lock-free: with 100,000
// goroutines competing for the CPU, seal must never wait for a client
// that was preempted holding a lock.
type slot struct {
	state atomic.Int32 // slotIdle, slotActive, slotTaken, slotClosed
	out   timeline.Outcome
}

const (
	slotIdle   = iota // no request in flight
	slotActive        // a request in flight; out describes it
	slotTaken         // seal recorded the request in flight canceled
	slotClosed        // seal found the slot idle: start nothing more
)

// begin marks o in flight; false when the run is sealed (start nothing).
func (s *slot) begin(o *timeline.Outcome) bool {
	s.out = *o // only the client touches out while the slot is idle
	return s.state.CompareAndSwap(slotIdle, slotActive)
}

// end records o, the outcome of the request in flight; false when seal
// already recorded it canceled (the client must stop).
func (s *slot) end(r *runner, o *timeline.Outcome) bool {
	// Counted before the claim, so that seal, which waits for writing to
	// drop to zero after its pass, never closes the recorder under a
	// write it let through.
	r.writing.Add(1)
	defer r.writing.Add(-1)
	if !s.state.CompareAndSwap(slotActive, slotIdle) {
		return false
	}
	r.finish(o)
	return true
}

// seal stops the fleet for good: no request starts after it, and every
// goroutine client's request still in flight gets a "canceled" outcome,
// counted now and returned for the caller to write once the recorder is
// closed (straight to the encoder: no goroutine but the caller's need be
// scheduled). It then waits for the outcome writes clients claimed before
// it; after it returns no goroutine client writes an outcome.
func (r *runner) seal() []timeline.Outcome {
	r.sealed.Store(true)
	now := r.since()
	var pending []timeline.Outcome
	for i := range r.slots {
		s := &r.slots[i]
		for {
			if s.state.CompareAndSwap(slotIdle, slotClosed) {
				break
			}
			if s.state.CompareAndSwap(slotActive, slotTaken) {
				o := s.out
				o.End, o.Result, o.Error = max(now, o.Start), timeline.ResultCanceled, "the run stopped"
				r.count(&o)
				pending = append(pending, o)
				break
			}
			// The client moved between idle and active: look again.
		}
	}
	for r.writing.Load() > 0 {
		time.Sleep(time.Millisecond) // writers wait for the recorder, which drains
	}
	return pending
}

// harnessError records a harness problem for the end record.
func (r *runner) harnessError(msg string) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.harnessErrs) < 20 {
		r.harnessErrs = append(r.harnessErrs, msg)
	}
}

// countDials wraps dial to count the harness's own dial failures (not
// those of a canceled request).
func (r *runner) countDials(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			if ctx.Err() == nil && !r.sealed.Load() {
				r.dialErrors.Add(1)
			}
			return nil, err
		}
		return c, nil
	}
}

// countingListener counts Accept errors (descriptor exhaustion, EMFILE,
// above all) other than the listener being closed.
type countingListener struct {
	net.Listener
	errs *atomic.Int64
	once sync.Once
}

// Close closes the listener once: the runner closes it when the run stops
// and the stub's shutdown closes it again, which must not be an error.
func (l *countingListener) Close() error {
	var err error
	l.once.Do(func() { err = l.Listener.Close() })
	return err
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		l.errs.Add(1)
	}
	return c, err
}

// connCap is the transport's MaxConnsPerHost: the requested cap, or in
// real mode, when every client holding its own connection (a descriptor on
// each end of loopback) would not fit under the open-file limit, what fits
// with room for 256 other files.
func connCap(requested, clients int, virtual bool, limit int) int {
	if requested > 0 {
		return requested
	}
	if virtual || limit <= 0 || 2*clients+256 <= limit {
		return 0
	}
	return max(1, (limit-256)/2)
}

func (r *runner) closeRecorder() error {
	if r.rec == nil {
		return nil
	}
	return r.rec.Close()
}

// progress starts the progress reporter; the returned func stops it after
// a last report.
func (r *runner) progress() (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.ProgressEvery
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.opts.Progress(r.snapshot())
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		r.opts.Progress(r.snapshot())
	}
}

func (r *runner) snapshot() Progress {
	st := r.srv.Stats()
	return Progress{Done: r.done.Load(), Total: r.total, Attempts: st.Attempts,
		Throttled429: st.Throttled429, Unavailable503: st.Unavailable503, Elapsed: time.Since(r.start)}
}

// since is the run instant of now, ns.
func (r *runner) since() int64 { return int64(time.Since(r.start)) }

// fleet starts every client at its arrival instant and waits for all.
//
// The launching runs on a goroutine of its own and the caller only waits:
// a launcher busy starting 100,000 goroutines gets a small share of the
// CPU, and the caller's wait must end at the cap whatever it is doing.
func (r *runner) fleet(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.launch(ctx, &wg)
	}()
	r.waitFleet(ctx, &wg)
}

// launch starts every client at its arrival instant, until ctx ends.
func (r *runner) launch(ctx context.Context, wg *sync.WaitGroup) {
	sc := r.sc
	arrivals := newArrivals(sc.Fleet.Start, sc.Fleet.Clients, r.opts.Seed)
	for i := range sc.Fleet.Clients {
		at := arrivals.next() + time.Duration(i)*r.opts.Stagger
		if d := at - time.Since(r.start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil || r.sealed.Load() {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(ctx, i, at)
		}()
	}
	// Every client has been launched (at least 1: 0 means unknown).
	r.fleetReady.Store(max(1, r.since()))
}

// fleetGrace bounds how long an exec fleet may take to wind down once the
// run has stopped (on top of exec's 1 s WaitDelay); processes still running
// after it are left behind, their requests in flight.
const fleetGrace = StopGrace / 2

// waitFleet waits for the fleet's goroutines until the run stops (ctx
// ends, or the cap passes): seal then records what is still in flight,
// whether or not its goroutine has been scheduled since.
func (r *runner) waitFleet(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	// A timer of our own for the cap, not ctx's: the goroutine a timed
	// context cancels from can be scheduled late when 100,000 clients
	// compete for the CPU, while this one is readied by the timer itself.
	hard := time.NewTimer(time.Until(r.capAt))
	defer hard.Stop()
	select {
	case <-done:
	case <-hard.C:
	case <-ctx.Done():
	}
}

// result is what one call of a Caller came to.
type result struct {
	result   string
	status   int
	attempts int
	err      string
	end      int64
}

// client plays one simulated client: requests in sequence, think time
// between them, each under the watchdog.
//
// The caller runs on a worker goroutine that the client reuses from one
// request to the next (its stack is grown once), so that the client can
// walk away from a call that never returns: it then cancels that call's
// context, abandons the worker and starts a new one for its next request.
func (r *runner) client(ctx context.Context, id int, at time.Duration) {
	sc := r.sc
	caller := r.subj.New(r.tr, subjects.Params{
		Client:  id,
		Rand:    rand.New(rand.NewPCG(uint64(r.opts.Seed), uint64(id))),
		Policy:  sc.Subject.Policy,
		Virtual: r.opts.Virtual,
	})
	clientID := strconv.Itoa(id)
	scheduled := int64(at)
	var w *worker
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	var sleep *time.Timer
	for seq := range sc.Fleet.Requests {
		if d := time.Duration(scheduled - r.since()); d > 0 {
			if sleep == nil {
				sleep = time.NewTimer(d)
			} else {
				sleep.Reset(d)
			}
			select {
			case <-ctx.Done():
				return
			case <-sleep.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		out := timeline.Outcome{
			Client:    clientID,
			Key:       clientID + "/" + strconv.Itoa(seq),
			Scheduled: scheduled,
			Start:     r.since(),
		}
		r.late.add(out.Start - out.Scheduled)
		slot := &r.slots[id]
		if !slot.begin(&out) {
			return
		}
		if w == nil {
			w = r.newWorker(ctx, caller)
		}
		res, ok := w.call(r, r.base+stubserver.RequestPath(id, seq))
		if !ok {
			w.abandon()
			w = nil
		}
		out.End, out.Result, out.Status, out.Attempts, out.Error = res.end, res.result, res.status, res.attempts, res.err
		if out.Result == timeline.ResultCanceled && ctx.Err() != nil {
			// The run stopped: the slot stays active and seal records it
			// canceled. Writing it here would queue up to 100,000 outcomes
			// on the recorder at once, and seal would wait for them.
			return
		}
		if !slot.end(r, &out) {
			return // the run stopped: seal recorded it canceled
		}
		scheduled = out.End + int64(sc.Fleet.Think)
	}
}

// worker runs one client's calls on a long-lived goroutine.
type worker struct {
	ctx      context.Context // the run's context
	callCtx  context.Context // this worker's calls' context, canceled when abandoned
	cancel   context.CancelFunc
	caller   subjects.Caller
	jobs     chan *http.Request
	results  chan result
	watchdog *time.Timer
}

func (r *runner) newWorker(ctx context.Context, caller subjects.Caller) *worker {
	w := &worker{ctx: ctx, caller: caller, jobs: make(chan *http.Request), results: make(chan result, 1)}
	w.callCtx, w.cancel = context.WithCancel(ctx)
	go func() {
		for req := range w.jobs {
			resp, err := w.caller(req.Context(), req)
			end := r.since()
			res, status, attempts := subjects.Classify(resp, err)
			out := result{result: res, status: status, attempts: attempts, end: end}
			if err != nil {
				out.err = err.Error()
			}
			if resp != nil {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
			}
			w.results <- out
		}
	}()
	return w
}

// stop ends an idle worker.
func (w *worker) stop() {
	close(w.jobs)
	w.cancel()
	if w.watchdog != nil {
		w.watchdog.Stop()
	}
}

// abandon leaves a worker whose call has not returned: its context is
// canceled, and it exits when the call returns.
func (w *worker) abandon() { w.stop() }

// call makes one logical request under the watchdog. ok is false when the
// call did not return (hung, or the run stopped): the worker is then busy
// and must be abandoned.
func (w *worker) call(r *runner, url string) (res result, ok bool) {
	sc := r.sc
	var body io.Reader
	if sc.Fleet.Method != http.MethodGet && sc.Fleet.Method != http.MethodHead {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(w.callCtx, sc.Fleet.Method, url, body)
	if err != nil {
		return result{result: timeline.ResultError, err: err.Error(), end: r.since()}, true
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w.jobs <- req
	if w.watchdog == nil {
		w.watchdog = time.NewTimer(sc.Fleet.Timeout)
	} else {
		w.watchdog.Reset(sc.Fleet.Timeout)
	}
	select {
	case res := <-w.results:
		w.watchdog.Stop()
		if w.ctx.Err() != nil && res.result != timeline.ResultOK {
			// The run's stop, not the library, ended this call.
			return result{result: timeline.ResultCanceled, end: res.end, err: "the run stopped"}, true
		}
		return res, true
	case <-w.watchdog.C:
		return result{result: timeline.ResultHung, end: r.since(),
			err: fmt.Sprintf("no result within the fleet timeout %v", sc.Fleet.Timeout)}, false
	case <-w.ctx.Done():
		w.watchdog.Stop()
		w.cancel()
		// The run stopped (seal has recorded this request canceled).
		return result{result: timeline.ResultCanceled, end: r.since(), err: "the run stopped"}, false
	}
}

// finish records o. Goroutine clients call it once their slot has let them
// (see slot), exec fleets from the runner's goroutine before seal.
func (r *runner) finish(o *timeline.Outcome) {
	if r.rec != nil {
		r.rec.Outcome(o)
	}
	r.count(o)
}

// count adds o to the run's totals.
func (r *runner) count(o *timeline.Outcome) {
	if o.Result == timeline.ResultCanceled {
		r.inFlight.Add(1)
	}
	if o.Harness {
		r.harness.Add(1)
	}
	r.results[resultIndex(o.Result)].Add(1)
	r.done.Add(1)
}

// arrivals yields the fleet's start instants in order.
type arrivals struct {
	a     Arrival
	n, i  int
	rand  *rand.Rand
	clock time.Duration
}

func newArrivals(a Arrival, n int, seed int64) *arrivals {
	return &arrivals{a: a, n: n, rand: rand.New(rand.NewPCG(uint64(seed), 0xa771_7a15))}
}

// next returns the next client's start instant, relative to the run start.
func (a *arrivals) next() time.Duration {
	i := a.i
	a.i++
	switch a.a.Kind {
	case ArrivalRamp:
		if a.n <= 1 {
			return 0
		}
		return time.Duration(float64(a.a.Over) * float64(i) / float64(a.n-1))
	case ArrivalPoisson:
		if i == 0 {
			return 0
		}
		gap := a.rand.ExpFloat64() / a.a.Rate * float64(time.Second)
		a.clock += time.Duration(math.Min(gap, float64(MaxDuration)))
		return a.clock
	}
	return 0
}

// histogram is a lock-free log-linear histogram of non-negative
// nanosecond values, 16 sub-buckets per power of two of microseconds.
type histogram struct {
	counts [64 * 16]atomic.Int64
	max    atomic.Int64
}

func (h *histogram) add(ns int64) {
	ns = max(ns, 0)
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			break
		}
	}
	h.counts[bucketOf(uint64(ns/1000))].Add(1)
}

func bucketOf(us uint64) int {
	if us < 16 {
		return int(us)
	}
	e := bits.Len64(us) - 5
	return (e+1)*16 + int((us>>e)&15)
}

// bucketLow is the smallest value (µs) of bucket i.
func bucketLow(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	return uint64(16+i%16) << e
}

func (h *histogram) quantile(q float64) time.Duration {
	var total int64
	for i := range h.counts {
		total += h.counts[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			return time.Duration(bucketLow(i)) * time.Microsecond
		}
	}
	return time.Duration(h.max.Load())
}

func (h *histogram) summary() Lateness {
	return Lateness{P50: h.quantile(0.5), P99: h.quantile(0.99), Max: time.Duration(h.max.Load())}
}
