package subjects

import (
	"math"
	"time"

	"github.com/retrylab/retrylab/client"
)

// unbounded is a negative control whose one mistake is having no bounds:
// the client with no attempt cap, no time budget and no retry budget
// (MaxAttempts and Budget at their largest, client.NoRetryBudget), so it
// retries until its context ends (the attempts and budget checks; the
// harness watchdog records it hung). Its waits are the client's jittered
// backoff, Retry-After honoured.
func init() {
	registerControl(&control{
		name:    "unbounded",
		mistake: "no attempt cap, no budget and no retry budget: retries until its context ends",
		config: func(cfg *client.Config) {
			cfg.MaxAttempts, cfg.Budget = math.MaxInt, time.Duration(math.MaxInt64)
			cfg.RetryBudget = client.NoRetryBudget
		},
	})
}
