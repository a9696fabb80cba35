package subjects

import (
	"time"

	"github.com/retrylab/retrylab/client"
)

// fixed-delay is a negative control whose one mistake is a constant wait:
// it waits Policy.Base before every retry, with neither exponential growth
// nor jitter, so a fleet that failed together retries together, forever in
// step (the waves check). It still honours Retry-After (waiting it plus
// Base), caps attempts and budget, and retries only 429/5xx.
func init() {
	registerControl(&control{
		name:    "fixed-delay",
		mistake: "waits a constant Base before every retry (no growth, no jitter)",
		delay:   func(l *loop, n int) time.Duration { return l.pol.Base },
		// Enough attempts to wait out the budget at one Base each (the
		// budget then ends the call, as the client's does): the cap
		// derived for exponential backoff would run out within seconds of
		// an outage and lose requests, a second mistake.
		attempts: func(p Policy) int {
			return min(max(int(p.Budget/p.Base)+2, 2), 10*client.MaxDerivedAttempts)
		},
	})
}
