package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// capped-lockstep is a negative control whose one mistake is jittering
// before capping: it waits min(Cap, Base·2^(n-1)·U[0.5, 1.5]), so once
// Base·2^(n-2) reaches the cap every client waits exactly Cap: the late
// retries come in lockstep (the waves check), while the early ones are
// well spread. Everything else is the client's.
func init() {
	registerControl(&control{
		name:    "capped-lockstep",
		mistake: "jitters, then caps: late retries all wait exactly Cap",
		variant: func(e client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(r *rand.Rand, n int, _ time.Duration) time.Duration {
				d := float64(client.Ceiling(e.Base, 1<<62, n)) * (0.5 + r.Float64())
				if d >= float64(e.Cap) {
					return e.Cap
				}
				return time.Duration(d)
			}}
		},
	})
}
