package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// discrete-delays is a negative control whose one mistake is a handful of
// fixed delays picked at random: it waits 0, 1 or 2 s before every retry,
// each with probability 1/3. Its waits vary as much as full jitter's (their
// coefficient of variation is 0.82), yet a fleet that failed together comes
// back in three waves (the waves check). Everything else is the client's.
func init() {
	registerControl(&control{
		name:    "discrete-delays",
		mistake: "waits 0, 1 or 2 s at random before every retry (three waves)",
		variant: func(client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(r *rand.Rand, _ int, _ time.Duration) time.Duration {
				return time.Duration(min(int(r.Float64()*3), 2)) * time.Second
			}}
		},
	})
}
