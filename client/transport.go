// Package client owns the reference retry and pacing layer: an
// http.RoundTripper that paces requests with a token bucket per quota key,
// retries only what is retryable, honours Retry-After, jitters every computed
// backoff, bounds every call by attempts and elapsed time, and bounds the
// retries of all its calls together with a retry budget.
//
// The retry budget (Config.RetryBudget, on by default) is there for retry
// storms that outlive their cause. Backoff and jitter spread retries in
// time but do not make them fewer: under sustained overload every failing
// call still becomes up to MaxAttempts requests, and that extra load can
// keep a server down after its trigger has gone (a metastable failure).
// Like the AWS SDKs' retry quota, whose rule and defaults it takes, and
// like gRPC's retry throttling and Finagle's and Envoy's budgets, it lets
// retries through while they are a small share of the traffic and refuses
// them, failing the call at once with ErrRetryBudgetExhausted, when they
// are not: a bucket of 500 tokens per Transport, 5 per retry, 10 after a
// timeout, given back by calls that succeed. RetryBudget has the exact
// rule.
package client

import (
	"context"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/retrylab/retrylab/client/internal/variant"
)

// Transport is a retrying, self-pacing http.RoundTripper. Make one with New;
// the zero Transport is not usable. A Transport is safe for concurrent use by
// many goroutines, and should be reused: its buckets and slow-down state are
// per Transport.
//
// A call's life: wait for the key's bucket and slow-down; send the attempt;
// on success, a non-retryable status, or a request that cannot be replayed,
// return the response as it is; on a retryable status or transient network
// error, wait (Retry-After if the response has a usable one, else the
// jittered backoff) and try again, until MaxAttempts or the Budget runs out,
// the Transport's retry budget refuses the retry (Config.RetryBudget), or
// the request's context ends. A call that fails returns a nil response and
// a *RetryError; responses that are retried are drained (up to DrainLimit
// bytes) and closed so their connections are reused. Close the body of a
// returned response, as always: that also releases the attempt's context.
//
// Retry-After dates are measured against the local clock when the response
// arrives. Rate-limit headers (see ParseRateLimit) on a response without a
// usable Retry-After drive the key's proactive slow-down; the retry after a
// Retry-After wait is not held back by them.
//
// Cost on the success path: the call's context (the caller's plus the
// one-layer marker) and one allocation per attempt (its request copy and
// body wrapper together), plus, unless the caller's context deadline comes
// first, the attempt's context.WithDeadlineCause child that bounds it by the
// budget or AttemptTimeout (docs/benchmarks/client.md has the figures). The
// retry budget adds one atomic load while its bucket is full, no
// allocation.
//
// One layer: while a Transport runs a call, the request's context carries a
// marker; any Transport of this package that sees it (a nested layer) passes
// the request straight to its next transport, so attempts never multiply.
type Transport struct {
	next      http.RoundTripper
	cfg       Config
	obs       Observer
	rbObs     RetryBudgetObserver // obs, if it has the interface
	retryable [10]uint64          // bit set of statuses 0..639
	rb        retryBudget
	v         variant.Variant // a negative control's departures (package clientcontrol)

	randMu sync.Mutex
	rnd    *rand.Rand

	mu      sync.RWMutex
	keys    map[string]*keyState
	slowing atomic.Bool // some key has had a slow-down: look keys up
}

// New returns a Transport that sends attempts through next (nil:
// http.DefaultTransport) under cfg, defaults applied (see Config.Effective).
func New(next http.RoundTripper, cfg Config) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	e := cfg.Effective()
	t := &Transport{next: next, cfg: e, obs: e.Observer, rnd: e.Rand, keys: make(map[string]*keyState)}
	if t.rnd == nil {
		t.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	t.rbObs, _ = e.Observer.(RetryBudgetObserver)
	t.rb.init(e.RetryBudget)
	for _, s := range e.Retryable {
		if s >= 0 && s < 640 {
			t.retryable[s/64] |= 1 << (s % 64)
		}
	}
	return t
}

// Config returns the Transport's effective configuration.
func (t *Transport) Config() Config { return t.cfg }

// CloseIdleConnections closes the idle connections of the next transport, if
// it has that method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// layerKey marks a context as inside a Transport's call.
type layerKey struct{}

// attempt is one attempt's copy of the caller's request and, once
// delivered, the wrapper of the response body, in one allocation. Its
// request carries the attempt's context: the call's context (the caller's
// plus the one-layer marker) or, for a timed attempt, a child of it made by
// context.WithDeadlineCause, which ends with the Transport's reason as its
// cause. Closing the delivered body releases that child.
type attempt struct {
	req    http.Request       // the attempt's request, with its context
	body   io.ReadCloser      // the delivered response's body
	cancel context.CancelFunc // releases a timed attempt's context; nil if untimed
}

// newAttempt returns the attempt for req under ctx, with its request copy
// sending header and body.
func newAttempt(ctx context.Context, req *http.Request, header http.Header, body io.ReadCloser) *attempt {
	a := &attempt{}
	// WithContext is inlined: its copy does not escape and only a.req is
	// on the heap.
	a.req = *req.WithContext(ctx)
	a.req.Header, a.req.Body = header, body
	return a
}

// release cancels a timed attempt's context (a no-op once it has ended).
func (a *attempt) release() {
	if a.cancel != nil {
		a.cancel()
	}
}

func (a *attempt) Read(p []byte) (int, error) { return a.body.Read(p) }

func (a *attempt) Close() error {
	err := a.body.Close()
	a.release()
	return err
}

// RoundTrip sends req, retrying and pacing as the Transport's doc says. It
// does not modify req; it closes req.Body, also on errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if ctx.Value(layerKey{}) != nil {
		return t.next.RoundTrip(req) // an outer Transport retries
	}
	// The attempts' context: the caller's plus the one-layer marker, made
	// once per call.
	actx := context.WithValue(ctx, layerKey{}, true)
	cfg := &t.cfg
	rnd := randOf(ctx) // the call's own source (WithRand), else nil: the Transport's
	start := time.Now()
	key := cfg.Key(req)
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	header := req.Header
	if !idempotent(req) {
		switch {
		case hasIdempotencyKey(req.Header):
		case t.v.RetryWithoutKey:
		case cfg.AddIdempotencyKey:
			header = req.Header.Clone()
			if header == nil {
				header = make(http.Header)
			}
			header.Set("Idempotency-Key", t.newKey(rnd))
		default:
			replayable = false
		}
	}
	budgetEnd := start.Add(cfg.Budget)
	var prev time.Duration     // previous backoff, for decorrelated jitter
	serverPaced := false       // the last wait was the server's Retry-After
	lastChance := false        // a backoff draw was redrawn to fit the budget
	var paid int64             // what the retry budget took for this attempt
	claim := time.Duration(-1) // the wait meant before this attempt (ClaimWaits); -1: none
	fail := func(attempts, status int, reason, err error, wait time.Duration) (*http.Response, error) {
		re := &RetryError{Method: method(req), URL: req.URL.Redacted(), Attempts: attempts, Status: status,
			Elapsed: time.Since(start), Wait: wait, Reason: reason, Err: err}
		t.obs.GiveUp(GiveUpEvent{Request: req, Key: key, Attempts: attempts, Status: status, Elapsed: re.Elapsed, Err: re})
		return nil, re
	}
	for attempt := 1; ; attempt++ {
		// A first attempt that nothing paces goes out at start (a clock
		// read saved: time.Now is slow on some VMs).
		sentAt := start
		if attempt > 1 || t.paces() {
			wait, err := t.pace(ctx, req, key, attempt, budgetEnd, serverPaced)
			if err != nil {
				if attempt == 1 {
					closeBody(req)
				}
				return fail(attempt-1, 0, err, nil, wait)
			}
			sentAt = time.Now()
			claim += wait
		}
		h := header
		if cfg.ClaimWaits && attempt > 1 {
			h = header.Clone()
			if h == nil {
				h = make(http.Header)
			}
			h.Set(waitHeader, formatClaim(claim))
		}
		// The attempt.
		body := req.Body
		if attempt > 1 && req.Body != nil && req.Body != http.NoBody {
			var err error
			if body, err = req.GetBody(); err != nil {
				return fail(attempt-1, 0, nil, err, 0)
			}
		}
		resp, err, cause, a := t.send(ctx, actx, req, h, body, sentAt, budgetEnd)
		if cause != nil && err != nil {
			err = cause // the Transport's timer ended the attempt, not the caller
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		now := time.Now()
		t.obs.Attempt(AttemptEvent{Request: req, Key: key, Attempt: attempt, Status: status, Err: err, Duration: now.Sub(sentAt)})
		retryAfter, hasRA := time.Duration(0), false
		if resp != nil {
			if v := resp.Header["Retry-After"]; len(v) > 0 && !t.v.IgnoreRetryAfter {
				retryAfter, hasRA = ParseRetryAfter(v[0], now)
			}
			if !hasRA && !t.v.NoSlowDown {
				t.observeHeaders(resp, key, now)
			}
		}
		// Decide.
		var retry bool
		switch {
		case err != nil:
			switch {
			case ctx.Err() != nil:
				discard(nil, a)
				return fail(attempt, 0, ctx.Err(), err, 0)
			case cause == ErrBudgetExhausted:
				discard(nil, a)
				return fail(attempt, 0, ErrBudgetExhausted, nil, 0)
			case cause == ErrAttemptTimeout:
				retry = true
			default:
				retry = cfg.RetryError(err)
			}
		default:
			if status == http.StatusForbidden {
				retryAfter, hasRA, retry = rateLimited403(resp, retryAfter, hasRA, now)
			}
			if status == http.StatusTooManyRequests || retry {
				t.obs.Throttled(ThrottledEvent{Request: req, Key: key, Attempt: attempt, RetryAfter: retryAfter, HasRetryAfter: hasRA})
			}
			retry = retry || t.isRetryable(status)
		}
		if !retry || !replayable {
			if err != nil {
				discard(nil, a)
				return fail(attempt, 0, nil, err, 0)
			}
			if !retry && t.rb.on && t.rb.tokens.Load() < t.rb.capacity {
				t.refund(req, key, attempt, paid)
			}
			return deliver(a, resp), nil
		}
		// A retryable failure.
		if attempt >= cfg.MaxAttempts {
			discard(resp, a)
			return fail(attempt, status, ErrAttemptsExhausted, err, 0)
		}
		// A positive Retry-After wins over backoff. One that allows an
		// immediate retry (a past date, "0") sets no wait of its own: the
		// computed backoff applies, so a server that keeps answering "now"
		// does not get every attempt of the budget within milliseconds.
		wait, src := retryAfter, SourceRetryAfter
		serverPaced = hasRA && retryAfter > 0
		if serverPaced {
			if t.v.RetryAfterExtra != nil {
				wait = satAdd(wait, t.retryAfterExtra(rnd))
			} else if cfg.RetryAfterJitter > 0 {
				wait = satAdd(wait, t.uniform(rnd, cfg.RetryAfterJitter))
			}
		} else {
			wait, src = t.delay(rnd, attempt, prev), SourceBackoff
			prev = wait
			// A backoff draw that would cross the budget is redrawn, once
			// per call, within what remains of the budget less the
			// per-attempt timeout, so the call's last attempt still goes
			// out while the budget lasts: a server that recovers within
			// the budget is not given up on because of one long draw. The
			// redraw is shorter than the draw, so within its jitter bounds.
			if !lastChance && !now.Add(wait).Before(budgetEnd) {
				if room := budgetEnd.Sub(now) - cfg.AttemptTimeout; room > 1 {
					wait, lastChance = t.uniform(rnd, room-1), true
				}
			}
		}
		discard(resp, a)
		if !now.Add(wait).Before(budgetEnd) || wait >= cfg.Budget {
			return fail(attempt, status, ErrBudgetExhausted, err, wait)
		}
		// The retry budget, last: it refuses only retries the call's own
		// bounds allow, and a refused retry waits for nothing.
		if t.rb.on {
			var ok bool
			if paid, ok = t.chargeRetry(req, key, attempt, err); !ok {
				return fail(attempt, status, ErrRetryBudgetExhausted, err, 0)
			}
		}
		reason := "network"
		if resp != nil {
			reason = strconv.Itoa(status)
		}
		t.obs.Retry(RetryEvent{Request: req, Key: key, Attempt: attempt, Status: status, Err: err, Reason: reason, Wait: wait, Source: src})
		claim = wait
		if err := sleep(ctx, wait); err != nil {
			return fail(attempt, status, err, nil, 0)
		}
	}
}

// waitHeader is retrylab's wait claim header (timeline.WaitHeader).
const waitHeader = "X-Retrylab-Wait"

// formatClaim prints d in milliseconds with up to 6 decimals ("12.5").
func formatClaim(d time.Duration) string {
	d = max(d, 0)
	s := strconv.FormatInt(int64(d/time.Millisecond), 10)
	f := int64(d % time.Millisecond)
	if f == 0 {
		return s
	}
	b := []byte(strconv.FormatInt(1_000_000+f, 10))[1:] // six digits
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return s + "." + string(b)
}

// send runs one attempt, bounded by the budget and AttemptTimeout unless the
// caller's deadline (ctx's) comes first: then the attempt runs under actx,
// the call's context, as it is; else under a child of actx made by
// context.WithDeadlineCause with ErrBudgetExhausted or ErrAttemptTimeout as
// its cause. cause is set when that deadline ended the attempt. now is the
// time the attempt starts. Release a, once the response is done with, by
// discard or deliver.
func (t *Transport) send(ctx, actx context.Context, req *http.Request, header http.Header, body io.ReadCloser, now, budgetEnd time.Time) (resp *http.Response, err, cause error, a *attempt) {
	limit, why := budgetEnd, ErrBudgetExhausted
	if at := t.cfg.AttemptTimeout; at > 0 {
		if end := now.Add(at); end.Before(limit) {
			limit, why = end, ErrAttemptTimeout
		}
	}
	if d, ok := ctx.Deadline(); ok && !d.After(limit) {
		// The caller's deadline ends the attempt first: no timer needed.
		a = newAttempt(actx, req, header, body)
		resp, err = t.next.RoundTrip(&a.req)
		return resp, err, nil, a
	}
	tctx, cancel := context.WithDeadlineCause(actx, limit, why)
	a = newAttempt(tctx, req, header, body)
	a.cancel = cancel
	resp, err = t.next.RoundTrip(&a.req)
	if tctx.Err() != nil && ctx.Err() == nil {
		// The deadline passed (the caller's context has not ended): the
		// Transport's reason. A response that came as it passed has an
		// unusable body.
		cause = context.Cause(tctx)
		if err == nil {
			discard(resp, nil)
			resp, err = nil, cause
		}
	}
	return resp, err, cause, a
}

// deliver returns resp to the caller. When the attempt was timed, the
// response body is the attempt, which releases itself when closed.
func deliver(a *attempt, resp *http.Response) *http.Response {
	if a.cancel == nil || resp.Body == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp
	}
	a.body = resp.Body
	resp.Body = a
	return resp
}

// discard drains (up to DrainLimit bytes) and closes a response that will
// not be returned, so its connection can be reused, then releases its
// attempt a (if not nil).
func discard(resp *http.Response, a *attempt) {
	Drain(resp)
	if a != nil {
		a.release()
	}
}

// Drain reads up to DrainLimit bytes of resp's body and closes it, as the
// Transport does with every response it retries, so the connection can be
// reused. A nil resp or body is left alone.
func Drain(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		io.CopyN(io.Discard, resp.Body, DrainLimit)
		resp.Body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// rateLimited403 reports whether a 403 is a rate limit (Config.Retryable):
// it carried a valid Retry-After, or rate-limit headers with none
// remaining, whose reset then stands for the Retry-After it lacked.
func rateLimited403(resp *http.Response, retryAfter time.Duration, hasRA bool, now time.Time) (time.Duration, bool, bool) {
	if hasRA {
		return retryAfter, true, true
	}
	if rl, ok := ParseRateLimit(resp.Header, now); ok && rl.Remaining == 0 && rl.Reset > 0 {
		return rl.Reset, true, true
	}
	return retryAfter, hasRA, false
}

func (t *Transport) isRetryable(status int) bool {
	return status >= 0 && status < 640 && t.retryable[status/64]&(1<<(status%64)) != 0
}

// The draws below take the call's own source r (WithRand), used without
// a lock (one call's draws are sequential), or nil: the Transport's
// source, under randMu.

// delay draws the backoff before retry n.
func (t *Transport) delay(r *rand.Rand, retry int, prev time.Duration) time.Duration {
	if r == nil {
		t.randMu.Lock()
		defer t.randMu.Unlock()
		r = t.rnd
	}
	if t.v.Backoff != nil {
		return max(t.v.Backoff(r, retry, prev), 0)
	}
	return t.cfg.Jitter.Delay(r, t.cfg.Base, t.cfg.Cap, retry, prev)
}

// retryAfterExtra is a negative control's addition to a Retry-After wait.
func (t *Transport) retryAfterExtra(r *rand.Rand) time.Duration {
	if r == nil {
		t.randMu.Lock()
		defer t.randMu.Unlock()
		r = t.rnd
	}
	return max(t.v.RetryAfterExtra(r), 0)
}

func (t *Transport) uniform(r *rand.Rand, d time.Duration) time.Duration {
	if r == nil {
		t.randMu.Lock()
		defer t.randMu.Unlock()
		r = t.rnd
	}
	return uniform(r, d)
}

// newKey returns a fresh Idempotency-Key: 128 bits from the call's source
// or the Transport's.
func (t *Transport) newKey(r *rand.Rand) string {
	if r == nil {
		t.randMu.Lock()
		defer t.randMu.Unlock()
		r = t.rnd
	}
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.EncodeToString(b[:])
}

func satAdd(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// sleep waits d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func method(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// idempotent reports whether r's method is idempotent (RFC 9110 section
// 9.2.2): GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
func idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// hasIdempotencyKey reports whether h has a non-empty Idempotency-Key (the
// IETF httpapi draft's field; X-Idempotency-Key and other spellings do not
// count, as servers and the harness look for this one).
func hasIdempotencyKey(h http.Header) bool {
	return h.Get("Idempotency-Key") != ""
}

// keyState is a quota key's bucket and slow-down.
type keyState struct {
	bucket *rate.Limiter // nil without a Rate

	mu        sync.Mutex
	slowUntil time.Time     // slow-down active before this instant
	slowNext  time.Time     // next free slot
	slowEvery time.Duration // slot spacing
}
