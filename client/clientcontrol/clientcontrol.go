// Package clientcontrol builds negative controls: the client's Transport
// with one deliberate mistake, which a test harness must catch (the
// retrylab harness builds its controls so). It is for harnesses, never for
// applications, and makes no compatibility promise; package client's API
// has no such hook.
package clientcontrol

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/internal/variant"
)

// Variant is a deliberate departure of a Transport from its own rules in
// one part: a control built with one field set differs from the reference
// client only where that field says. Every field makes the Transport
// worse, and client.Config cannot express one: a Config never yields a
// backoff without jitter, a Retry-After left unread or a write retried
// without a key.
//
// The zero Variant changes nothing: New(next, cfg, Variant{}) behaves as
// client.New(next, cfg), draw for draw.
type Variant struct {
	// Backoff, when set, replaces the jittered backoff (Config.Jitter's
	// Delay): it returns the wait before retry n (1 for the first retry),
	// given the call's previous backoff wait prev (0 before its first). r
	// is the call's source (client.WithRand) when its context carries
	// one, else the Transport's (Config.Rand), held locked during the
	// call: draw from it and nothing else, so a seeded run replays. A
	// negative wait counts as 0. The rest is the Transport's: a positive
	// Retry-After still wins over the backoff, and a wait that would cross
	// the budget is still redrawn once within what remains of it.
	Backoff func(r *rand.Rand, retry int, prev time.Duration) time.Duration
	// IgnoreRetryAfter makes the Transport never read Retry-After: every
	// retryable failure waits its backoff, and a 403 is a rate limit (see
	// Config.Retryable) only by its rate-limit headers.
	IgnoreRetryAfter bool
	// RetryAfterExtra, when set, returns what is added to every positive
	// Retry-After wait, in place of the Config.RetryAfterJitter draw; r as
	// for Backoff. A negative value counts as 0.
	RetryAfterExtra func(r *rand.Rand) time.Duration
	// RetryWithoutKey retries a non-idempotent request (POST, PATCH, ...)
	// that carries no Idempotency-Key as an idempotent one, sending it
	// without a key (Config.AddIdempotencyKey is not applied): a write the
	// server applied but whose answer was lost may be applied twice.
	RetryWithoutKey bool
	// NoSlowDown makes the Transport ignore rate-limit headers for pacing:
	// no proactive slow-down (see client.ParseRateLimit), whatever they
	// say. They still make a 403 a rate limit.
	NoSlowDown bool
}

// New returns a Transport as client.New does, but for the departures v
// names.
func New(next http.RoundTripper, cfg client.Config, v Variant) *client.Transport {
	t := client.New(next, cfg)
	variant.Set(t, variant.Variant(v))
	return t
}
