package subjects

import "github.com/retrylab/retrylab/client"

// no-retry is a negative control whose one mistake is never retrying: the
// client with one attempt per logical request (MaxAttempts 1), so every
// transient 429/503 reaches the user as a failure (gave-up after 1
// attempt). It is safe for the server; it is there so reports show what
// retries buy.
func init() {
	registerControl(&control{
		name:    "no-retry",
		mistake: "never retries: one attempt per logical request",
		config:  func(cfg *client.Config) { cfg.MaxAttempts = 1 },
	})
}
