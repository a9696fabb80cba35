package subjects

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// no-backoff is a negative control whose one mistake is having no backoff:
// after a 429/5xx or a transport error it retries at once. It still honours
// a positive Retry-After as the client does (waiting exactly as long as it
// says), so it is caught only where the server sets no usable pace — a
// bare 503, a malformed or past Retry-After — where its retries follow the
// failure within microseconds (the instant-retry check). It caps attempts
// and budget and retries only 429/5xx, so during an outage its attempts
// run out within milliseconds: it loses the requests a patient client
// would have saved (the give-up check), which is the harm retrying at once
// does to the caller.
func init() {
	registerControl(&control{
		name:    "no-backoff",
		mistake: "retries at once: no backoff (a usable Retry-After is still honoured)",
		variant: func(client.Config) clientcontrol.Variant {
			return clientcontrol.Variant{Backoff: func(*rand.Rand, int, time.Duration) time.Duration { return 0 }}
		},
	})
}
