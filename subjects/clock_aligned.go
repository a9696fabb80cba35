package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// clock-aligned is a negative control whose one mistake is retrying at the
// next whole second of the clock (a cron-like "retry on the next tick"):
// its waits look spread (uniform over a second when failures are), but
// every client of the fleet arrives at the same instant each second (the
// waves check). In virtual time the clock is the bubble's, which starts at
// a whole second. Everything else is the client's.
func init() {
	registerControl(&control{
		name:    "clock-aligned",
		mistake: "retries at the next whole second of the clock",
		variant: func(client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(*rand.Rand, int, time.Duration) time.Duration {
				now := time.Now()
				return now.Truncate(time.Second).Add(time.Second).Sub(now)
			}}
		},
	})
}
