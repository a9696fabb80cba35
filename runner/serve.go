// Serve's recording lifecycle: a stub serving a scenario's server on a
// listener until it is stopped, recording every request it sees, its
// timeline closed by an end record with the host's noise.

package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// ServeOptions tune a Serving.
type ServeOptions struct {
	// Server is the stub's configuration (nil: the scenario's server).
	// The meta record describes the scenario as written.
	Server *stubserver.Config
	Seed   int64
	// Listened is when the listener opened (zero: NewServe's now): time
	// zero, unless Epoch is set or StartOnFirstRequest (then the first
	// recorded request is, or Listened when none came).
	Listened            time.Time
	StartOnFirstRequest bool
	// Epoch, when set, is time zero: a wall-clock instant shared with the
	// fleet's processes (RunOptions.Epoch); a request before it waits.
	Epoch time.Time
	// Duration stops serving by itself, counted from time zero when it is
	// ahead (0: only when ctx ends).
	Duration time.Duration
	// Record receives the NDJSON timeline (nil: nothing is recorded).
	// Serve does not close it.
	Record io.Writer
	// NoSource leaves the meta record without the scenario's source (the
	// CLI's default server is no scenario file).
	NoSource bool
	// Notes go into the meta record, after the epoch's.
	Notes []string
	// Tool is the retrylab version and Host the machine's name (recorded
	// with an epoch only) in the meta record.
	Tool, Host string
	// NewLimiter, Metrics, Logger and OnAttempt are the stub's
	// (stubserver.Options).
	NewLimiter func(stubserver.LimiterSpec) (stubserver.Limiter, error)
	Metrics    func(*stubserver.Server) http.Handler
	Logger     *slog.Logger
	OnAttempt  func(*timeline.Attempt)
}

// A Serving is a stub made by NewServe, ready to Serve.
type Serving struct {
	sc    *scenarios.Scenario
	opts  ServeOptions
	start time.Time
	srv   *stubserver.Server
	// stamps measures how late the stub stamps arrivals, for the end
	// record's noise (nil without a recording).
	stamps *noise.Stamps

	// The recording opens when the phase clock starts (at once, or at the
	// first request), so its meta record names time zero.
	recMu    sync.Mutex
	rec      *timeline.Recorder
	enc      *timeline.Encoder // rec's, the end record's once rec is closed
	recErr   error
	stopping bool // set before a clock that never started is begun at shutdown
}

// NewServe builds the stub that serves sc's server (opts.Server); its
// error is the server's configuration's.
func NewServe(sc *scenarios.Scenario, opts ServeOptions) (*Serving, error) {
	if opts.Listened.IsZero() {
		opts.Listened = time.Now()
	}
	s := &Serving{sc: sc, opts: opts, start: opts.Listened}
	if !opts.Epoch.IsZero() {
		s.start = AnchorEpoch(opts.Epoch)
	}
	cfg := sc.Server
	if opts.Server != nil {
		cfg = *opts.Server
	}
	if opts.Record != nil {
		s.stamps = noise.NewStamps()
	}
	srv, err := stubserver.New(cfg, stubserver.Options{
		Stamps:              s.stamps,
		OnAttempt:           opts.OnAttempt,
		Start:               s.start,
		StartOnFirstRequest: opts.StartOnFirstRequest,
		OpenRecorder:        s.openRecorder,
		Seed:                opts.Seed,
		Metrics:             opts.Metrics,
		NewLimiter:          opts.NewLimiter,
		Logger:              opts.Logger,
	})
	if err != nil {
		s.closeRecorder()
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// Stub is the stub server (its phases, stats and clock).
func (s *Serving) Stub() *stubserver.Server { return s.srv }

// Start is time zero, unless the phases start at the first request.
func (s *Serving) Start() time.Time { return s.start }

// ServeMeta is the meta record of a serve recording of sc from time zero
// start: the scenarios package's, as run's, with no fleet of its own.
func ServeMeta(sc *scenarios.Scenario, start time.Time, opts ServeOptions) *timeline.Meta {
	mo := scenarios.MetaOptions{Recorder: "serve", Seed: opts.Seed, Start: start, Tool: opts.Tool}
	if e := opts.Epoch; !e.IsZero() {
		mo.Start, mo.Epoch, mo.Host = e, e, opts.Host
	}
	m := sc.Meta(mo)
	if opts.NoSource {
		m.Source = nil
	}
	return m
}

// openRecorder is the stub's OpenRecorder: the recording's meta record is
// written when the phase clock starts.
func (s *Serving) openRecorder(start time.Time) *timeline.Recorder {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	o := s.opts
	if o.Record == nil {
		return nil
	}
	meta := ServeMeta(s.sc, start, o)
	if late := o.Listened.Sub(start); !o.Epoch.IsZero() && late > 0 {
		meta.Notes = append(meta.Notes, fmt.Sprintf("the server started %v after the epoch", late.Round(time.Millisecond)))
	}
	meta.Notes = append(meta.Notes, o.Notes...)
	if o.StartOnFirstRequest {
		note := "phases started at the first request (--start first-request)"
		if s.stopping {
			note = "--start first-request: no request arrived; time zero is when the server listened"
		}
		meta.Notes = append(meta.Notes, note)
	}
	enc := timeline.NewEncoder(o.Record)
	s.enc = enc
	if err := enc.EncodeMeta(meta); err != nil {
		s.recErr = err
	}
	s.rec = timeline.NewRecorder(enc, 0)
	return s.rec
}

func (s *Serving) closeRecorder() error {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if s.rec == nil {
		return nil
	}
	return s.rec.Close()
}

// Serve serves on ln until ctx ends, opts.Duration passes (counted from
// time zero when it is ahead) or the listener fails, then shuts the stub
// down and closes the recording with its end record (see serveEnd). It
// returns the stub's counts and the listener's failure (net.ErrClosed is
// not one), else the recording's.
func (s *Serving) Serve(ctx context.Context, ln net.Listener) (stubserver.Stats, error) {
	srv := s.srv
	meter := serveNoise(s.opts.Record, s.stamps) // the host's noise while serving, for the end record
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var timer <-chan time.Time
	if s.opts.Duration > 0 {
		t := time.NewTimer(s.opts.Duration + max(0, time.Until(s.start)))
		defer t.Stop()
		timer = t.C
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case <-timer:
	case serveErr = <-served:
	}
	stopped, nz := time.Now(), meter.Stop()

	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && serveErr == nil {
		serveErr = err
	}
	st := srv.Stats()
	s.recMu.Lock()
	s.stopping = true
	s.recMu.Unlock()
	srv.Begin(s.opts.Listened) // no request came: the recording still gets its meta
	s.recMu.Lock()
	err, rec, enc := s.recErr, s.rec, s.enc
	s.recMu.Unlock()
	if err == nil && rec != nil {
		err = serveEnd(ctx, srv, rec, enc, stopped, serveErr, nz)
	}
	if rec != nil {
		if cerr := rec.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && serveErr == nil {
		serveErr = err
	}
	return st, serveErr
}

// serveNoise starts measuring the host's noise for a serve recording's end
// record (see serveEnd); nil, measuring nothing, without a recording.
func serveNoise(record io.Writer, stamps *noise.Stamps) *noise.Meter {
	if record == nil {
		return nil
	}
	// The clients are in other processes, unmeasured: the stub's socket
	// waits stand for how late they may have run.
	return noise.Start(noise.Options{Stamps: stamps, StampsLate: true})
}

// serveEnd writes a serve recording's end record once serving stopped at
// stopped: why (completed at --duration, interrupted by a signal, error
// when the listener failed), when in run time, and the host noise measured
// while serving (nz). It closes rec first, whose encoder enc then is the
// caller's. A serve recording's end record is the stub's account only:
// the analyzer judges no fleet by it (no outcomes, nothing scheduled) and
// merge joins only the fleet files' end records.
func serveEnd(ctx context.Context, srv *stubserver.Server, rec *timeline.Recorder, enc *timeline.Encoder, stopped time.Time, serveErr error, nz *timeline.Noise) error {
	if err := rec.Close(); err != nil {
		return err
	}
	end := timeline.End{Reason: timeline.EndCompleted, Noise: nz}
	if zero, ok := srv.Started(); ok {
		end.At = max(0, int64(stopped.Sub(zero)))
	}
	switch {
	case serveErr != nil && !errors.Is(serveErr, net.ErrClosed):
		end.Reason, end.Errors = timeline.EndError, []string{serveErr.Error()}
	case ctx.Err() != nil:
		end.Reason = timeline.EndInterrupted
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) {
			end.Signal = in.Signal
		}
	}
	if err := enc.EncodeEnd(&end); err != nil {
		return err
	}
	return enc.Flush()
}
