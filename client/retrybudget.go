package client

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync/atomic"
)

// Defaults of a zero RetryBudget: the AWS SDKs' retry quota in standard
// mode. From full, a server that fails every request gets 100 retries
// (500 / 5) of a Transport's calls, or 50 after timeouts, before the
// budget runs dry; after that, about one failing retry per 5 calls that
// succeed at their first attempt.
const (
	DefaultRetryBudgetCapacity = 500
	DefaultRetryBudgetCost     = 5
	// DefaultRetryBudgetTimeoutCost is twice DefaultRetryBudgetCost: an
	// attempt that timed out held a server's resources for the whole
	// timeout, the costliest failure to repeat under overload.
	DefaultRetryBudgetTimeoutCost = 10
	DefaultRetryBudgetRefund      = 1
)

// RetryBudget configures the retry budget of a Transport (Config.RetryBudget):
// a token bucket that every call and every quota key of the Transport
// draws its retries from, so the retries of all of them together stay a
// bounded share of the requests instead of multiplying the load on a
// server that is already failing. Its rule, exactly:
//
//   - The bucket holds at most Capacity tokens and starts full.
//   - Before a retry's wait, the retry takes RetryCost tokens, or
//     TimeoutCost when the attempt it repeats timed out (Config's
//     AttemptTimeout, or a transport error that reports Timeout). When
//     fewer than that remain, the retry is not made: the call fails at
//     once with a *RetryError whose Reason is ErrRetryBudgetExhausted,
//     without waiting.
//   - A call that ends with a response the Transport does not retry (a
//     success, or a status outside the retryable set) gives tokens back:
//     the cost of the retry that got that response, or Refund when it was
//     the call's first attempt; never above Capacity. Tokens taken by
//     retries that failed again are not given back, nor those of a call
//     that ends in an error.
//
// So once the bucket is empty, failing retries are paid for by first
// attempts that succeed: about one failing retry per RetryCost/Refund of
// them (one per 5 with the defaults, 20%, the share Finagle's and Envoy's
// retry budgets allow by default).
// The checks on attempts and time (MaxAttempts, Budget) come first; the
// retry budget only refuses retries those would allow.
//
// The zero RetryBudget is the default budget: each zero or negative cost
// or refund means its default (a zero TimeoutCost is twice RetryCost), a
// zero Capacity DefaultRetryBudgetCapacity. A negative Capacity turns the
// budget off (NoRetryBudget): then only each call's own attempts and time
// bound its retries. A Capacity below a retry's cost refuses every retry
// of that kind.
type RetryBudget struct {
	// Capacity is the bucket's size and starting level in tokens (zero:
	// DefaultRetryBudgetCapacity; negative: no retry budget).
	Capacity int
	// RetryCost is what a retry takes (zero: DefaultRetryBudgetCost).
	RetryCost int
	// TimeoutCost is what a retry after a timed-out attempt takes (zero:
	// twice RetryCost, DefaultRetryBudgetTimeoutCost with the defaults).
	TimeoutCost int
	// Refund is what a call that succeeds at its first attempt gives back
	// (zero: DefaultRetryBudgetRefund).
	Refund int
}

// NoRetryBudget is the RetryBudget that turns the budget off: retries are
// bounded per call (MaxAttempts, Budget) but not across calls, so under
// sustained overload every failed call still makes all its attempts.
var NoRetryBudget = RetryBudget{Capacity: -1}

// Off reports whether b turns the retry budget off (a negative Capacity).
func (b RetryBudget) Off() bool { return b.Capacity < 0 }

// effective returns b with its defaults applied; an Off budget comes back
// as NoRetryBudget.
func (b RetryBudget) effective() RetryBudget {
	if b.Off() {
		return NoRetryBudget
	}
	if b.Capacity == 0 {
		b.Capacity = DefaultRetryBudgetCapacity
	}
	if b.RetryCost <= 0 {
		b.RetryCost = DefaultRetryBudgetCost
	}
	if b.TimeoutCost <= 0 {
		b.TimeoutCost = b.RetryCost
		if b.RetryCost <= math.MaxInt/2 {
			b.TimeoutCost = 2 * b.RetryCost
		}
	}
	if b.Refund <= 0 {
		b.Refund = DefaultRetryBudgetRefund
	}
	return b
}

// summary is Config.Summary's line on the budget (b effective).
func (b RetryBudget) summary() string {
	if b.Off() {
		return "retry budget: none (NoRetryBudget): each call's attempts and time bound its retries, nothing bounds the retries of all calls together"
	}
	s := fmt.Sprintf("retry budget: %d tokens per Transport, shared by all its calls and quota keys, starting full; "+
		"a retry takes %d (%d after a timeout) or, when fewer remain, is refused (the call fails at once, ErrRetryBudgetExhausted); "+
		"a call answered without a retryable status gives back its last retry's cost, or %d after a first-attempt success, up to %d",
		b.Capacity, b.RetryCost, b.TimeoutCost, b.Refund, b.Capacity)
	if b.Capacity < b.RetryCost {
		return s + "; the capacity is below a retry's cost: every retry is refused"
	}
	return s + fmt.Sprintf("; from full, %d retries (%d after timeouts), then about one failing retry per %s first-attempt successes",
		b.Capacity/b.RetryCost, b.Capacity/b.TimeoutCost, fmtFloat(float64(b.RetryCost)/float64(b.Refund)))
}

// ErrRetryBudgetExhausted is the reason a call gave up because its next
// retry found the Transport's retry budget (Config.RetryBudget) with fewer
// tokens than the retry costs.
var ErrRetryBudgetExhausted = errors.New("client: retry budget exhausted: too many retries across calls")

// retryBudget is a Transport's bucket: lock-free, one atomic load on a
// success that finds it full.
type retryBudget struct {
	on                        bool
	tokens                    atomic.Int64
	capacity, cost, tcost, re int64
}

func (b *retryBudget) init(c RetryBudget) {
	if c.Off() {
		return
	}
	b.on = true
	b.capacity, b.cost, b.tcost, b.re = int64(c.Capacity), int64(c.RetryCost), int64(c.TimeoutCost), int64(c.Refund)
	b.tokens.Store(b.capacity)
}

// take takes n tokens if at least n remain; it returns the level after.
func (b *retryBudget) take(n int64) (int64, bool) {
	for {
		v := b.tokens.Load()
		if v < n {
			return v, false
		}
		if b.tokens.CompareAndSwap(v, v-n) {
			return v - n, true
		}
	}
}

// give adds n tokens, up to the capacity; it returns the level after and
// how many were added.
func (b *retryBudget) give(n int64) (level, added int64) {
	for {
		v := b.tokens.Load()
		if v >= b.capacity {
			return v, 0
		}
		w := min(b.capacity, v+n)
		if b.tokens.CompareAndSwap(v, w) {
			return w, w - v
		}
	}
}

// RetryBudgetTokens returns the tokens left in the Transport's retry
// budget, or -1 when it has none (NoRetryBudget).
func (t *Transport) RetryBudgetTokens() int {
	if !t.rb.on {
		return -1
	}
	return int(t.rb.tokens.Load())
}

// chargeRetry takes the cost of the retry after attempt, whose error (nil
// after a response) says whether it timed out; it returns the cost taken,
// or 0 and false when the budget refuses the retry.
func (t *Transport) chargeRetry(req *http.Request, key string, attempt int, err error) (int64, bool) {
	cost := t.rb.cost
	if err != nil && isTimeout(err) {
		cost = t.rb.tcost
	}
	level, ok := t.rb.take(cost)
	if t.rbObs != nil {
		e := RetryBudgetEvent{Request: req, Key: key, Attempt: attempt, Cost: int(cost), Tokens: int(level), Capacity: int(t.rb.capacity), Refused: !ok}
		if ok {
			e.Delta = -int(cost)
		}
		t.rbObs.RetryBudget(e)
	}
	if !ok {
		return 0, false
	}
	return cost, true
}

// refund gives back what a call answered at attempt owes the budget: paid,
// the cost of the retry that got the answer, or the refund of a first
// attempt (paid 0). The caller has checked that the bucket is not full.
func (t *Transport) refund(req *http.Request, key string, attempt int, paid int64) {
	n := paid
	if n == 0 {
		n = t.rb.re
	}
	level, added := t.rb.give(n)
	if added > 0 && t.rbObs != nil {
		t.rbObs.RetryBudget(RetryBudgetEvent{Request: req, Key: key, Attempt: attempt, Delta: int(added), Tokens: int(level), Capacity: int(t.rb.capacity)})
	}
}

// isTimeout reports whether an attempt's error is a timeout: the
// Transport's AttemptTimeout, or a transport error that says so.
func isTimeout(err error) bool {
	if err == ErrAttemptTimeout {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
