package subjects

import "time"

// capped-lockstep is a negative control whose one mistake is jittering
// before capping: it waits min(Cap, Base·2^(n-1)·U[0.5, 1.5]), so once
// Base·2^(n-2) reaches the cap every client waits exactly Cap: the late
// retries come in lockstep (the waves check), while the early ones are
// well spread. Everything else is correct.
func init() {
	registerControl(&control{
		name:    "capped-lockstep",
		mistake: "jitters, then caps: late retries all wait exactly Cap",
		delay: func(l *loop, n int) time.Duration {
			d := float64(expCeil(l.pol.Base, 1<<62, n)) * (0.5 + l.float())
			if d >= float64(l.pol.Cap) {
				return l.pol.Cap
			}
			return time.Duration(d)
		},
	})
}
