package subjects

import "github.com/retrylab/retrylab/client"

// no-retry-budget is a negative control whose one mistake is having no
// retry budget: the reference client with its retry budget off
// (client.NoRetryBudget), and nothing else changed. Each call is still
// bounded by its attempts and its time budget, with jittered backoff and
// Retry-After honoured, so on a server that fails for a while and then
// recovers it behaves as retrylab does; but nothing bounds the retries of
// all its calls together, so under sustained overload every failed request
// still makes all its attempts, and the extra load can keep a server of
// finite capacity overloaded after its trigger has gone (the metastable
// scenario's recovery check).
func init() {
	registerControl(&control{
		name:    "no-retry-budget",
		mistake: "our client with its retry budget off: under sustained overload every failed request still makes all its attempts",
		config:  func(cfg *client.Config) { cfg.RetryBudget = client.NoRetryBudget },
	})
}
