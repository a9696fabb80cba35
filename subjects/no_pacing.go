package subjects

import (
	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// no-pacing is a negative control whose one mistake is not pacing itself:
// it ignores the policy's rate (Policy.Rate, Burst) that keeps it under the
// provider's published quota — it has no token bucket — and the
// rate-limit headers that would slow it down
// (clientcontrol.Variant.NoSlowDown), so it lives on 429s instead (the
// pacing check). It honours the Retry-After of each 429 and is otherwise
// the client.
func init() {
	registerControl(&control{
		name:    "no-pacing",
		mistake: "ignores the quota: no token bucket for the policy's rate, rate-limit headers unread",
		config: func(cfg *client.Config) {
			cfg.Rate, cfg.Burst, cfg.Quota, cfg.Limiter = 0, 0, 0, nil
		},
		variant: func(client.Config) clientcontrol.Variant { return clientcontrol.Variant{NoSlowDown: true} },
	})
}
