package subjects

// unbounded is a negative control whose one mistake is having no bounds:
// no attempt cap and no time budget, so it retries until its context ends
// (the attempts and budget checks; the harness watchdog records it hung).
// Its waits are the correct jittered backoff, Retry-After honoured.
func init() {
	registerControl(&control{
		name:      "unbounded",
		mistake:   "no attempt cap and no budget: retries until its context ends",
		unbounded: true,
	})
}
