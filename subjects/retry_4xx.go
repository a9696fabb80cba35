package subjects

import (
	"slices"

	"github.com/retrylab/retrylab/client"
)

// retry-4xx is a negative control whose one mistake is retrying statuses
// that will never succeed: 400, 401, 403, 404 and 422 join the client's
// retryable set (client.DefaultRetryable) and are retried like 429/5xx
// (the non-retryable check). Everything else is the client's.
func init() {
	registerControl(&control{
		name:    "retry-4xx",
		mistake: "retries 400, 401, 403, 404 and 422 as well as 429/5xx",
		config: func(cfg *client.Config) {
			cfg.Retryable = append(slices.Clone(client.DefaultRetryable), 400, 401, 403, 404, 422)
		},
	})
}
