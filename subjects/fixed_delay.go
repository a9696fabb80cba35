package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// fixed-delay is a negative control whose one mistake is a constant wait:
// it waits Policy.Base before every retry, with neither exponential growth
// nor jitter, so a fleet that failed together retries together, forever in
// step (the waves check). Everything else is the client's: it honours
// Retry-After, keeps its attempt cap and budget, and retries only 429/5xx.
func init() {
	registerControl(&control{
		name:    "fixed-delay",
		mistake: "waits a constant Base before every retry (no growth, no jitter)",
		variant: func(e client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(*rand.Rand, int, time.Duration) time.Duration { return e.Base }}
		},
		// Enough attempts to wait out the budget at one Base each (the
		// budget then ends the call, as the client's does): the cap
		// derived for exponential backoff would run out within seconds of
		// an outage and lose requests, a second mistake.
		attempts: func(e client.Config) int {
			return min(max(int(e.Budget/e.Base)+2, 2), 10*client.MaxDerivedAttempts)
		},
	})
}
