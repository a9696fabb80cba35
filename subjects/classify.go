package subjects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/retrylab/retrylab/client"
)

// Results of Classify: the same strings as the timeline's Outcome.Result.
const (
	ResultOK           = "ok"
	ResultGaveUp       = "gave-up"
	ResultBudget       = "budget"
	ResultNonRetryable = "non-retryable"
	ResultError        = "error"
)

// ShedByRetryBudget reports whether err is a logical request the subject's
// retry budget ended: a retry refused because the retries of all its calls
// had spent their share (client.ErrRetryBudgetExhausted), which sheds load
// from an overloaded server by design. Classify calls it gave-up.
func ShedByRetryBudget(err error) bool {
	return errors.Is(err, client.ErrRetryBudgetExhausted)
}

// Error is what the built-in subjects return when a logical request fails
// and they know how: the result, the last status seen (0: none) and the
// attempts made. Err is the library's own error, if any.
type Error struct {
	Result   string
	Status   int
	Attempts int
	Err      error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("subjects: %s after %d attempt(s)", e.Result, e.Attempts)
	if e.Status != 0 {
		msg += fmt.Sprintf(", last status %d", e.Status)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// RetryableStatus reports whether a correct client retries status: one of
// the client's client.DefaultRetryable (429, 500, 502, 503, 504).
func RetryableStatus(status int) bool { return slices.Contains(client.DefaultRetryable, status) }

// Classify names the outcome of a Caller's return as the timeline does:
//
//   - a 2xx response: "ok";
//   - another response (the library handed back its last answer): a 4xx
//     other than 408 and 429 is "non-retryable", a 408, 429 or 5xx is
//     "gave-up", anything else (1xx, 3xx) "error";
//   - an *Error: its Result; the client package's time-budget error:
//     "budget", its retry-budget error (ErrRetryBudgetExhausted):
//     "gave-up";
//   - any other error: "error".
//
// status is the final status (0 when unknown) and attempts the attempts
// the library made for this call, when the subject counted them (0 when
// unknown). Classify does not close resp.Body.
func Classify(resp *http.Response, err error) (result string, status int, attempts int) {
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e.Result, e.Status, e.Attempts
		}
		if r, st, n, ok := classifyClient(err); ok {
			return r, st, n
		}
		if resp != nil {
			status = resp.StatusCode
		}
		return ResultError, status, 0
	}
	if resp == nil {
		return ResultError, 0, 0
	}
	status = resp.StatusCode
	attempts = countOf(resp)
	switch {
	case status >= 200 && status < 300:
		return ResultOK, status, attempts
	case status == 408 || status == 429 || status >= 500:
		return ResultGaveUp, status, attempts
	case status >= 400 && status < 500:
		return ResultNonRetryable, status, attempts
	}
	return ResultError, status, attempts
}

// Counter counts the attempts of one logical request and remembers what
// the last one got. Subjects put one in the request's context and wrap the
// harness transport with counting, so attempts are known whatever the
// library reports, and Classify finds the count through resp.Request.
type Counter struct {
	attempts atomic.Int32
	status   atomic.Int32 // last status; 0 after a transport error

	mu     sync.Mutex
	bodies []io.Closer // every response body the attempts got, in order
}

// Count counts one attempt that got status (0: none), for a subject
// that sees its attempts otherwise than through the harness's transport
// (a gRPC channel).
func (c *Counter) Count(status int) {
	c.attempts.Add(1)
	c.status.Store(int32(status))
}

// Attempts is how many attempts c counted.
func (c *Counter) Attempts() int { return int(c.attempts.Load()) }

// CounterOf is the Counter ctx carries (WithCounter), nil for none.
func CounterOf(ctx context.Context) *Counter { return counterOf(ctx) }

// Finish closes the bodies of every response but the one returned (the
// last), or all of them when the call returned none. Some libraries never
// close the responses they retry (failsafe-go) or the one they give up on;
// a user's connections would leak, but the harness's must not. Closing an
// already closed body is harmless.
func (c *Counter) Finish(resp *http.Response) {
	c.mu.Lock()
	bodies := c.bodies
	c.bodies = nil
	c.mu.Unlock()
	if resp != nil && len(bodies) > 0 {
		bodies = bodies[:len(bodies)-1]
	}
	for _, b := range bodies {
		b.Close()
	}
}

type counterKey struct{}

// WithCounter returns ctx carrying a fresh Counter: requests made with it
// through Counting are counted, and Classify finds the count.
func WithCounter(ctx context.Context) (context.Context, *Counter) {
	c := new(Counter)
	return context.WithValue(ctx, counterKey{}, c), c
}

func counterOf(ctx context.Context) *Counter {
	c, _ := ctx.Value(counterKey{}).(*Counter)
	return c
}

// countOf returns the attempts counted for resp's logical request, or 0.
func countOf(resp *http.Response) int {
	if resp.Request == nil {
		return 0
	}
	if c := counterOf(resp.Request.Context()); c != nil {
		return int(c.attempts.Load())
	}
	return 0
}

// Counting returns next wrapped so that each request whose context carries
// a Counter (WithCounter) is counted.
func Counting(next http.RoundTripper) http.RoundTripper { return counting{next} }

// counting wraps next so that each request whose context carries a Counter
// is counted.
type counting struct{ next http.RoundTripper }

func (t counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c := counterOf(req.Context())
	if c != nil {
		c.attempts.Add(1)
	}
	resp, err := t.next.RoundTrip(req)
	if c != nil {
		st := 0
		if err == nil {
			st = resp.StatusCode
			c.mu.Lock()
			c.bodies = append(c.bodies, resp.Body)
			c.mu.Unlock()
		}
		c.status.Store(int32(st))
	}
	return resp, err
}

// Failure turns a third-party library's error into an *Error, using what
// the counter saw: a context error is "error"; a last status that must
// not be retried is "non-retryable"; otherwise the library gave up.
func Failure(ctx context.Context, c *Counter, err error) error {
	e := &Error{Status: int(c.status.Load()), Attempts: int(c.attempts.Load()), Err: err}
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e.Result = ResultError
	case e.Status != 0 && !RetryableStatus(e.Status) && e.Status != 408 && e.Status >= 400 && e.Status < 500:
		e.Result = ResultNonRetryable
	default:
		e.Result = ResultGaveUp
	}
	return e
}
