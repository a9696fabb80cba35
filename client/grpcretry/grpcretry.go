// Package grpcretry is retrylab's reference retry interceptor for gRPC
// clients: a grpc.UnaryClientInterceptor that retries what the server says
// may be retried, when the server says, within a cap on attempts and on
// time, and no more than a retry budget allows across the channel.
//
//   - Retries only the codes in Config.Retryable (UNAVAILABLE and
//     RESOURCE_EXHAUSTED by default).
//   - Honours the server's wait: the grpc-retry-pushback-ms trailer (a
//     negative or malformed value means "do not retry", as gRPC's A6 retry
//     design says) and google.rpc.RetryInfo's retry_delay in the status
//     details. A wait that would end past the time budget ends the call at
//     once, with the server's answer.
//   - Otherwise waits a full-jitter backoff: uniform in [0, min(Cap,
//     Base·2^(n-1))) before retry n.
//   - Sends grpc-previous-rpc-attempts on every retry, as grpc-go's own
//     retries do.
//   - Keeps a retry budget shared by every call through the interceptor:
//     a bucket of MaxTokens retries, each retry spends one, each success
//     earns TokenRatio back; with none left a call ends with its error. In
//     steady state retries are then at most TokenRatio of the successes
//     (plus the bucket), so under an overload the retries shed themselves
//     and the server gets its capacity back. (gRPC's own retryThrottling
//     charges failures, not retries, and stops at half its tokens: one
//     call's failures in a long outage can then spend a channel's
//     retries, which is what its subject shows.)
//
// It is its own module, so an HTTP user of retrylab's client does not pull
// in grpc.
package grpcretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Defaults of a zero Config.
const (
	DefaultBase       = 100 * time.Millisecond
	DefaultCap        = 5 * time.Second
	DefaultBudget     = 20 * time.Second
	DefaultMaxTokens  = 20
	DefaultTokenRatio = 0.1
	// MaxDerivedAttempts bounds the attempt cap a zero MaxAttempts derives.
	MaxDerivedAttempts = 32
)

// DefaultRetryable are the codes a zero Config retries: the server's "not
// now" (UNAVAILABLE) and "slow down" (RESOURCE_EXHAUSTED).
var DefaultRetryable = []codes.Code{codes.Unavailable, codes.ResourceExhausted}

// PushbackKey is the trailer in which a server asks for a wait before the
// retry (gRPC A6), in milliseconds.
const PushbackKey = "grpc-retry-pushback-ms"

// PreviousAttemptsKey is the metadata a retry carries: how many attempts
// of the call came before it.
const PreviousAttemptsKey = "grpc-previous-rpc-attempts"

// Config is the interceptor's policy. Its zero value is usable: every
// zero field means its documented default.
type Config struct {
	// MaxAttempts caps the attempts per call, the first included; zero
	// derives it from the budget (AttemptsFor), so that the time budget,
	// not the count, ends a call against a server that stays down.
	MaxAttempts int
	Base        time.Duration // backoff of the first retry's window (DefaultBase)
	Cap         time.Duration // bound on each backoff window (DefaultCap)
	// Budget bounds a call's whole time, waits included (DefaultBudget):
	// no retry starts, and no wait is begun, that would end past it.
	Budget time.Duration
	// AttemptTimeout bounds each attempt (zero: only the Budget does). An
	// attempt that times out with budget left is retried as UNAVAILABLE
	// is: the server may be only slow.
	AttemptTimeout time.Duration
	// Retryable are the codes retried (DefaultRetryable).
	Retryable []codes.Code
	// MaxTokens and TokenRatio are the retry budget (gRPC's
	// retryThrottling): DefaultMaxTokens and DefaultTokenRatio. A negative
	// MaxTokens turns the budget off.
	MaxTokens  float64
	TokenRatio float64
	// Rand draws the jitter (nil: a source of the interceptor's own). It
	// is used under the interceptor's lock.
	Rand *rand.Rand
}

// ErrBudget wraps the error of a call that ended because its time
// budget would not allow the next wait.
var ErrBudget = errors.New("grpcretry: time budget exhausted")

// ErrThrottled wraps the error of a call whose retry the retry budget
// refused.
var ErrThrottled = errors.New("grpcretry: retry budget exhausted")

// Interceptor is the state one interceptor keeps across its calls: the
// jitter source and the retry budget. Make one per channel (or per
// process), with New.
type Interceptor struct {
	cfg Config

	mu     sync.Mutex
	rand   *rand.Rand
	tokens float64
}

// New returns an interceptor for cfg, its zero fields set to their
// defaults.
func New(cfg Config) *Interceptor {
	if cfg.Base <= 0 {
		cfg.Base = DefaultBase
	}
	if cfg.Cap <= 0 {
		cfg.Cap = DefaultCap
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = AttemptsFor(cfg.Base, cfg.Cap, cfg.Budget)
	}
	if cfg.Retryable == nil {
		cfg.Retryable = DefaultRetryable
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.TokenRatio <= 0 {
		cfg.TokenRatio = DefaultTokenRatio
	}
	r := cfg.Rand
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Interceptor{cfg: cfg, rand: r, tokens: cfg.MaxTokens}
}

// Unary is the interceptor, for grpc.WithUnaryInterceptor.
func (in *Interceptor) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	deadline := start.Add(in.cfg.Budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for n := 1; ; n++ {
		actx := ctx
		if n > 1 {
			actx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(n-1))
		}
		end := deadline
		if t := in.cfg.AttemptTimeout; t > 0 && time.Now().Add(t).Before(end) {
			end = time.Now().Add(t)
		}
		actx, cancel := context.WithDeadline(actx, end)
		var trailer metadata.MD
		err := invoker(actx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
		timedOut := actx.Err() != nil && end.Before(deadline)
		cancel()
		if err == nil {
			in.success()
			return nil
		}
		st := status.Convert(err)
		if ctx.Err() != nil || !in.retryable(st.Code()) && !(timedOut && st.Code() == codes.DeadlineExceeded) {
			return err
		}
		if n >= in.cfg.MaxAttempts {
			return err
		}
		wait, ok := in.wait(n, st, trailer)
		if !ok {
			return err // the server said: do not retry
		}
		if time.Now().Add(wait).After(deadline) {
			return errors.Join(ErrBudget, err)
		}
		if !in.allowRetry() {
			return errors.Join(ErrThrottled, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (in *Interceptor) retryable(c codes.Code) bool {
	for _, r := range in.cfg.Retryable {
		if r == c {
			return true
		}
	}
	return false
}

// wait is the wait before retry n (after n attempts) of a call whose last
// attempt ended with st and trailer; ok is false when the server said not
// to retry (a negative or malformed pushback).
func (in *Interceptor) wait(n int, st *status.Status, trailer metadata.MD) (time.Duration, bool) {
	if v := trailer.Get(PushbackKey); len(v) > 0 {
		return Pushback(v[0])
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if w := ri.GetRetryDelay().AsDuration(); w >= 0 {
				return w, true
			}
		}
	}
	return in.backoff(n), true
}

// Pushback reads a grpc-retry-pushback-ms value: its wait, and false for
// a negative or malformed one ("do not retry").
func Pushback(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > int64(24*time.Hour/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// backoff is the full-jitter wait before retry n: uniform in [0,
// min(Cap, Base·2^(n-1))).
func (in *Interceptor) backoff(n int) time.Duration {
	return FullJitter(in.cfg.Base, in.cfg.Cap, n, func(w int64) int64 {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.rand.Int64N(w)
	})
}

// FullJitter is the wait before retry n for base and cap, drawn by draw
// (uniform in [0, w)): uniform in [0, min(cap, base·2^(n-1))).
func FullJitter(base, cap time.Duration, n int, draw func(w int64) int64) time.Duration {
	w := cap
	if n-1 < 62 && base <= cap>>(n-1) {
		w = min(cap, base<<(n-1))
	}
	if w <= 0 {
		return 0
	}
	return time.Duration(draw(int64(w)))
}

// AttemptsFor is the attempt cap of a Config whose MaxAttempts is zero:
// one attempt plus the fewest retries whose mean full-jitter waits add up
// to twice the budget, between 2 and MaxDerivedAttempts.
func AttemptsFor(base, cap, budget time.Duration) int {
	var sum time.Duration
	for retry := 1; retry < MaxDerivedAttempts; retry++ {
		sum += FullJitter(base, cap, retry, func(w int64) int64 { return w / 2 })
		if sum >= 2*budget {
			return max(retry+1, 2)
		}
	}
	return MaxDerivedAttempts
}

// Effective is the Config the interceptor runs: its zero fields set.
func (in *Interceptor) Effective() Config { return in.cfg }

func (in *Interceptor) success() {
	if in.cfg.MaxTokens < 0 {
		return
	}
	in.mu.Lock()
	in.tokens = min(in.cfg.MaxTokens, in.tokens+in.cfg.TokenRatio)
	in.mu.Unlock()
}

// allowRetry takes a token from the retry budget for a retry, and reports
// whether there was one.
func (in *Interceptor) allowRetry() bool {
	if in.cfg.MaxTokens < 0 {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.tokens < 1 {
		return false
	}
	in.tokens--
	return true
}
