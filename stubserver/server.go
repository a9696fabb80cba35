package stubserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	fresh     sync.Map // net.Conn → struct{}: connections that have not sent a request yet
	stopping  chan struct{}
	sealed    atomic.Bool   // Seal has begun: hold requests, unrecorded
	holdFrom  atomic.Int64  // run instant from which requests are held (HoldFrom; MaxInt64: none)
	closing   chan struct{} // closed by Shutdown and Close: release them
	closeOnce sync.Once
	stopOnce  sync.Once
	inflight  atomic.Int64  // recorded requests being handled
	idle      chan struct{} // a token when inflight drops to 0 after stopping
}

// phase is a Phase laid out in run time.
type phase struct {
	Phase
	start, end int64 // ns; end 0: until the run ends
	latency    time.Duration
	cum        []float64 // cumulative mix weights
	desc       string
	raDesc     string
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
	}
	s.holdFrom.Store(math.MaxInt64)
	s.settler.closing = s.closing
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.attempts.cur = make(map[string]int32)
	if len(cfg.Phases) == 0 {
		cfg.Phases = []Phase{{Name: "ok"}}
	}
	var at int64
	for i, p := range cfg.Phases {
		if p.Name == "" {
			p.Name = "phase-" + strconv.Itoa(i+1) // 1-based, as the scenario loader names them
		}
		ph := phase{Phase: p, start: at, latency: cfg.Latency}
		if p.Latency != 0 {
			ph.latency = p.Latency
		}
		if i < len(cfg.Phases)-1 {
			at += int64(p.For)
			ph.end = at
		}
		var sum float64
		for _, w := range p.Respond.Mix {
			sum += w.Weight
			ph.cum = append(ph.cum, sum)
		}
		ph.desc, ph.raDesc = describe(p)
		s.phases = append(s.phases, ph)
	}
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
	return s, nil
}

func describe(p Phase) (respond, retryAfter string) {
	r := p.Respond
	switch r.Kind {
	case "", RespondOK:
		respond = RespondOK
	case RespondQuota:
		respond = RespondQuota
	case RespondStatus:
		respond = "status " + strconv.Itoa(r.Status)
	case RespondFault:
		respond = "fault " + r.Fault
	case RespondPassthrough:
		respond = RespondPassthrough
	case RespondMix:
		var b strings.Builder
		b.WriteString("mix")
		for _, w := range r.Mix {
			b.WriteByte(' ')
			if w.Passthrough {
				b.WriteString(RespondPassthrough)
			} else if w.Fault != "" {
				b.WriteString(w.Fault)
			} else {
				b.WriteString(strconv.Itoa(w.Status))
			}
			b.WriteByte(':')
			b.WriteString(strconv.FormatFloat(w.Weight, 'g', -1, 64))
		}
		respond = b.String()
	}
	ra := p.RetryAfter
	if ra.Form == "" || ra.Form == FormNone {
		return respond, ""
	}
	v := ra.Value
	if v == "" || v == ValueFixed {
		v = ra.Fixed.String()
	}
	retryAfter = ra.Form + " " + v
	if ra.Spread > 0 {
		retryAfter += " spread " + ra.Spread.String()
	}
	return respond, retryAfter
}

// Begin starts the run's clock at start unless it has started (see
// Options.StartOnFirstRequest), and returns time zero. A Server started on
// its first request that never got one can be begun by its owner at
// shutdown, so its recording still gets its meta record.
func (s *Server) Begin(start time.Time) time.Time {
	if s.started.Load() {
		return s.start
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if !s.started.Load() {
		s.start = start
		s.startWall = start.Round(0)
		if s.openRecorder != nil {
			s.rec = s.openRecorder(start)
		}
		s.started.Store(true)
	}
	return s.start
}

// Started reports time zero, and whether the clock has started.
func (s *Server) Started() (time.Time, bool) {
	if !s.started.Load() {
		return time.Time{}, false
	}
	return s.start, true
}

// Phases is the schedule laid out in run time, for timeline.Meta.Phases.
func (s *Server) Phases() []timeline.Phase {
	out := make([]timeline.Phase, len(s.phases))
	for i, p := range s.phases {
		out[i] = timeline.Phase{Name: p.Name, Start: p.start, End: p.end, Respond: p.desc, RetryAfter: p.raDesc, Capacity: p.Capacity}
	}
	return out
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

// Serve accepts connections on l with a hardened http.Server
// (ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes) until Shutdown, then
// returns nil; other errors are returned as they are. Serve may be called
// for several listeners.
func (s *Server) Serve(l net.Listener) error {
	err := s.httpSrv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully: it releases hanging and delayed
// requests, stops accepting, waits for active requests to finish (or ctx to
// end), and returns. After it returns nil every answered request has been
// handed to the Recorder; the caller then closes the Recorder.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.closeOnce.Do(func() { close(s.closing) })
	// http.Server.Shutdown waits 5s for a connection that was opened but
	// never used (a client's spare keep-alive connection): close those now.
	s.fresh.Range(func(c, _ any) bool {
		c.(net.Conn).Close()
		return true
	})
	err := s.httpSrv.Shutdown(ctx)
	if err == nil {
		err = s.waitHandlers(ctx)
	}
	s.proxy.closeIdle()
	if err != nil {
		return fmt.Errorf("stubserver: shutdown: %w", err)
	}
	return nil
}

// waitHandlers waits until no request is being handled (one held after
// Hold does not count), or ctx ends.
func (s *Server) waitHandlers(ctx context.Context) error {
	for s.inflight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Hold makes the server hold every request that arrives from now on,
// unrecorded and uncounted, until its client gives up or Shutdown or Close
// ends it with a 503; requests already being handled go on as before.
// Seal begins with it; a caller holds first when it must stop its clients
// from being answered before it releases the hanging requests.
func (s *Server) Hold() { s.sealed.Store(true) }

// hold answers a request the server holds (Hold, HoldFrom): without a
// record (a client answered at once would retry at once, and keep the CPU
// busy while its run's timeline is judged), when the client gives up or
// the server closes.
func (s *Server) hold(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
	w.Header()["Connection"] = connClose
	w.WriteHeader(http.StatusServiceUnavailable)
}

// HoldFrom makes the server hold, as Hold does, every request that
// arrives at or after run instant at (time since Options.Start), whenever
// its handler runs. A run that knows its cap says so at its start: a
// request arriving at the very instant the run stops is then never part
// of it, whether its handler or the caller's Hold runs first (in virtual
// time both happen at one instant, in any order).
func (s *Server) HoldFrom(at time.Duration) { s.holdFrom.Store(int64(at)) }

// Seal stops the recording: it holds every new request (Hold), releases
// hanging and delayed requests, and waits for the requests being handled
// to hand their records to the Recorder (or ctx to end). The caller may
// close the Recorder once Seal returns nil, while connections still wind
// down: a run that stopped at its cap writes its timeline whole first,
// then calls Shutdown or Close.
func (s *Server) Seal(ctx context.Context) error {
	s.Hold()
	s.stopOnce.Do(func() { close(s.stopping) })
	if err := s.waitHandlers(ctx); err != nil {
		return fmt.Errorf("stubserver: seal: %w", err)
	}
	return nil
}

// Close stops the server at once: it releases hanging, delayed and held
// requests, closes the listeners and every connection without waiting for
// them to go idle, then waits for the handlers still running to hand their
// records to the Recorder (or ctx to end). A request cut off this way
// before Seal is recorded abandoned, as for a client that went away. The
// runner tears a run down this way once its timeline is written: a
// graceful Shutdown would wait, polling, for thousands of connections to
// wind down one by one.
func (s *Server) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.httpSrv.Close()
	if err == nil {
		err = s.waitHandlers(ctx)
	}
	s.proxy.closeIdle()
	if err != nil {
		return fmt.Errorf("stubserver: close: %w", err)
	}
	return nil
}

// connState tracks connections that have not sent a request, and closes
// new ones once shutdown has begun.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.fresh.Store(c, struct{}{})
		select {
		case <-s.stopping:
			c.Close()
		default:
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		s.fresh.Delete(c)
	}
}

// phaseAt returns the phase holding run instant at.
func (s *Server) phaseAt(at int64) (int, *phase) {
	for i := range s.phases {
		p := &s.phases[i]
		if p.end == 0 || at < p.end {
			return i, p
		}
	}
	i := len(s.phases) - 1
	return i, &s.phases[i]
}

var (
	contentTypeText = []string{"text/plain; charset=utf-8"}
	healthBody      = []byte("ok\n")
	connClose       = []string{"close"}
	statusBodies    = func() [][]byte {
		b := make([][]byte, 600)
		for i := 200; i < 600; i++ {
			t := http.StatusText(i)
			if t == "" {
				t = "Status"
			}
			b[i] = []byte(strconv.Itoa(i) + " " + t + "\n")
		}
		return b
	}()
)

// ServeHTTP answers r by the phase at its arrival: /metrics (Prometheus)
// and /healthz are served apart and not recorded; every other request is
// recorded as one timeline attempt.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		if s.metrics.handler == nil {
			http.NotFound(w, r)
			return
		}
		s.metrics.handler.ServeHTTP(w, r)
		return
	case "/healthz":
		w.Header()["Content-Type"] = contentTypeText
		if err := s.quota.health(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "503 %v\n", err)
			return
		}
		w.Write(healthBody)
		return
	}
	s.inflight.Add(1)
	arrive := time.Now()
	if s.sealed.Load() || s.started.Load() && int64(arrive.Sub(s.start)) >= s.holdFrom.Load() {
		s.handled() // Seal waits only for requests that record
		s.hold(w, r)
		return
	}
	defer s.handled()
	s.stamps.Observe(r.Context(), arrive)
	if !s.started.Load() {
		s.Begin(arrive) // Options.StartOnFirstRequest: this request is time zero
	}
	if early := s.start.Sub(arrive); early > 0 {
		if !s.awaitStart(r, early) {
			w.Header()["Connection"] = connClose
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		arrive = time.Now()
	}
	if bad := tooLong(r, s.quota != nil && s.quota.endpoint); bad != "" {
		s.reject(w, r, arrive, bad)
		return
	}
	client, key := Identify(r)
	idem := header(r.Header, "Idempotency-Key")
	a := timeline.Attempt{
		Client:     client,
		Key:        key,
		Attempt:    s.attempts.next(key),
		Method:     r.Method,
		Path:       r.URL.Path,
		At:         int64(arrive.Sub(s.start)),
		Idempotent: idem != "",
		IdemKey:    timeline.KeyDigest(idem), // evidence: compared, never kept
	}
	s.stats.attempts.Add(1)
	pi, ph := s.phaseAt(a.At)
	a.Phase = ph.Name
	status, fault := ph.Respond.Status, ph.Respond.Fault
	forward := false // the upstream answers, unless a quota rejects
	switch ph.Respond.Kind {
	case "", RespondOK, RespondQuota:
		status = http.StatusOK
		forward = s.proxy != nil
	case RespondPassthrough:
		status, forward = http.StatusOK, true
	case RespondMix:
		m := ph.Respond.Mix[s.pick(ph.cum, &a)]
		status, fault, forward = m.Status, m.Fault, m.Passthrough
		if forward {
			status = http.StatusOK
		}
	}
	if !forward {
		drain(w, r) // a proxied body streams to the upstream unread
	}

	if fault == FaultHang {
		select {
		case <-r.Context().Done():
		case <-s.stopping:
		}
		// A client that gave up is gone; one the server let go of at
		// shutdown must not get an answer either.
		s.fault(w, &a, pi, timeline.FaultHang, r.Context().Err() == nil)
		return
	}
	if ph.latency > 0 {
		t := time.NewTimer(ph.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-s.stopping:
		}
		t.Stop()
	}
	if fault == FaultReset {
		s.fault(w, &a, pi, timeline.FaultReset, true)
		return
	}
	ctx := r.Context()
	if ctx.Err() != nil {
		// The client left during the latency: decide what it would have
		// got (the quota is still charged, as a provider that counts at
		// arrival would) without letting its cancellation fail the limiter.
		ctx = context.WithoutCancel(ctx)
	}

	now, nowRun := arrive, a.At
	if ph.latency > 0 {
		now = time.Now()
		nowRun = int64(now.Sub(s.start))
	}
	h := w.Header()
	var limDelay time.Duration // the limiter's retry-in
	rateLimited := ph.Respond.Kind == RespondStatus && ph.Respond.RateLimit
	if ph.Respond.Kind == RespondQuota {
		var held bool
		status, limDelay, held = s.takeQuota(ctx, r, h, &a, client, now)
		if held {
			// A shaper held the request: its answer leaves now.
			now = time.Now()
			nowRun = int64(now.Sub(s.start))
		}
		// A limit that answers 403 carries Retry-After as 429 does.
		rateLimited = a.Limit != ""
	}
	if s.pool != nil && status == http.StatusOK && (ph.Respond.Kind == "" || ph.Respond.Kind == RespondOK || ph.Respond.Kind == RespondQuota) {
		// The work: a worker, after a wait in the queue (see Capacity).
		var order string
		if s.pool.virtual {
			order = a.Client + "\x00" + a.Key + "\x00" + strconv.Itoa(int(a.Attempt))
		}
		adm, queued, service := s.serve(r.Context(), order)
		a.Queue, a.Service = int64(queued), int64(service)
		if adm == rejected || adm == released {
			status = http.StatusServiceUnavailable
			a.Limit = timeline.LimitCapacity
		}
		if queued+service > 0 {
			now = time.Now()
			nowRun = int64(now.Sub(s.start))
		}
	}
	if throttling(status) || rateLimited {
		var d time.Duration
		switch ph.RetryAfter.Value {
		case "", ValueFixed:
			d = ph.RetryAfter.Fixed
		case ValueLimiter:
			d = limDelay
		case ValuePhaseEnd:
			d = time.Duration(ph.end - nowRun)
		}
		// delta and date carry whole seconds: their spread is drawn in
		// whole seconds and added after rounding, so it survives the wire;
		// the other forms get it before they are written.
		var extra int64
		if f := ph.RetryAfter.Form; f == FormDelta || f == FormDate {
			extra = s.spreadSeconds(ph, &a)
		} else {
			d += s.spread(ph, &a)
		}
		if v, nb, ok := s.retryAfter(ph.RetryAfter.Form, d, extra, now, nowRun); v != nil {
			h["Retry-After"] = v
			a.RetryAfter, a.NotBefore, a.HasNotBefore = v[0], nb, ok
		}
		if a.RateLimit == "" && (ph.Respond.RateLimit || status == http.StatusTooManyRequests) {
			// A 429 is a rate limit by definition, quota or not: it says
			// the client's allowance is spent (see exhaustedHeaders).
			a.RateLimit = s.exhaustedHeaders(h, r, now, exhaustedReset(ph, a.NotBefore, a.HasNotBefore, nowRun))
		}
	}
	if forward && status == http.StatusOK && r.Context().Err() == nil {
		s.forward(w, r, &a, pi)
		return
	}
	if forward {
		drain(w, r) // a quota rejected it, or its client left: the stub answers
	}
	a.Status = status
	if s.virtual && time.Since(arrive) > 0 {
		s.settler.settle() // a client giving up at this instant has
	}
	if r.Context().Err() != nil {
		// The client went away before the response was written (it gave
		// up during the latency): nothing is sent, so nothing it would
		// have said — Retry-After, not_before, rate-limit headers — is
		// recorded, only the status it would have had.
		a.RetryAfter, a.NotBefore, a.HasNotBefore, a.RateLimit, a.Limit = "", 0, false, "", ""
		clear(h)
		if s.pool != nil && a.Service > 0 {
			s.pool.wastedNs.Add(a.Service)
		}
		s.fault(w, &a, pi, timeline.FaultAbandoned, true)
		return
	}
	h["Content-Type"] = contentTypeText
	// The record is handed over before the response leaves, so a client's
	// next attempt can never be recorded before it. A write that fails
	// after this point (the connection broke in the microseconds between
	// the check above and the write) is logged; the record keeps the
	// status, since net/http reports such failures only after the handler
	// returns.
	a.Done = int64(time.Since(s.start))
	s.count(pi, status)
	s.recordAttempt(&a)
	w.WriteHeader(status)
	if status != http.StatusNoContent && status != http.StatusNotModified {
		if _, err := w.Write(statusBodies[status]); err != nil {
			s.log.Debug("stubserver: write failed after the attempt was recorded", "key", a.Key, "attempt", a.Attempt, "err", err)
		}
	}
}

// recordAttempt hands a to the Recorder and to Options.OnAttempt.
func (s *Server) recordAttempt(a *timeline.Attempt) {
	if s.rec != nil {
		s.rec.Attempt(a)
	}
	if s.onAttempt != nil {
		s.onAttempt(a)
	}
}

// drain reads and discards r's body, at most MaxBodyBytes of it.
func drain(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		io.Copy(io.Discard, r.Body)
	}
}

// awaitStart holds a request that arrived d before time zero (Options.Start
// in the future) until then; false when its client left or the server
// stopped first.
func (s *Server) awaitStart(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.stopping:
	}
	return false
}

// tooLongBodies are the 400 bodies naming the identity that was too long.
var tooLongBodies = func() map[string][]byte {
	m := map[string][]byte{}
	for _, f := range []string{"X-Client-Id", "Idempotency-Key", "API key", "client id", "request key", "endpoint"} {
		m[f] = []byte("400 Bad Request: " + f + " longer than " + strconv.Itoa(MaxIDBytes) + " bytes\n")
	}
	return m
}()

// reject answers 400 to a request with an identity longer than MaxIDBytes
// and records it with its identities and path cut to MaxIDBytes, so no
// table and no record holds the long input.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, arrive time.Time, what string) {
	client, key := identifyCapped(r)
	idem := header(r.Header, "Idempotency-Key")
	a := timeline.Attempt{
		Client:     client,
		Key:        key,
		Attempt:    s.attempts.next(key),
		Method:     capID(r.Method),
		Path:       capID(r.URL.Path),
		At:         int64(arrive.Sub(s.start)),
		Idempotent: idem != "",
		IdemKey:    timeline.KeyDigest(idem),
		Status:     http.StatusBadRequest,
	}
	s.stats.attempts.Add(1)
	pi, ph := s.phaseAt(a.At)
	a.Phase = ph.Name
	a.Done = int64(time.Since(s.start))
	s.count(pi, http.StatusBadRequest)
	s.recordAttempt(&a)
	w.Header()["Content-Type"] = contentTypeText
	w.WriteHeader(http.StatusBadRequest)
	w.Write(tooLongBodies[what])
}

// handled ends a request begun in ServeHTTP, waking Shutdown when it was
// the last.
func (s *Server) handled() {
	if s.inflight.Add(-1) == 0 {
		select {
		case <-s.stopping:
			select {
			case s.idle <- struct{}{}:
			default:
			}
		default:
		}
	}
}

// throttling reports whether status carries Retry-After: 429 and 5xx.
func throttling(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// fault records a and then applies the fault: the connection is closed
// without a response (reset, and abandoned: the client is gone, and must
// not get net/http's default answer if it is only half gone), or — for a
// hang the server let go of at shutdown — aborted so the client sees no
// answer either.
func (s *Server) fault(w http.ResponseWriter, a *timeline.Attempt, pi int, f string, abort bool) {
	a.Fault = f
	a.Done = int64(time.Since(s.start))
	s.stats.faults.Add(1)
	switch f {
	case FaultReset:
		s.metrics.count(pi, codeReset)
	case timeline.FaultAbandoned:
		s.metrics.count(pi, codeAbandoned)
	default:
		s.metrics.count(pi, codeHang)
	}
	s.recordAttempt(a)
	if !abort {
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && f == FaultReset {
		tc.SetLinger(0) // RST, not FIN: a reset
	}
	conn.Close()
}

func (s *Server) count(pi, status int) {
	switch {
	case status >= 200 && status < 300:
		s.stats.ok.Add(1)
	case status == http.StatusTooManyRequests:
		s.stats.t429.Add(1)
	case status == http.StatusServiceUnavailable:
		s.stats.u503.Add(1)
	default:
		s.stats.other.Add(1)
	}
	s.metrics.count(pi, status)
}

// The draws' purposes (see draw).
const (
	drawMix uint64 = iota + 1
	drawSpread
)

// draw is a uniform 64-bit value for one purpose of one attempt: a hash of
// the seed, the attempt's key and number, and the purpose (FNV-1a, then
// SplitMix64's finalizer). A draw does not depend on the order in which
// requests arrive, only on which request it is, so a seeded run replays
// even when many requests share an instant (a virtual run's lockstep
// clients), and two stubs with one seed draw alike for one attempt.
func (s *Server) draw(a *timeline.Attempt, purpose uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(a.Key); i++ {
		h ^= uint64(a.Key[i])
		h *= 1099511628211
	}
	x := h ^ s.seed*0x9e3779b97f4a7c15 ^ uint64(a.Attempt)<<32 ^ purpose<<56
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// below is a draw reduced to [0, n), n > 0.
func below(x uint64, n int64) int64 {
	hi, _ := bits.Mul64(x, uint64(n))
	return int64(hi)
}

// pick draws an index from cumulative weights, for a.
func (s *Server) pick(cum []float64, a *timeline.Attempt) int {
	x := float64(s.draw(a, drawMix)>>11) / (1 << 53) * cum[len(cum)-1]
	for i, c := range cum {
		if x < c {
			return i
		}
	}
	return len(cum) - 1
}

// spread draws the phase's Retry-After spread, uniform in [0, Spread), for
// the forms that are not whole seconds.
func (s *Server) spread(ph *phase, a *timeline.Attempt) time.Duration {
	if ph.RetryAfter.Spread <= 0 {
		return 0
	}
	return time.Duration(below(s.draw(a, drawSpread), int64(ph.RetryAfter.Spread)))
}

// spreadSeconds draws the spread of a whole-second form (delta, date):
// uniform in whole seconds over [0, ceil(Spread/1s)], both ends included, so
// a spread of 1s sends two distinct values.
func (s *Server) spreadSeconds(ph *phase, a *timeline.Attempt) int64 {
	n := ceilSeconds(ph.RetryAfter.Spread)
	if n == 0 {
		return 0
	}
	return below(s.draw(a, drawSpread), n+1)
}

// attemptCounter numbers arrivals per key. It keeps two generations of
// keys, each at most maxKeys keys and maxKeyBytes bytes of key: when the
// current one fills, it becomes the previous one and the older is
// forgotten, so a key idle for two generations starts again at 1.
type attemptCounter struct {
	mu        sync.Mutex
	cur, prev map[string]int32
	curBytes  int // bytes of the keys in cur
}

func (c *attemptCounter) next(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.cur[key]
	if !ok && c.prev != nil {
		n = c.prev[key]
	}
	if !ok {
		if len(c.cur) >= maxKeys || c.curBytes+len(key) > maxKeyBytes {
			c.prev, c.cur = c.cur, make(map[string]int32)
			c.curBytes = 0
		}
		c.curBytes += len(key)
	}
	n++
	c.cur[key] = n
	return int(n)
}
