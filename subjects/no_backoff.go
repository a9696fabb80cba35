package subjects

import "time"

// no-backoff is a negative control whose one mistake is having no backoff:
// after a 429/5xx or a transport error it retries at once. It still honours
// a usable Retry-After (waiting exactly as long as it says, nothing added),
// so it is caught only where the server sets no usable pace — a bare 503,
// a malformed or past Retry-After — where its retries follow the failure
// within microseconds (the instant-retry check). It caps attempts and
// budget and retries only 429/5xx, so during an outage its attempts run out
// within milliseconds: it loses the requests a patient client would have
// saved (the give-up check), which is the harm retrying at once does to
// the caller.
func init() {
	registerControl(&control{
		name:    "no-backoff",
		mistake: "retries at once: no backoff (a usable Retry-After is still honoured)",
		delay:   func(*loop, int) time.Duration { return 0 },
	})
}
