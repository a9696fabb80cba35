package subjects

// ignore-retry-after is a negative control whose one mistake is never
// reading Retry-After: it waits only its own jittered backoff, so it comes
// back before the server said it may (the retry-after check). Everything
// else is correct.
func init() {
	registerControl(&control{
		name:    "ignore-retry-after",
		mistake: "never reads Retry-After; waits only its own jittered backoff",
		noRA:    true,
	})
}
