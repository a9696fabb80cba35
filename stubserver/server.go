package stubserver

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/timeline"
)

// Hardening limits of the http.Server that Serve runs.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
	// MaxBodyBytes bounds a request body: the server reads and discards up
	// to this much, and a longer body fails the read (the connection is not
	// reused).
	MaxBodyBytes = 1 << 20
)

// Options are the run-time settings of a Server; the zero value is usable.
type Options struct {
	// Start is time zero of the run (zero: time.Now() in New). Every
	// recorded instant is time.Since(Start) on the monotonic clock. A
	// Start in the future (an epoch several processes share) holds each
	// request that arrives before it until then, when the scenario
	// begins, so no recorded instant is before time zero; a request whose
	// client leaves first, or that the server's shutdown finds waiting, is
	// not recorded.
	Start time.Time
	// StartOnFirstRequest starts the run's clock — the phase schedule and
	// time zero of every recorded instant — at the arrival of the first
	// recorded request instead (Start is ignored; /metrics and /healthz
	// do not start it), so a client fleet that is slow to start still
	// meets every phase. Begin starts it explicitly.
	StartOnFirstRequest bool
	// Metrics, when set, builds the handler of GET /metrics from the
	// server (stubprom.Handler for Prometheus); nil answers /metrics with
	// 404. Either way /metrics is never recorded.
	Metrics func(*Server) http.Handler
	// Recorder receives one attempt per request (nil: record nothing).
	// The Server never closes it.
	Recorder *timeline.Recorder
	// OpenRecorder, when set, is called once when the clock starts (in
	// New, or at the first request with StartOnFirstRequest) with time
	// zero, before any attempt is recorded; the Recorder it returns
	// replaces Recorder. It lets a caller write a meta record that names
	// the start. The Server never closes it.
	OpenRecorder func(start time.Time) *timeline.Recorder
	// Seed seeds the mix draws and the Retry-After spread. Each draw is
	// a function of the seed and the attempt (its key and number), not of
	// the order requests arrive in, so a seeded run replays.
	Seed int64
	// Virtual says the server runs in a testing/synctest bubble, where
	// many requests arrive at one instant: the capacity model then admits
	// them in a fixed order (client, key, attempt) a nanosecond later, so
	// a seeded run replays (see Capacity).
	Virtual bool
	// NewLimiter builds the Limiter of each spec: the quota's limits, or
	// one per tier (nil: NewMemoryLimiter, whatever the quota's Backend).
	NewLimiter func(LimiterSpec) (Limiter, error)
	// Logger gets limiter and connection errors (nil: silent).
	Logger *slog.Logger
	// UpstreamDial dials Config.Upstream's host (nil: a net.Dialer with
	// UpstreamDialTimeout); tests reach an in-memory upstream with it.
	UpstreamDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnAttempt, when set, sees every attempt right after it is handed to
	// the Recorder, on the request's goroutine: it must be quick, safe for
	// concurrent use, and must not keep a (a live status display copies
	// what it needs).
	OnAttempt func(a *timeline.Attempt)
	// NewFrontEnd builds the front end that serves a Config.Protocol other
	// than HTTP; nil: the one registered for it (RegisterFrontEnd; importing
	// stubserver/stubgrpc registers gRPC's). New fails without either.
	NewFrontEnd func(*Server) FrontEnd
	// Divert, when set, is handed every request that arrives once Hold
	// (or Seal) has begun, instead of holding it: a front that moved on
	// to another Server sends it there (serve's control API at a reset).
	// A request HoldFrom holds is held still.
	Divert http.Handler
	// Stamps, when set, measures how late the stub stamps each arrival
	// behind the kernel's receipt of it (noise.Stamps): a real-time
	// recording's evidence of a backlog read at once.
	Stamps *noise.Stamps
}

// Stats are the Server's running totals, for progress displays. Attempts
// counts arrivals; the others count answers, so their sum lags Attempts by
// the requests in progress.
type Stats struct {
	Attempts       int64 // requests received (excluding /metrics and /healthz)
	OK             int64 // 2xx responses
	Throttled429   int64
	Unavailable503 int64
	Other          int64 // any other status
	Faults         int64 // resets, hangs, and responses abandoned by the client
}

// A Server is the stub: an http.Handler answering by the phase schedule, and
// the http.Server that Serve runs. It is safe for concurrent use.
type Server struct {
	cfg       Config
	start     time.Time
	startWall time.Time
	phases    []phase
	rec       *timeline.Recorder
	log       *slog.Logger

	quota     *quotaState // nil: no quota
	pool      *pool       // nil: infinite capacity
	virtual   bool        // Options.Virtual
	settler   settler     // virtual: decide once the instant has settled
	onAttempt func(*timeline.Attempt)
	stamps    *noise.Stamps // Options.Stamps
	proxy     *proxy        // nil: no upstream

	seed uint64 // Options.Seed: the draws' (see draw)

	attempts attemptCounter
	stats    struct{ attempts, ok, t429, u503, other, faults atomic.Int64 }
	metrics  *metrics

	started      atomic.Bool // the clock has started: start, startWall and rec are set
	startMu      sync.Mutex
	openRecorder func(time.Time) *timeline.Recorder

	httpSrv   *http.Server
	front     FrontEnd   // Options.NewFrontEnd's, nil for HTTP
	grpc      bool       // Config.Protocol is gRPC
	fresh     FreshConns // connections that have not sent a request yet
	stopping  chan struct{}
	sealed    atomic.Bool   // Seal has begun: hold requests, unrecorded
	divert    http.Handler  // Options.Divert
	holdFrom  atomic.Int64  // run instant from which requests are held (HoldFrom; MaxInt64: none)
	closing   chan struct{} // closed by Shutdown and Close: release them
	closeOnce sync.Once
	stopOnce  sync.Once
	inflight  atomic.Int64  // recorded requests being handled
	idle      chan struct{} // a token when inflight drops to 0 after stopping
}

// New builds a Server for cfg. It fails with an error wrapping
// ErrInvalidConfig (and the FieldErrors) when cfg does not validate, or with
// the limiter's error.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &Server{
		cfg:          cfg,
		start:        opts.Start,
		rec:          opts.Recorder,
		openRecorder: opts.OpenRecorder,
		log:          opts.Logger,
		onAttempt:    opts.OnAttempt,
		stamps:       opts.Stamps,
		seed:         uint64(opts.Seed),
		stopping:     make(chan struct{}),
		idle:         make(chan struct{}, 1),
		closing:      make(chan struct{}),
		virtual:      opts.Virtual,
		divert:       opts.Divert,
	}
	s.holdFrom.Store(math.MaxInt64)
	s.settler.closing = s.closing
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.attempts.cur = make(map[string]int32)
	s.phases = layOut(cfg)
	if k := cfg.Capacity; k != nil {
		s.pool = newPool(*k, s.phases, opts.Seed, opts.Virtual)
	}
	if q := cfg.Quota; q != nil {
		qs, err := newQuotaState(q, opts.NewLimiter)
		if err != nil {
			return nil, err
		}
		s.quota = qs
	}
	if cfg.Upstream != "" {
		u, _ := ParseUpstream(cfg.Upstream) // Validate checked it
		s.proxy = newProxy(u, opts.UpstreamDial, s.log.Warn)
	}
	if !opts.StartOnFirstRequest {
		start := opts.Start
		if start.IsZero() {
			start = time.Now()
		}
		s.Begin(start)
	}
	s.metrics = &metrics{byCode: make([][numCodes]atomic.Uint64, len(s.phases))}
	if opts.Metrics != nil {
		s.metrics.handler = opts.Metrics(s)
	}
	s.httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState:         s.connState,
	}
	if opts.Stamps != nil {
		s.httpSrv.ConnContext = noise.ConnContext
	}
	if cfg.Protocol != "" && cfg.Protocol != ProtocolHTTP {
		newFront := opts.NewFrontEnd
		if newFront == nil {
			if f := FrontEndFor(cfg.Protocol); f != nil {
				newFront = func(s *Server) FrontEnd { return f(s) }
			}
		}
		if newFront == nil {
			return nil, fmt.Errorf("stubserver: protocol %s has no front end: import its package (stubserver/stubgrpc for grpc)", cfg.Protocol)
		}
		s.grpc = cfg.Protocol == ProtocolGRPC
		s.front = newFront(s)
	}
	return s, nil
}

// Stats returns the running totals.
func (s *Server) Stats() Stats {
	return Stats{
		Attempts:       s.stats.attempts.Load(),
		OK:             s.stats.ok.Load(),
		Throttled429:   s.stats.t429.Load(),
		Unavailable503: s.stats.u503.Load(),
		Other:          s.stats.other.Load(),
		Faults:         s.stats.faults.Load(),
	}
}
