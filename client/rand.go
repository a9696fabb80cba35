package client

import (
	"context"
	"math/rand/v2"
)

// randKey is the context key of a call's own source (WithRand).
type randKey struct{}

// WithRand returns a copy of ctx that carries r as the source of one
// call's draws: when a request's context carries a source, the Transport
// draws that call's jitter (every backoff, Retry-After jitter and
// redraw, a negative control's draws) and its generated Idempotency-Key from it,
// in the call's own order, instead of from Config.Rand. A call's attempts
// are sequential, so r is used without a lock: give each call a source of
// its own, never one shared by calls that may run at once.
//
// Why: one Transport is shared by many goroutines (one per process, as
// it should be), and draws from its one source are made in the order the
// calls happen to reach it, which the scheduler decides. A source per
// logical request, seeded from what identifies the request, makes every
// draw of that request the same from one run to the next, however the
// calls interleave; the retrylab harness does this when clients share a
// Transport. A nil r returns ctx as it is.
func WithRand(ctx context.Context, r *rand.Rand) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, randKey{}, r)
}

// randOf returns the source ctx carries (WithRand), or nil.
func randOf(ctx context.Context) *rand.Rand {
	r, _ := ctx.Value(randKey{}).(*rand.Rand)
	return r
}
