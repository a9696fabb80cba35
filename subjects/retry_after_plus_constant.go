package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// retry-after-plus-constant is a negative control whose one mistake is
// adding a constant (Base) to every positive Retry-After wait instead of a
// random spread (clientcontrol.Variant.RetryAfterExtra, in place of the
// Config.RetryAfterJitter draw): clients told the same instant come back
// together, Base later. That is synchronization the server's value causes:
// the analyzer reports it as the server-induced-synchronization warning,
// not as a waves failure (the reference client, which obeys Retry-After
// exactly, gets the same warning). Without a positive Retry-After it backs
// off as the client does.
func init() {
	registerControl(&control{
		name:    "retry-after-plus-constant",
		mistake: "adds a constant Base to Retry-After instead of jitter",
		variant: func(e client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{RetryAfterExtra: func(*rand.Rand) time.Duration { return e.Base }}
		},
	})
}
