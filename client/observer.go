package client

import (
	"net/http"
	"time"
)

// Observer is told what a Transport does, for metrics and tracing. Its
// methods are called synchronously from RoundTrip, possibly from many
// goroutines at once: they must be fast, safe for concurrent use, and must
// not modify the request. Embed NopObserver to implement only some methods.
// An Observer may also have the optional interfaces RetryBudgetObserver
// (the Transport calls it) and LimiterObserver (a shared Limiter does).
type Observer interface {
	// Attempt follows every attempt sent, with its result.
	Attempt(AttemptEvent)
	// Retry precedes every wait before a retry.
	Retry(RetryEvent)
	// GiveUp follows a call that ends with a *RetryError.
	GiveUp(GiveUpEvent)
	// PacingWait precedes a wait imposed by the key's bucket or slow-down.
	PacingWait(PacingEvent)
	// Throttled follows every 429 response.
	Throttled(ThrottledEvent)
}

// NopObserver is an Observer that does nothing: the default.
type NopObserver struct{}

func (NopObserver) Attempt(AttemptEvent)     {}
func (NopObserver) Retry(RetryEvent)         {}
func (NopObserver) GiveUp(GiveUpEvent)       {}
func (NopObserver) PacingWait(PacingEvent)   {}
func (NopObserver) Throttled(ThrottledEvent) {}

// AttemptEvent describes one attempt's result.
type AttemptEvent struct {
	Request  *http.Request // the caller's request
	Key      string        // its quota key
	Attempt  int           // 1-based
	Status   int           // 0 when Err is set
	Err      error
	Duration time.Duration // until the response headers or the error
}

// WaitSource says what set a wait.
type WaitSource string

const (
	SourceRetryAfter WaitSource = "retry-after" // the response's Retry-After
	SourceBackoff    WaitSource = "backoff"     // the jittered backoff
	SourceBucket     WaitSource = "bucket"      // the key's token bucket
	SourceSlowDown   WaitSource = "slow-down"   // the key's proactive slow-down
)

// RetryEvent describes a retry about to wait.
type RetryEvent struct {
	Request *http.Request
	Key     string
	Attempt int           // the attempt that failed; the retry is Attempt+1
	Status  int           // the failed attempt's status, 0 for an error
	Err     error         // the failed attempt's error
	Reason  string        // "429", "503", ... or "network"
	Wait    time.Duration // the wait before the retry
	Source  WaitSource    // SourceRetryAfter or SourceBackoff
}

// GiveUpEvent describes a call that failed.
type GiveUpEvent struct {
	Request  *http.Request
	Key      string
	Attempts int
	Status   int
	Elapsed  time.Duration
	Err      *RetryError // what RoundTrip returns; Err.Reason says why
}

// PacingEvent describes a wait imposed before an attempt.
type PacingEvent struct {
	Request *http.Request
	Key     string
	Attempt int
	Wait    time.Duration
	Source  WaitSource // SourceBucket or SourceSlowDown
}

// ThrottledEvent describes a 429 response.
type ThrottledEvent struct {
	Request       *http.Request
	Key           string
	Attempt       int
	RetryAfter    time.Duration // valid if HasRetryAfter
	HasRetryAfter bool
}

// LimiterObserver is an optional interface of an Observer, for a shared
// Limiter (Config.Limiter) that can lose its shared store and pace locally
// instead: such a Limiter, given the same Observer, tells it when it falls
// back and when it recovers. The Transport never calls it. Its contract is
// Observer's: fast and safe for concurrent use.
type LimiterObserver interface {
	LimiterFallback(LimiterEvent)
}

// LimiterEvent describes a shared Limiter changing where it takes permits:
// once when it falls back to local pacing, once when it recovers, not on
// every call in between.
type LimiterEvent struct {
	Key      string // the quota key of the call that saw the change
	FellBack bool   // true: now pacing locally; false: recovered
	Err      error  // why it fell back (nil on recovery)
	// Rate is the local rate per key, in permits per second, while fallen
	// back (0 on recovery).
	Rate float64
}

// RetryBudgetObserver is an optional interface of an Observer (Config.Observer):
// a Transport whose Observer has it tells it every change of its retry
// budget's level and every retry the budget refuses. Nothing is called
// while the bucket is full and calls succeed at their first attempt, so
// the success path of a healthy Transport costs nothing more. Its contract
// is Observer's: fast and safe for concurrent use.
type RetryBudgetObserver interface {
	RetryBudget(RetryBudgetEvent)
}

// RetryBudgetEvent describes a change of a Transport's retry budget: a
// retry took tokens (Delta < 0), a call gave some back (Delta > 0), or a
// retry was refused (Refused, Delta 0), after which its call fails with
// ErrRetryBudgetExhausted and GiveUp follows.
type RetryBudgetEvent struct {
	Request *http.Request
	Key     string
	// Attempt is the attempt that failed (a retry taking or refused) or
	// that got the response (tokens given back).
	Attempt int
	// Delta is the change of the level: minus a retry's cost, plus what a
	// call gave back (less than its refund when the bucket filled up).
	Delta int
	// Cost is the retry's cost (taken or refused); 0 when tokens are given back.
	Cost int
	// Tokens is the level after the change; Capacity the bucket's size.
	Tokens, Capacity int
	// Refused is true when the retry was not made: fewer than Cost remained.
	Refused bool
}
