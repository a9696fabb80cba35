// Package variant carries a negative control's departures
// (clientcontrol.Variant) into package client's Transport, so that
// package client exports no hook for them.
package variant

import (
	"math/rand/v2"
	"time"
)

// Variant is clientcontrol.Variant's shape (its doc says what each field
// does); clientcontrol converts one to the other, so the two cannot drift.
type Variant struct {
	Backoff          func(r *rand.Rand, retry int, prev time.Duration) time.Duration
	IgnoreRetryAfter bool
	RetryAfterExtra  func(r *rand.Rand) time.Duration
	RetryWithoutKey  bool
	NoSlowDown       bool
}

// Set gives t, a *client.Transport not yet in use, the departures v.
// Package client installs it when it loads.
var Set func(t any, v Variant)
