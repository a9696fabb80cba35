// Serve's recording lifecycle: a stub serving a scenario's server on a
// listener until it is stopped, recording every request it sees, its
// timeline closed by an end record with the host's noise. With the
// control API (ServeOptions.Control, control.go) a reset ends the
// recording and starts the next one on a fresh stub: each is a
// generation.

package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
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
	// Record receives the NDJSON timeline (nil: nothing is recorded, but
	// with Control, which keeps it in memory). Serve does not close it.
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
	// Control, when set, mounts the control API under ControlPrefix on
	// the listener (see ControlOptions).
	Control *ControlOptions
	// Probe is the command line of a noise probe process (as
	// RunOptions.Probe). A recording runs one from when a client on
	// this host is seen (a listener on loopback, or a peer with a
	// loopback address or one of this host's), so that its end record
	// holds the lateness that such clients met, as an exec fleet's does.
	// Empty: no probe source.
	Probe []string
}

// A Serving is a stub made by NewServe, ready to Serve.
type Serving struct {
	opts  ServeOptions
	start time.Time // recording 1's time zero (unless first-request)

	httpSrv *http.Server
	// grpc serves instead of httpSrv when the stub speaks gRPC
	// (server.protocol, serve --grpc).
	grpc     stubserver.FrontEnd
	fresh    stubserver.FreshConns // connections that have not sent a request yet
	stopping chan struct{}
	stopOnce sync.Once
	measure  bool // Serve runs: each recording measures the host's noise
	now      func() time.Time
	// local is set once a client on this host is seen: each recording's
	// meter then runs the probe (probeLocal).
	local     atomic.Bool
	hostAddrs []netip.Addr // this host's addresses, for localPeer

	mu      sync.Mutex // resets, and the stop
	cur     atomic.Pointer[generation]
	stopped bool             // Serve is stopping: no more resets
	past    stubserver.Stats // the retired recordings' counts
}

// A generation is one recording: its scenario, its stub (quota, limiters,
// capacity queue, Retry-After clocks and mix draws of its own) and its
// timeline.
type generation struct {
	n        int // 1 for the first recording, +1 each reset
	sc       *scenarios.Scenario
	cfg      stubserver.Config
	notes    []string
	noSource bool
	epoch    time.Time // the first recording's only
	listened time.Time // when it began: time zero but with first-request
	srv      *stubserver.Server
	stamps   *noise.Stamps // nil without a recording
	meter    *noise.Meter  // nil when not measured
	sink     *sink         // nil: nothing recorded
	closer   io.Closer     // the writer the control API opened for it

	// The recording opens when the phase clock starts (at once, or at the
	// first request), so its meta record names time zero.
	recMu    sync.Mutex
	rec      *timeline.Recorder
	enc      *timeline.Encoder // rec's, the end record's once rec is closed
	recErr   error
	stopping bool // set before a clock that never started is begun at shutdown
	ended    bool // the end record is written: rec is closed
}

// NewServe builds the stub that serves sc's server (opts.Server); its
// error is the server's configuration's.
func NewServe(sc *scenarios.Scenario, opts ServeOptions) (*Serving, error) {
	if opts.Listened.IsZero() {
		opts.Listened = time.Now()
	}
	s := &Serving{opts: opts, start: opts.Listened, stopping: make(chan struct{}), now: time.Now}
	if len(opts.Probe) > 0 {
		s.hostAddrs = hostAddrs()
	}
	if !opts.Epoch.IsZero() {
		s.start = AnchorEpoch(opts.Epoch)
	}
	cfg := sc.Server
	if opts.Server != nil {
		cfg = *opts.Server
	}
	var w io.Writer
	if opts.Record != nil {
		w = opts.Record
	}
	g, err := s.newGeneration(1, sc, cfg, opts.Notes, opts.NoSource, w, opts.Listened, opts.Epoch)
	if err != nil {
		return nil, err
	}
	if g.sink != nil && opts.Control != nil {
		g.sink.where = opts.Control.Output
	}
	s.cur.Store(g)
	var h http.Handler = g.srv
	if opts.Control != nil {
		h = s // the front: the control API, and the current stub
	}
	s.httpSrv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: stubserver.ReadHeaderTimeout,
		IdleTimeout:       stubserver.IdleTimeout,
		MaxHeaderBytes:    stubserver.MaxHeaderBytes,
		ConnState:         s.connState,
		ConnContext:       noise.ConnContext, // for the stamps of every recording
	}
	if opts.Logger != nil {
		s.httpSrv.ErrorLog = slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)
	}
	if g.cfg.Protocol == stubserver.ProtocolGRPC {
		if opts.Control != nil {
			return nil, errors.New("runner: serve: the control API is HTTP: it cannot share a gRPC stub's listener")
		}
		newFront := stubserver.FrontEndFor(stubserver.ProtocolGRPC)
		if newFront == nil {
			return nil, errors.New("runner: serve: protocol grpc has no front end: import stubserver/stubgrpc")
		}
		s.grpc = newFront(h)
	}
	return s, nil
}

// newGeneration builds recording n of sc on a fresh stub, which starts
// its clock at listened (or at the first request; at epoch when set) and
// records to w (nil: nowhere, or memory with the control API).
func (s *Serving) newGeneration(n int, sc *scenarios.Scenario, cfg stubserver.Config, notes []string, noSource bool, w io.Writer, listened, epoch time.Time) (*generation, error) {
	o := s.opts
	g := &generation{n: n, sc: sc, cfg: cfg, notes: notes, noSource: noSource, epoch: epoch, listened: listened}
	if w != nil || o.Control != nil {
		g.sink = newSink(w)
		g.stamps = noise.NewStamps()
	}
	start := listened
	if !epoch.IsZero() {
		start = AnchorEpoch(epoch)
	}
	var divert http.Handler
	if o.Control != nil {
		divert = s // the front: a request that reaches g after a reset sealed it
	}
	srv, err := stubserver.New(cfg, stubserver.Options{
		Divert:              divert,
		Stamps:              g.stamps,
		OnAttempt:           o.OnAttempt,
		Start:               start,
		StartOnFirstRequest: o.StartOnFirstRequest,
		OpenRecorder:        g.openRecorder(s),
		Seed:                o.Seed,
		Metrics:             o.Metrics,
		NewLimiter:          o.NewLimiter,
		Logger:              o.Logger,
	})
	if err != nil {
		g.recMu.Lock()
		if g.rec != nil {
			g.rec.Close()
		}
		g.recMu.Unlock()
		return nil, err
	}
	g.srv = srv
	return g, nil
}

// Stub is the stub server of the current recording (its phases, stats
// and clock).
func (s *Serving) Stub() *stubserver.Server { return s.cur.Load().srv }

// Start is time zero of the first recording, unless the phases start at
// the first request.
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

// meta is g's meta record with time zero start; noRequest says no request
// came (with --start first-request).
func (g *generation) meta(s *Serving, start time.Time, noRequest bool) *timeline.Meta {
	o := s.opts
	o.Epoch, o.NoSource = g.epoch, g.noSource
	meta := ServeMeta(g.sc, start, o)
	if late := g.listened.Sub(start); !g.epoch.IsZero() && late > 0 {
		meta.Notes = append(meta.Notes, fmt.Sprintf("the server started %v after the epoch", late.Round(time.Millisecond)))
	}
	meta.Notes = append(meta.Notes, g.notes...)
	if g.n > 1 {
		meta.Notes = append(meta.Notes, fmt.Sprintf("recording %d of this serve, begun by a reset (POST %sreset)", g.n, ControlPrefix))
	}
	if o.StartOnFirstRequest {
		note := "phases started at the first request (--start first-request)"
		if noRequest {
			note = "--start first-request: no request arrived; time zero is when the server listened"
		}
		meta.Notes = append(meta.Notes, note)
	}
	return meta
}

// openRecorder is the stub's OpenRecorder: the recording's meta record is
// written when the phase clock starts.
func (g *generation) openRecorder(s *Serving) func(time.Time) *timeline.Recorder {
	return func(start time.Time) *timeline.Recorder {
		g.recMu.Lock()
		defer g.recMu.Unlock()
		if g.sink == nil {
			return nil
		}
		enc := timeline.NewEncoder(g.sink)
		g.enc = enc
		if err := enc.EncodeMeta(g.meta(s, start, g.stopping)); err != nil {
			g.recErr = err
		}
		g.rec = timeline.NewRecorder(enc, 0)
		return g.rec
	}
}

// Serve serves on ln until ctx ends, opts.Duration passes (counted from
// time zero when it is ahead) or the listener fails, then shuts the stub
// down and closes the recording with its end record (see serveEnd). It
// returns the stub's counts (every recording's) and the listener's
// failure (net.ErrClosed is not one), else the recording's.
func (s *Serving) Serve(ctx context.Context, ln net.Listener) (stubserver.Stats, error) {
	s.mu.Lock()
	s.measure = true
	if g := s.cur.Load(); g.sink != nil && g.meter == nil {
		g.meter = serveMeter(g.stamps) // the host's noise while serving, for the end record
		if s.localPeer(ln.Addr()) {
			s.local.Store(true) // every client is on this host
		}
		s.probeLocal(g)
	}
	s.mu.Unlock()
	served := make(chan error, 1)
	go func() {
		var err error
		if s.grpc != nil {
			err = s.grpc.Serve(ln)
		} else {
			err = s.httpSrv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
	}()

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
	return s.stop(ctx, time.Now(), serveErr)
}

// stop shuts the listener and the current stub down, and ends the current
// recording as of stopped (see serveEnd).
func (s *Serving) stop(ctx context.Context, stopped time.Time, serveErr error) (stubserver.Stats, error) {
	s.mu.Lock()
	s.stopped = true
	g := s.cur.Load()
	s.mu.Unlock()
	nz := g.meter.Stop()

	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.stopOnce.Do(func() { close(s.stopping) })
	// The stub first: it releases its hanging and delayed requests, so
	// the listener's shutdown does not wait for them.
	if err := g.srv.Shutdown(shutCtx); err != nil && serveErr == nil {
		serveErr = err
	}
	// http.Server.Shutdown waits 5s for a connection that was opened but
	// never used (a client's spare keep-alive connection): close those now.
	s.fresh.CloseAll()
	if s.grpc != nil {
		stopGRPC(shutCtx, s.grpc)
	} else if err := s.httpSrv.Shutdown(shutCtx); err != nil && serveErr == nil {
		serveErr = fmt.Errorf("stubserver: shutdown: %w", err)
	}
	end := timeline.End{Reason: timeline.EndCompleted, Noise: nz}
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
	err := g.end(s, stopped, end)
	if err != nil && serveErr == nil {
		serveErr = err
	}
	s.mu.Lock()
	st := addStats(s.past, g.srv.Stats())
	s.mu.Unlock()
	return st, serveErr
}

// end closes g's recording with end (its At filled in from stopped):
// every request g's stub handled is recorded before. A clock that never
// started (first-request, no request) is begun at g's start so the
// recording still gets its meta.
func (g *generation) end(s *Serving, stopped time.Time, end timeline.End) error {
	g.recMu.Lock()
	g.stopping = true
	g.recMu.Unlock()
	g.srv.Begin(g.listened) // no request came: the recording still gets its meta
	g.recMu.Lock()
	defer g.recMu.Unlock()
	err, rec, enc := g.recErr, g.rec, g.enc
	g.ended = true
	if err == nil && rec != nil {
		err = serveEnd(g.srv, rec, enc, stopped, end)
	}
	if rec != nil {
		if cerr := rec.Close(); err == nil {
			err = cerr
		}
	}
	if g.closer != nil {
		if cerr := g.closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// connState is the http.Server's ConnState: see FreshConns; the first
// client on this host starts the current recording's probe.
func (s *Serving) connState(c net.Conn, st http.ConnState) {
	if st == http.StateNew && !s.local.Load() && s.localPeer(c.RemoteAddr()) {
		s.local.Store(true)
		s.probeLocal(s.cur.Load())
	}
	s.fresh.Track(c, st, s.stopping)
}

// probeLocal starts g's probe when a client on this host has been seen.
// A reset calls it once its generation is current, so that a client seen
// meanwhile starts the probe of one generation or the other, and a
// second start is a no-op (Meter.StartProbe).
func (s *Serving) probeLocal(g *generation) {
	if s.local.Load() {
		g.meter.StartProbe(s.opts.Probe)
	}
}

// localPeer says whether addr (a listener's, or a connection's remote
// address) is on this host: a loopback address, or one of the host's
// own. False without a probe to run (hostAddrs unread).
func (s *Serving) localPeer(addr net.Addr) bool {
	if len(s.opts.Probe) == 0 || addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	return ip.IsLoopback() || slices.Contains(s.hostAddrs, ip)
}

// hostAddrs are this host's interface addresses (none when unreadable).
func hostAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			ips = append(ips, p.Addr().Unmap())
		}
	}
	return ips
}

// addStats sums two stubs' counts.
func addStats(a, b stubserver.Stats) stubserver.Stats {
	return stubserver.Stats{
		Attempts:       a.Attempts + b.Attempts,
		OK:             a.OK + b.OK,
		Throttled429:   a.Throttled429 + b.Throttled429,
		Unavailable503: a.Unavailable503 + b.Unavailable503,
		Other:          a.Other + b.Other,
		Faults:         a.Faults + b.Faults,
	}
}

// serveEnd writes a serve recording's end record once serving stopped at
// stopped: why (completed at --duration or at a reset, interrupted by a
// signal, error when the listener failed), when in run time, and the host
// noise measured while serving. It closes rec first, whose encoder enc
// then is the caller's. A serve recording's end record is the stub's
// account only: the analyzer judges no fleet by it (no outcomes, nothing
// scheduled) and merge joins only the fleet files' end records.
func serveEnd(srv *stubserver.Server, rec *timeline.Recorder, enc *timeline.Encoder, stopped time.Time, end timeline.End) error {
	if err := rec.Close(); err != nil {
		return err
	}
	if zero, ok := srv.Started(); ok {
		end.At = max(0, int64(stopped.Sub(zero)))
	}
	if err := enc.EncodeEnd(&end); err != nil {
		return err
	}
	return enc.Flush()
}

// serveMeter measures the host's noise for a serve recording. Its clients
// run in other processes the meter cannot see: unless a probe measures
// them (probeLocal), the stub's socket waits (stamps) stand for how late
// they may have run.
func serveMeter(stamps *noise.Stamps) *noise.Meter {
	return noise.Start(noise.Options{Stamps: stamps, StampsLate: true})
}
