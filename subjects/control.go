package subjects

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retrylab/retrylab/client"
	"golang.org/x/time/rate"
)

// Defaults of the negative controls for zero Policy fields: the client
// package's, so a control differs from the reference only by its mistake.
// A zero MaxAttempts is derived from the budget as the client derives it
// (client.AttemptsFor).
const (
	DefaultBase   = client.DefaultBase
	DefaultCap    = client.DefaultCap
	DefaultBudget = client.DefaultBudget
)

// controlNames lists the negative controls, in registration order: the
// control loop's (registerControl) and those built on the client
// (registerClientControl: no-retry-budget).
var controlNames []string

// control is a negative control: a small retry loop that is correct except
// for the one mistake its options introduce. The correct loop:
//
//   - retries 429, 500, 502, 503, 504 and transport errors, nothing else;
//   - sends non-idempotent requests (POST, PATCH) with an Idempotency-Key,
//     adding one when the request has none, so they may be retried;
//   - waits before retry n a backoff drawn per Policy.Jitter from
//     [0, min(Cap, Base·2^(n-1))] (full), or half that plus a draw (equal),
//     or min(Cap, uniform[Base, 3·previous]) (decorrelated); after a usable
//     Retry-After (delay-seconds ≥ 0 or an HTTP-date) it waits that long
//     plus the backoff draw, so a herd told the same instant still spreads;
//   - stops after MaxAttempts attempts (result gave-up; zero: derived from
//     the budget as the client derives it) or before a wait that would end
//     past the Budget (result budget), except that, as in the client, the
//     first backoff of a call that would is redrawn within what remains of
//     the budget less the attempt timeout;
//   - bounds each attempt by Policy.Timeout and paces attempts with a token
//     bucket when Policy.Rate is set.
type control struct {
	name    string
	mistake string // one line, for Info.Summary

	// The knobs a control gets wrong, one each.
	delay func(l *loop, n int) time.Duration // nil: the policy's jittered backoff
	// attempts derives a zero MaxAttempts for a control whose delay is not
	// the policy's backoff, so its cap is as coherent with its budget as
	// the client's (nil: client.AttemptsFor); the mistake stays its delay.
	attempts   func(p Policy) int
	noRA       bool // never read Retry-After
	retry4xx   bool // retry 400, 401, 403, 404, 422 too
	unbounded  bool // no attempt cap, no budget
	singleShot bool // never retry
	// raExtra, when set, is the wait added to a usable Retry-After instead
	// of the backoff draw.
	raExtra  func(l *loop) time.Duration
	noKey    bool // retry POST/PATCH without adding an Idempotency-Key
	noPacing bool // ignore Policy.Rate: no token bucket
}

func registerControl(c *control) {
	controlNames = append(controlNames, c.name)
	register(c)
}

// registerClientControl registers a negative control that is not the
// control loop (no-retry-budget: the reference client with one setting
// wrong).
func registerClientControl(s Subject) {
	controlNames = append(controlNames, s.Name())
	register(s)
}

func (c *control) Name() string { return c.name }

// Describe states the effective policy the control claims (which its
// mistake then breaks, e.g. a fixed delay claims the policy's jitter).
func (c *control) Describe(p Params) Info {
	pol := c.effective(p.Policy)
	st := &Stated{
		Base: pol.Base, Cap: pol.Cap, MaxAttempts: pol.MaxAttempts, Budget: pol.Budget,
		Jitter: pol.Jitter, Retryable: []int{429, 500, 502, 503, 504},
	}
	return Info{Version: "(devel)", Stated: st, Summary: "negative control: " + c.mistake, Replayable: true}
}

// effective fills the zero fields of p with the controls' defaults.
func (c *control) effective(p Policy) Policy {
	// The client's own defaults, so a control differs from the reference
	// only by its mistake.
	j, _ := client.ParseJitter(p.Jitter)
	e := client.Config{Base: p.Base, Cap: p.Cap, Budget: p.Budget, Jitter: j, MaxAttempts: p.MaxAttempts}.Effective()
	p.Base, p.Cap, p.Budget, p.Jitter = e.Base, e.Cap, e.Budget, e.Jitter.String()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = e.MaxAttempts
		if c.attempts != nil {
			p.MaxAttempts = c.attempts(p)
		}
	}
	return p
}

func (c *control) New(next http.RoundTripper, p Params) Caller {
	l := &loop{c: c, next: counting{next}, pol: c.effective(p.Policy), client: p.Client, rnd: p.Rand}
	if l.rnd == nil {
		l.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if p.Policy.Rate > 0 && !c.noPacing {
		l.limiter = rate.NewLimiter(rate.Limit(p.Policy.Rate), max(1, p.Policy.Burst))
	}
	return l.do
}

// loop is one simulated client's control.
type loop struct {
	c       *control
	next    http.RoundTripper
	pol     Policy
	client  int
	limiter *rate.Limiter

	mu   sync.Mutex // guards rnd and keys
	rnd  *rand.Rand
	keys int
}

func (l *loop) float() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rnd.Float64()
}

// backoff is the correct jittered wait before retry n (n ≥ 1); prev is the
// previous wait (decorrelated jitter).
func (l *loop) backoff(n int, prev time.Duration) time.Duration {
	ceil := expCeil(l.pol.Base, l.pol.Cap, n)
	switch l.pol.Jitter {
	case "equal":
		return ceil/2 + time.Duration(l.float()*float64(ceil-ceil/2))
	case "decorrelated":
		if prev < l.pol.Base {
			prev = l.pol.Base
		}
		d := l.pol.Base + time.Duration(l.float()*float64(3*prev-l.pol.Base))
		return min(d, l.pol.Cap)
	}
	return time.Duration(l.float() * float64(ceil))
}

// expCeil is min(cap, base·2^(n-1)) without overflow.
func expCeil(base, cap time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < cap; i++ {
		if d > cap/2 {
			return cap
		}
		d *= 2
	}
	return min(d, cap)
}

func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func (l *loop) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	ctx, cnt := WithCounter(ctx)
	resp, err := l.run(ctx, req)
	cnt.Finish(resp)
	return resp, err
}

func (l *loop) run(ctx context.Context, req *http.Request) (*http.Response, error) {
	c := l.c
	start := time.Now()
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("subjects: %s: reading request body: %w", c.name, err)
		}
		body = b
	}
	header := req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if !c.noKey && !idempotent(req.Method) && header.Get("Idempotency-Key") == "" {
		l.mu.Lock()
		l.keys++
		key := fmt.Sprintf("retrylab-%d-%d-%016x", l.client, l.keys, l.rnd.Uint64())
		l.mu.Unlock()
		header.Set("Idempotency-Key", key)
	}

	var prev time.Duration
	lastChance := false // a backoff was redrawn to fit the budget
	status := 0
	for n := 1; ; n++ {
		if l.limiter != nil {
			if err := l.limiter.Wait(ctx); err != nil {
				return nil, &Error{Result: ResultError, Status: status, Attempts: n - 1, Err: err}
			}
		}
		resp, err := l.attempt(ctx, req, header, body)
		var ra time.Duration
		haveRA := false
		if err != nil {
			if ctx.Err() != nil {
				return nil, &Error{Result: ResultError, Status: status, Attempts: n, Err: err}
			}
			status = 0
		} else {
			status = resp.StatusCode
			switch {
			case status < 400:
				return resp, nil
			case retryableStatus(status), c.retry4xx && nonRetryable(status):
			default:
				return resp, nil // the caller sees the non-retryable answer
			}
			if !c.noRA {
				ra, haveRA = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			}
		}
		if c.singleShot || (!c.unbounded && n >= l.pol.MaxAttempts) {
			if err != nil {
				return nil, &Error{Result: ResultGaveUp, Attempts: n, Err: err}
			}
			return resp, nil // the last answer, 429 or 5xx: gave up
		}
		if resp != nil {
			drain(resp)
		}
		var wait time.Duration
		if c.delay != nil {
			wait = c.delay(l, n)
		} else {
			wait = l.backoff(n, prev)
		}
		prev = wait
		if haveRA {
			if c.raExtra != nil {
				wait = c.raExtra(l)
			}
			wait = satAdd(wait, ra)
		} else if !lastChance && !c.unbounded && satAdd(time.Since(start), wait) >= l.pol.Budget {
			// As the client: a backoff that would cross the budget is
			// redrawn once within what remains less the attempt timeout.
			if room := l.pol.Budget - time.Since(start) - l.pol.Timeout; room > 1 {
				wait, lastChance = time.Duration(l.float()*float64(room-1)), true
			}
		}
		if !c.unbounded && satAdd(time.Since(start), wait) >= l.pol.Budget {
			return nil, &Error{Result: ResultBudget, Status: status, Attempts: n,
				Err: fmt.Errorf("subjects: %s: waiting %v would pass the %v budget", c.name, wait, l.pol.Budget)}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, &Error{Result: ResultError, Status: status, Attempts: n, Err: ctx.Err()}
		}
	}
}

// attempt sends one attempt with a fresh copy of the request.
func (l *loop) attempt(ctx context.Context, req *http.Request, header http.Header, body []byte) (*http.Response, error) {
	if l.pol.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.pol.Timeout)
		// The body must stay readable after we return: cancel when it closes.
		r := req.Clone(ctx)
		r.Header = header.Clone()
		setBody(r, body)
		resp, err := l.next.RoundTrip(r)
		if err != nil {
			cancel()
			return nil, err
		}
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}
	r := req.Clone(ctx)
	r.Header = header.Clone()
	setBody(r, body)
	return l.next.RoundTrip(r)
}

// SetBody sets r's body (and GetBody, ContentLength) to body; nil leaves
// r without one.
func SetBody(r *http.Request, body []byte) { setBody(r, body) }

func setBody(r *http.Request, body []byte) {
	if body == nil {
		r.Body = http.NoBody
		r.ContentLength = 0
		r.GetBody = nil
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// Drain reads a little of a response that will be retried and closes it,
// so its connection can be reused.
func Drain(resp *http.Response) { drain(resp) }

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// parseRetryAfter parses a Retry-After value received at now: delay-seconds
// (digits only, RFC 9110) or an HTTP-date. It reports false for an absent
// or unusable value (negative, fractional, garbage). A date in the past
// yields 0.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s > int64((1<<63-1)/time.Second) {
			return time.Duration(1<<63 - 1), true // absurdly large but valid: forever
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// satAdd adds two non-negative durations, saturating instead of wrapping.
func satAdd(a, b time.Duration) time.Duration {
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}
