package stubserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

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
	if s.serveApart(w, r) {
		return
	}
	s.inflight.Add(1)
	arrive := time.Now()
	// The next request on this connection comes after this answer.
	defer func() { s.stamps.Answered(r.Context(), time.Now()) }()
	if s.holds(arrive) {
		s.handled() // Seal waits only for requests that record
		s.hold(w, r)
		return
	}
	defer s.handled()
	// Stamp the arrival at the kernel's receipt: a stub short of CPU
	// reads its sockets late, and its lateness must move no arrival.
	// It answers as of the receipt (the phase, its capacity's queue),
	// but counts its quota and dates its Retry-After when it reads the
	// request: a quota's clock must not run backwards.
	waited := s.stamps.Observe(r.Context(), arrive)
	if s.started.Load() {
		waited = min(waited, max(0, arrive.Sub(s.start)))
	}
	read := arrive
	arrive, ok := s.arrival(w, r, arrive.Add(-waited))
	if !ok {
		return
	}
	if !arrive.Equal(read.Add(-waited)) { // it waited for the start
		read, waited = arrive, 0
	}
	if bad := tooLong(r, s.quota != nil && s.quota.endpoint); bad != "" {
		s.reject(w, r, arrive, bad)
		return
	}
	a := s.newAttempt(r, arrive)
	a.Waited = int64(waited)
	pi, ph := s.phaseAt(a.At)
	a.Phase = ph.Name
	status, fault, forward := s.respond(ph, &a)
	if !forward {
		drain(w, r) // a proxied body streams to the upstream unread
	}
	if fault == FaultHang {
		s.hang(w, r, &a, pi)
		return
	}
	s.delay(r, ph.latency)
	if fault == FaultReset {
		s.fault(w, &a, pi, timeline.FaultReset, true)
		return
	}

	v := verdict{status: status, now: read, nowRun: int64(read.Sub(s.start))}
	if ph.latency > 0 {
		v.setNow(s.start)
	}
	v.rateLimited = ph.Respond.Kind == RespondStatus && ph.Respond.RateLimit
	if ph.Respond.Kind == RespondQuota {
		s.limit(r, w.Header(), &a, &v)
	}
	if s.pool != nil && v.status == http.StatusOK && ph.works() {
		s.work(r, &a, &v)
	}
	if throttling(v.status) || v.rateLimited {
		s.throttle(r, w.Header(), ph, &a, &v)
	}
	if forward && v.status == http.StatusOK && r.Context().Err() == nil {
		s.forward(w, r, &a, pi)
		return
	}
	if forward {
		drain(w, r) // a quota rejected it, or its client left: the stub answers
	}
	s.answer(w, r, &a, pi, v.status, arrive)
}

// serveApart serves /metrics and /healthz, which are not recorded, and
// reports whether r was one of them.
func (s *Server) serveApart(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case "/metrics":
		if s.metrics.handler == nil {
			http.NotFound(w, r)
			return true
		}
		s.metrics.handler.ServeHTTP(w, r)
		return true
	case "/healthz":
		w.Header()["Content-Type"] = contentTypeText
		if err := s.quota.health(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "503 %v\n", err)
			return true
		}
		w.Write(healthBody)
		return true
	}
	return false
}

// holds reports whether a request arriving at arrive is held (Hold,
// HoldFrom).
func (s *Server) holds(arrive time.Time) bool {
	return s.sealed.Load() || s.started.Load() && int64(arrive.Sub(s.start)) >= s.holdFrom.Load()
}

// arrival starts the clock at r's arrival when the run starts on its first
// request, and holds r until time zero when it arrived before; it returns
// r's arrival, or false once it has answered 503 (r's client left, or the
// server stopped, before time zero).
func (s *Server) arrival(w http.ResponseWriter, r *http.Request, arrive time.Time) (time.Time, bool) {
	if !s.started.Load() {
		s.Begin(arrive) // Options.StartOnFirstRequest: this request is time zero
	}
	if early := s.start.Sub(arrive); early > 0 {
		if !s.awaitStart(r, early) {
			w.Header()["Connection"] = connClose
			w.WriteHeader(http.StatusServiceUnavailable)
			return arrive, false
		}
		arrive = time.Now()
	}
	return arrive, true
}

// newAttempt begins the record of r, arrived at arrive: its identities and
// its number among its key's attempts. It counts the arrival.
func (s *Server) newAttempt(r *http.Request, arrive time.Time) timeline.Attempt {
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
		WaitClaim:  waitClaim(r.Header),
	}
	if s.grpc {
		a.PreviousAttempts = previousAttempts(r.Header)
	}
	s.stats.attempts.Add(1)
	return a
}

// respond is what the phase answers a: a status, or a fault, or the
// upstream's answer (forward, unless a quota rejects). A mix draws one.
func (s *Server) respond(ph *phase, a *timeline.Attempt) (status int, fault string, forward bool) {
	status, fault = ph.Respond.Status, ph.Respond.Fault
	switch ph.Respond.Kind {
	case "", RespondOK, RespondQuota:
		status = http.StatusOK
		forward = s.proxy != nil
	case RespondPassthrough:
		status, forward = http.StatusOK, true
	case RespondMix:
		m := ph.Respond.Mix[s.pick(ph.cum, a)]
		status, fault, forward = m.Status, m.Fault, m.Passthrough
		if forward {
			status = http.StatusOK
		}
	}
	return status, fault, forward
}

// hang holds a hanging request until its client gives up or the server
// stops, then records the fault.
func (s *Server) hang(w http.ResponseWriter, r *http.Request, a *timeline.Attempt, pi int) {
	select {
	case <-r.Context().Done():
	case <-s.stopping:
	}
	// A client that gave up is gone; one the server let go of at
	// shutdown must not get an answer either.
	s.fault(w, a, pi, timeline.FaultHang, r.Context().Err() == nil)
}

// delay waits out the phase's latency d, less when r's client leaves or
// the server stops.
func (s *Server) delay(r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.stopping:
	}
	t.Stop()
}

// A verdict is the stub's answer to one attempt as ServeHTTP's steps
// settle it.
type verdict struct {
	status      int
	limDelay    time.Duration // the limiter's retry-in
	rateLimited bool          // a rate limit answers: Retry-After, rate-limit headers
	now         time.Time     // the instant the answer leaves
	nowRun      int64         // now in run time
}

// setNow moves the answer's instant to now, for a run that began at start.
func (v *verdict) setNow(start time.Time) {
	v.now = time.Now()
	v.nowRun = int64(v.now.Sub(start))
}

// limit charges a to the phase's quota: the status, the limiter's
// retry-in, and whether the answer is a limit's.
func (s *Server) limit(r *http.Request, h http.Header, a *timeline.Attempt, v *verdict) {
	ctx := r.Context()
	if ctx.Err() != nil {
		// The client left during the latency: decide what it would have
		// got (the quota is still charged, as a provider that counts at
		// arrival would) without letting its cancellation fail the limiter.
		ctx = context.WithoutCancel(ctx)
	}
	var held bool
	v.status, v.limDelay, held = s.takeQuota(ctx, r, h, a, a.Client, v.now)
	if held {
		// A shaper held the request: its answer leaves now.
		v.setNow(s.start)
	}
	// A limit that answers 403 carries Retry-After as 429 does.
	v.rateLimited = a.Limit != ""
}

// work is the capacity model's part (see Capacity): a worker, after a wait
// in the queue, or a 503 when the pool turns a away.
func (s *Server) work(r *http.Request, a *timeline.Attempt, v *verdict) {
	var order string
	if s.pool.virtual {
		order = a.Client + "\x00" + a.Key + "\x00" + strconv.Itoa(int(a.Attempt))
	}
	adm, queued, service := s.serve(r.Context(), order, time.Duration(a.Waited))
	a.Queue, a.Service = int64(queued), int64(service)
	if adm == rejected || adm == released {
		v.status = http.StatusServiceUnavailable
		a.Limit = timeline.LimitCapacity
	}
	if queued+service > 0 {
		v.setNow(s.start)
	}
}

// throttle sets the Retry-After of a throttling or rate-limited answer,
// and a rate limit's headers on a 429 or a rate-limit phase's answer.
func (s *Server) throttle(r *http.Request, h http.Header, ph *phase, a *timeline.Attempt, v *verdict) {
	var d time.Duration
	switch ph.RetryAfter.Value {
	case "", ValueFixed:
		d = ph.RetryAfter.Fixed
	case ValueLimiter:
		d = v.limDelay
	case ValuePhaseEnd:
		d = time.Duration(ph.end - v.nowRun)
	}
	// delta and date carry whole seconds: their spread is drawn in
	// whole seconds and added after rounding, so it survives the wire;
	// the other forms get it before they are written.
	var extra int64
	if f := ph.RetryAfter.Form; f == FormDelta || f == FormDate {
		extra = s.spreadSeconds(ph, a)
	} else {
		d += s.spread(ph, a)
	}
	if grpcForm(ph.RetryAfter.Form) {
		a.Pushback, a.RetryInfo, a.NotBefore, a.HasNotBefore = grpcWait(ph.RetryAfter.Form, d, h, v.nowRun)
	} else if ra, nb, ok := s.retryAfter(ph.RetryAfter.Form, d, extra, v.now, v.nowRun); ra != nil {
		h["Retry-After"] = ra
		a.RetryAfter, a.NotBefore, a.HasNotBefore = ra[0], nb, ok
	}
	if a.RateLimit == "" && (ph.Respond.RateLimit || v.status == http.StatusTooManyRequests) {
		// A 429 is a rate limit by definition, quota or not: it says
		// the client's allowance is spent (see exhaustedHeaders).
		a.RateLimit = s.exhaustedHeaders(h, r, v.now, exhaustedReset(ph, a.NotBefore, a.HasNotBefore, v.nowRun))
	}
}

// answer records a with status and writes the stub's own answer, or
// records a abandoned when its client left before it.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, a *timeline.Attempt, pi, status int, arrive time.Time) {
	a.Status = status
	if s.virtual && time.Since(arrive) > 0 {
		s.settler.settle() // a client giving up at this instant has
	}
	h := w.Header()
	if r.Context().Err() != nil {
		// The client went away before the response was written (it gave
		// up during the latency): nothing is sent, so nothing it would
		// have said — Retry-After, not_before, rate-limit headers — is
		// recorded, only the status it would have had.
		a.RetryAfter, a.NotBefore, a.HasNotBefore, a.RateLimit, a.Limit = "", 0, false, "", ""
		a.Pushback, a.RetryInfo = "", ""
		clear(h)
		if s.pool != nil && a.Service > 0 {
			s.pool.wastedNs.Add(a.Service)
		}
		s.fault(w, a, pi, timeline.FaultAbandoned, true)
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
	if s.grpc {
		a.GRPCCode = CodeNames[GRPCCode(status)]
	}
	s.count(pi, status)
	s.recordAttempt(a)
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
	if s.grpc {
		a.GRPCCode = CodeNames[CodeInvalidArgument]
	}
	s.count(pi, http.StatusBadRequest)
	s.recordAttempt(&a)
	w.Header()["Content-Type"] = contentTypeText
	w.WriteHeader(http.StatusBadRequest)
	w.Write(tooLongBodies[what])
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
