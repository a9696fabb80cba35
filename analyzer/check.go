package analyzer

import (
	"strings"
)

// A check's helpers: the one rule, the host's act on its range and its
// examples, bound to its configuration (checkBase, retryFacts).

// decide is the one rule (Analyzer.decide) for this check.
func (b checkBase) decide(lo, hi, thr float64, samples int64, reason string) CheckResult {
	return b.a.decide(b.cfg, lo, hi, thr, samples, reason)
}

// act is what the host is credited with at the end e of this check's
// range (its noise row).
func (b checkBase) act(e Effect) hostAct { return b.a.noise().act(b.cfg.def.Noise, e) }

// hit reports whether counter c wants an example of one more
// offender, counting it.
func (b checkBase) hit(c *counter) bool { return c.hit(b.a.maxEx) }

// example is an offender's example at this retry.
func (f *retryFacts) example(detail string) Example {
	return Example{Client: f.st.client, Key: strings.Clone(f.key), Attempt: int(f.x.n), At: f.x.at, Prev: f.p.done, Detail: detail}
}
