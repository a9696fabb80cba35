package subjects

import (
	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// ignore-retry-after is a negative control whose one mistake is never
// reading Retry-After (clientcontrol.Variant.IgnoreRetryAfter): it waits
// only its own jittered backoff, so it comes back before the server said
// it may (the retry-after check). Everything else is the client's.
func init() {
	registerControl(&control{
		name:    "ignore-retry-after",
		mistake: "never reads Retry-After; waits only its own jittered backoff",
		variant: func(client.Config) clientcontrol.Variant { return clientcontrol.Variant{IgnoreRetryAfter: true} },
	})
}
