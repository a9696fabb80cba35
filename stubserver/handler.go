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
