package subjects

import "time"

// exp-no-jitter is a negative control whose one mistake is exponential
// backoff without jitter: it waits exactly min(Cap, Base·2^(n-1)) before
// retry n, so clients that failed at the same instant retry at the same
// instants (the waves check). Everything else is correct.
func init() {
	registerControl(&control{
		name:    "exp-no-jitter",
		mistake: "waits min(Cap, Base·2^(n-1)) exactly, ignoring the jitter mode",
		delay:   func(l *loop, n int) time.Duration { return expCeil(l.pol.Base, l.pol.Cap, n) },
	})
}
