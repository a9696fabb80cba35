package subjects

import "time"

// retry-after-plus-constant is a negative control whose one mistake is
// adding a constant (Base) to a usable Retry-After instead of a jittered
// backoff: clients told the same instant come back together, Base later.
// That is synchronization the server's value causes: the analyzer reports
// it as the server-induced-synchronization warning, not as a waves
// failure. Without a usable Retry-After it backs off correctly.
func init() {
	registerControl(&control{
		name:    "retry-after-plus-constant",
		mistake: "adds a constant Base to Retry-After instead of jitter",
		raExtra: func(l *loop) time.Duration { return l.pol.Base },
	})
}
