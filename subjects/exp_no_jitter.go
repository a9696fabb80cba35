package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// exp-no-jitter is a negative control whose one mistake is exponential
// backoff without jitter: it waits exactly client.Ceiling(Base, Cap, n),
// min(Cap, Base·2^(n-1)), before retry n, so clients that failed at the
// same instant retry at the same instants (the waves check). Everything
// else is the client's.
func init() {
	registerControl(&control{
		name:    "exp-no-jitter",
		mistake: "waits min(Cap, Base·2^(n-1)) exactly, ignoring the jitter mode",
		variant: func(e client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(_ *rand.Rand, n int, _ time.Duration) time.Duration {
				return client.Ceiling(e.Base, e.Cap, n)
			}}
		},
	})
}
