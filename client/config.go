package client

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults for the zero fields of Config. They follow the practice the
// project's seeds ask for: a 200 ms base within the usual 100-500 ms, a 30 s
// cap, and a 30 s budget for the whole call. The attempt cap is derived
// from the budget (see AttemptsFor), so the budget, not a count, ends a call
// against a server that stays down.
const (
	DefaultBase   = 200 * time.Millisecond
	DefaultCap    = 30 * time.Second
	DefaultBudget = 30 * time.Second
	// MaxDerivedAttempts bounds the attempt cap AttemptsFor derives.
	MaxDerivedAttempts = 100
	// DefaultBurst is the bucket's burst when Config.Rate (or Quota) is set
	// and Config.Burst is not.
	DefaultBurst = 1
	// DefaultQuotaShare is the share of a published Quota the bucket paces
	// at when Config.Rate is zero: 80% leaves headroom for retries, clock
	// skew and other callers.
	DefaultQuotaShare = 0.8
	// SlowDownBelow is the share of a published rate limit under which the
	// remaining quota is spread until the reset (proactive slow-down).
	SlowDownBelow = 0.10
	// DrainLimit is how many bytes of a response that will be retried are
	// read and discarded before closing it, so its connection can be reused.
	DrainLimit = 64 << 10
)

// DefaultRetryable is the status set retried when Config.Retryable is nil:
// 429 Too Many Requests and the transient server errors 500, 502, 503, 504.
// Every other status (400, 401, 403, 404, 422, ...) fails at once, but for
// a 403 that says it is a rate limit (see Config.Retryable).
var DefaultRetryable = []int{
	http.StatusTooManyRequests,
	http.StatusInternalServerError,
	http.StatusBadGateway,
	http.StatusServiceUnavailable,
	http.StatusGatewayTimeout,
}

// Jitter selects how a computed backoff is randomized. Every mode draws from
// Config.Rand (or the call's own source, WithRand); there is no mode
// without jitter, so a fixed-delay or exponential-only policy cannot be
// configured (only a negative control departs from it, through package
// clientcontrol). The zero value is JitterFull.
type Jitter int

// Jitter modes. For the wait before retry n (n = 1 for the first retry) let
// ceil = min(Cap, Base·2^(n-1)).
const (
	// JitterFull waits a uniform random duration in [0, ceil]: the default,
	// and the one that spreads a fleet best.
	JitterFull Jitter = iota
	// JitterEqual waits ceil/2 plus a uniform random duration in [0, ceil/2].
	JitterEqual
	// JitterDecorrelated waits min(Cap, uniform[Base, 3·previous wait]),
	// starting from previous = Base; its waits lie in [Base, Cap] and, unlike
	// the other two, may exceed ceil.
	JitterDecorrelated
)

// String returns "full", "equal" or "decorrelated" (unknown values are
// treated, and named, as full).
func (j Jitter) String() string {
	switch j {
	case JitterEqual:
		return "equal"
	case JitterDecorrelated:
		return "decorrelated"
	}
	return "full"
}

// ParseJitter parses a jitter mode name as String writes it; "" means full.
func ParseJitter(s string) (Jitter, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "full":
		return JitterFull, nil
	case "equal":
		return JitterEqual, nil
	case "decorrelated":
		return JitterDecorrelated, nil
	}
	return JitterFull, fmt.Errorf("client: unknown jitter mode %q (want full, equal or decorrelated)", s)
}

// Config is a Transport's policy. Every zero field means the documented
// default, so the zero Config is safe and useful: retries of 429/5xx and
// transient network errors with full jitter (base DefaultBase, cap
// DefaultCap) within DefaultBudget (the attempt cap derived from it),
// Retry-After honoured, non-idempotent requests never retried without an
// Idempotency-Key, no self-pacing bucket (no quota is known) but proactive
// slow-down when rate-limit headers say the quota is nearly spent, and a
// retry budget (DefaultRetryBudgetCapacity tokens per Transport, see
// RetryBudget) that refuses retries once they are no longer a small share
// of the calls.
//
// Negative durations and counts are treated as zero (the default), but for
// RetryBudget.Capacity, where negative means no retry budget. A Config is a
// value: New copies it, and later changes to it have no effect.
type Config struct {
	// Base is the backoff's base delay (zero: DefaultBase).
	Base time.Duration
	// Cap bounds every computed backoff (zero: DefaultCap). A Cap below Base
	// is raised to Base.
	Cap time.Duration
	// Jitter is the backoff's randomization (zero: JitterFull).
	Jitter Jitter
	// MaxAttempts caps the attempts of one call, the first included (1
	// disables retries). Zero derives the cap from the Budget and the
	// backoff (AttemptsFor): enough attempts that they do not run out
	// before the budget does. An explicit cap whose backoff waits fall
	// short of the budget makes the attempts, not the budget, end a call
	// against a server that stays down; Summary says so.
	MaxAttempts int
	// Budget bounds the elapsed time of one RoundTrip call, every attempt,
	// pacing wait and backoff wait included (zero: DefaultBudget). A wait
	// that would end at or past the budget is not started: the call fails at
	// once with ErrBudgetExhausted; but the first backoff draw of a call
	// that would is redrawn within what remains (less AttemptTimeout), so
	// the last attempt goes out while the budget lasts. An attempt still in
	// flight when the budget ends is canceled.
	Budget time.Duration
	// AttemptTimeout bounds each attempt until its response headers arrive
	// (zero: only the Budget bounds it). An attempt that times out with
	// budget left is retried like a transient network error.
	AttemptTimeout time.Duration

	// RetryAfterJitter, when positive, adds a uniform random duration in
	// [0, RetryAfterJitter] to every wait a Retry-After sets, so a fleet told
	// the same instant does not come back in one wave. The wait is never
	// shortened: Retry-After is still honoured. Zero: obey it exactly.
	RetryAfterJitter time.Duration

	// RetryBudget bounds the retries of all the Transport's calls
	// together: a token bucket shared by every call and quota key, that a
	// retry takes tokens from and a call answered without a retryable
	// status gives back to; a retry that finds too few is not made (the
	// call fails at once with ErrRetryBudgetExhausted). The zero value is
	// the default budget (the AWS SDKs' retry quota), NoRetryBudget turns
	// it off, and RetryBudget's doc has the exact rule. Why: backoff
	// spreads retries in time but does not make them fewer, and under
	// sustained overload that load can keep a server down after its
	// trigger is gone (a metastable failure). The budget is per Transport:
	// share one per upstream API across the process; one per request or
	// per short-lived worker starts full each time and bounds nothing
	// (client/README.md, "The budget's scope", has the measurements).
	RetryBudget RetryBudget

	// Retryable is the set of statuses retried (nil: DefaultRetryable). An
	// empty non-nil slice retries no status.
	//
	// Whatever the set, a 403 Forbidden that says it is a rate limit, the
	// way GitHub answers its secondary limits, is retried as a 429 is: one
	// with a valid Retry-After (which it waits for), or with rate-limit
	// headers that say none remain (X-RateLimit-Remaining: 0, RateLimit
	// r=0), which it waits out until their reset. A plain 403 fails at
	// once.
	Retryable []int
	// RetryError reports whether a transport error is transient and worth
	// retrying (nil: IsTransient). It is not called for errors caused by the
	// caller's context ending: those are never retried.
	RetryError func(error) bool

	// AddIdempotencyKey makes the Transport add a fresh random
	// Idempotency-Key header to non-idempotent requests (POST, PATCH, ...)
	// that have none, so they can be retried; the same key is sent on every
	// attempt of a call. Without it such requests are sent once.
	AddIdempotencyKey bool

	// ClaimWaits makes the Transport send, on each retry, an
	// X-Retrylab-Wait header: the milliseconds it meant to wait after the
	// previous attempt's answer (its backoff or Retry-After wait, plus any
	// pacing wait). retrylab's analyzer checks each claim against the
	// arrival and reads the client's own waits from consistent claims,
	// apart from the lateness a busy host adds. For runs against retrylab.
	ClaimWaits bool

	// Rate is the self-pacing token bucket's rate in requests per second per
	// quota key (zero: DefaultQuotaShare of Quota, or no bucket when Quota is
	// zero too).
	Rate float64
	// Burst is the bucket's capacity (zero: DefaultBurst).
	Burst int
	// Quota is the provider's published rate in requests per second per key,
	// if known. It sets the default Rate and is stated by Summary.
	Quota float64
	// Limiter, if set, paces attempts in place of the in-process token
	// buckets (Rate and Burst are then only stated by Summary): a shared
	// Limiter makes a fleet of processes share one quota.
	Limiter Limiter
	// Key maps a request to its quota key (nil: HostKey). Every key has its
	// own bucket and slow-down state; keys are kept for the Transport's life,
	// so the set of keys should be bounded.
	Key func(*http.Request) string

	// Observer is told about attempts, retries, give-ups, pacing waits and
	// 429s (nil: NopObserver). It is called synchronously from RoundTrip, so
	// it must be fast and safe for concurrent use.
	Observer Observer
	// Rand is the source of every jitter draw and generated key (nil: a
	// source of the Transport's own, randomly seeded). Give a seeded source
	// to replay a run. The Transport serializes its own draws; do not share
	// one Rand with other users or between Transports. When a request's
	// context carries a source (WithRand), the Transport draws that call's
	// jitter and key from it instead, so that calls sharing one Transport
	// from many goroutines replay whatever order they run in.
	Rand *rand.Rand
}

// HostKey is the default quota key: the request's host (URL.Host, else
// Request.Host), port included.
func HostKey(r *http.Request) string {
	if r.URL != nil && r.URL.Host != "" {
		return r.URL.Host
	}
	return r.Host
}

// Effective returns c with every zero field replaced by its default, as New
// applies them: Base, Cap, MaxAttempts, Budget, RetryBudget (its zero
// fields; an Off budget comes back as NoRetryBudget), Retryable, Rate (from
// Quota), Burst (when there is a Rate), Key and Observer. Rand stays nil
// when unset (New then makes a source per Transport). The Retryable slice
// is a copy.
func (c Config) Effective() Config {
	if c.Base <= 0 {
		c.Base = DefaultBase
	}
	if c.Cap <= 0 {
		c.Cap = DefaultCap
	}
	if c.Cap < c.Base {
		c.Cap = c.Base
	}
	switch c.Jitter {
	case JitterFull, JitterEqual, JitterDecorrelated:
	default:
		c.Jitter = JitterFull
	}
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = AttemptsFor(c.Base, c.Cap, c.Budget, c.Jitter)
	}
	if c.RetryAfterJitter < 0 {
		c.RetryAfterJitter = 0
	}
	if c.AttemptTimeout < 0 {
		c.AttemptTimeout = 0
	}
	c.RetryBudget = c.RetryBudget.effective()
	if c.Retryable == nil {
		c.Retryable = slices.Clone(DefaultRetryable)
	} else {
		c.Retryable = slices.Clone(c.Retryable)
	}
	if c.RetryError == nil {
		c.RetryError = IsTransient
	}
	if c.Quota < 0 {
		c.Quota = 0
	}
	if c.Rate <= 0 {
		c.Rate = c.Quota * DefaultQuotaShare
	}
	if c.Burst <= 0 && c.Rate > 0 {
		c.Burst = DefaultBurst
	}
	if c.Rate <= 0 {
		c.Burst = 0
	}
	if c.Key == nil {
		c.Key = HostKey
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	return c
}

// MetricsDescriber is an optional interface of an Observer that exports
// metrics: Summary lists the names it returns.
type MetricsDescriber interface {
	MetricNames() []string
}

// Summary returns the configuration summary the next engineer tunes when the
// upstream changes its limits: the retryable set, base, cap and jitter mode,
// the attempt and time budgets, the retry budget (its capacity, costs and
// refunds, or that there is none), the bucket's rate and burst and their ratio
// to the published quota, whether the bucket is per-process or shared, and
// the metrics emitted. It describes the effective configuration, defaults
// applied. One fact per line.
func (c Config) Summary() string {
	e := c.Effective()
	var b strings.Builder
	codes := make([]string, len(e.Retryable))
	for i, s := range e.Retryable {
		codes[i] = strconv.Itoa(s)
	}
	retried := "no status"
	if len(codes) > 0 {
		retried = strings.Join(codes, ", ")
	}
	errs := "transient network errors"
	if c.RetryError != nil {
		errs = "network errors its RetryError accepts"
	}
	fmt.Fprintf(&b, "retryable: %s, and %s; every other status fails at once\n", retried, errs)
	fmt.Fprintf(&b, "backoff: %s jitter, base %v, cap %v; wait before retry n in %s\n",
		e.Jitter, e.Base, e.Cap, jitterRange(e.Jitter))
	fmt.Fprintf(&b, "retry-after: honoured first (both forms, clamped at 0; a zero wait falls back to backoff), over rate-limit headers and backoff\n")
	fmt.Fprintf(&b, "attempts: %s\n", attemptsLine(c.MaxAttempts <= 0, e))
	at := "none"
	if e.AttemptTimeout > 0 {
		at = e.AttemptTimeout.String()
	}
	fmt.Fprintf(&b, "budget: %v per call, waits included; a Retry-After wait that would cross it fails at once (ErrBudgetExhausted), a backoff draw that would is redrawn once within what remains (less the per-attempt timeout); per-attempt timeout %s\n", e.Budget, at)
	fmt.Fprintf(&b, "%s\n", e.RetryBudget.summary())
	add := "not added"
	if e.AddIdempotencyKey {
		add = "added when missing"
	}
	fmt.Fprintf(&b, "idempotency: POST, PATCH and other non-idempotent methods retried only with an Idempotency-Key (%s); bodies replayed via GetBody, else not retried\n", add)
	switch {
	case e.Limiter != nil && e.Quota > 0:
		fmt.Fprintf(&b, "pacing: custom Limiter per quota key (published quota %s req/s)\n", fmtFloat(e.Quota))
	case e.Limiter != nil:
		fmt.Fprintf(&b, "pacing: custom Limiter per quota key\n")
	case e.Rate > 0 && e.Quota > 0:
		fmt.Fprintf(&b, "pacing: token bucket %s req/s, burst %d, per quota key (%.0f%% of the published %s req/s)\n",
			fmtFloat(e.Rate), e.Burst, 100*e.Rate/e.Quota, fmtFloat(e.Quota))
	case e.Rate > 0:
		fmt.Fprintf(&b, "pacing: token bucket %s req/s, burst %d, per quota key (no published quota given)\n", fmtFloat(e.Rate), e.Burst)
	default:
		fmt.Fprintf(&b, "pacing: no token bucket (no rate or published quota given)\n")
	}
	key := "request host"
	if c.Key != nil {
		key = "custom key function"
	}
	if e.Limiter != nil {
		fmt.Fprintf(&b, "buckets: shared through a custom Limiter (Rate and Burst not used locally), keyed by %s\n", key)
	} else {
		fmt.Fprintf(&b, "buckets: per-process (not shared across a fleet), keyed by %s\n", key)
	}
	fmt.Fprintf(&b, "slow-down: below %.0f%% of the limit in RateLimit / X-RateLimit-Remaining, the key's remaining quota is spread until the reset\n", 100*SlowDownBelow)
	fmt.Fprintf(&b, "layers: retries at one layer only; a nested retrying Transport passes through\n")
	metrics := "none (no observer)"
	if md, ok := e.Observer.(MetricsDescriber); ok {
		metrics = strings.Join(md.MetricNames(), ", ")
	} else if c.Observer != nil {
		metrics = "via a custom Observer"
	}
	fmt.Fprintf(&b, "metrics: %s\n", metrics)
	return b.String()
}

func jitterRange(j Jitter) string {
	switch j {
	case JitterEqual:
		return "[ceil/2, ceil], ceil = min(cap, base·2^(n-1))"
	case JitterDecorrelated:
		return "[base, min(cap, 3·previous wait)]"
	}
	return "[0, min(cap, base·2^(n-1))]"
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

// AttemptsFor is the attempt cap of a Config whose MaxAttempts is zero:
// one attempt, plus the fewest retries whose mean backoff waits (under
// jitter j, base and cap as Config has them) add up to twice the budget,
// between 2 and MaxDerivedAttempts. A call against a server that stays
// down is then ended by its budget, not by running out of attempts: the
// waits of that many retries fall short of the budget itself only if
// their draws are far below their means, which almost never happens
// (with full jitter the sum of the draws is within a few standard
// deviations of its mean, and the mean is twice the budget). The cap still
// bounds a call whose attempts fail fast with Retry-After "now".
func AttemptsFor(base, cap, budget time.Duration, j Jitter) int {
	if base <= 0 {
		base = DefaultBase
	}
	if cap < base {
		cap = base
	}
	if budget <= 0 {
		budget = DefaultBudget
	}
	target := 2 * budget.Seconds()
	var sum float64
	prev := 0.0
	for retry := 1; retry < MaxDerivedAttempts; retry++ {
		m := meanWait(j, base, cap, retry, prev)
		prev = m
		sum += m
		if sum >= target {
			return max(retry+1, 2)
		}
	}
	return MaxDerivedAttempts
}

// meanWait is the mean backoff wait before retry n in seconds; prev is the
// previous retry's mean (decorrelated jitter).
func meanWait(j Jitter, base, cap time.Duration, retry int, prev float64) float64 {
	c := Ceiling(base, cap, retry).Seconds()
	switch j {
	case JitterEqual:
		return 0.75 * c
	case JitterDecorrelated:
		b, hi := base.Seconds(), cap.Seconds()
		if prev < b {
			prev = b
		}
		return (b + min(hi, 3*prev)) / 2
	}
	return c / 2
}

// waitReach is how long the backoff waits of a call with the given attempts
// add up to: at most (every draw at its ceiling) and on average.
func waitReach(e Config, attempts int) (most, mean time.Duration) {
	var m, prevMean float64
	prevMax := e.Base
	for retry := 1; retry < attempts; retry++ {
		switch e.Jitter {
		case JitterDecorrelated:
			hi := min(e.Cap, 3*max(prevMax, e.Base))
			if prevMax > e.Cap/3 {
				hi = e.Cap
			}
			most = satAdd(most, hi)
			prevMax = hi
		default:
			most = satAdd(most, Ceiling(e.Base, e.Cap, retry))
		}
		prevMean = meanWait(e.Jitter, e.Base, e.Cap, retry, prevMean)
		m += prevMean
	}
	return most, time.Duration(m * float64(time.Second))
}

// attemptsLine is Summary's attempts line: the cap, where it comes from,
// and how far its backoff waits reach against the budget, saying so when
// the attempts run out well before the budget does.
func attemptsLine(derived bool, e Config) string {
	most, mean := waitReach(e, e.MaxAttempts)
	s := fmt.Sprintf("at most %d per call (first included)", e.MaxAttempts)
	if derived {
		s += ", derived from the budget"
	}
	s += fmt.Sprintf("; their backoff waits reach at most %v, about %v on average, of the %v budget",
		roundDur(most), roundDur(mean), e.Budget)
	if mean < e.Budget {
		s += "; MISMATCH: against a server that stays down the attempts, not the budget, end the call" +
			" (an outage longer than the waits is lost); leave MaxAttempts zero to derive it from the budget"
	}
	return s
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour*24*365:
		return d.Round(time.Hour)
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
