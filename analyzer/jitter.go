package analyzer

import "fmt"

// jitter-bounds: a client-paced retry waits at most the stated policy's
// bound, min(cap, base·2^n), plus the tolerance. A wait the host made late
// is not the policy's: the range's low end credits each over-long wait
// with the lateness (schema row), so offenders are kept and counted at
// Result. Whether a retry is bounded, and its bound, is the pairing's
// classification (retryFacts).
type jitterCheck struct {
	checkBase
	n    counter
	over overList
}

func newJitter(b checkBase) checker { return &jitterCheck{checkBase: b} }

func (ch *jitterCheck) retry(f *retryFacts) {
	if !f.bounded {
		return
	}
	ch.n.judged++
	if !f.beyond {
		return
	}
	over := f.gap - f.bound
	ch.n.worst = max(ch.n.worst, over)
	e := f.example(fmt.Sprintf("retry %d waited %s; the stated policy allows at most %s", f.k, fmtDur(f.gap), fmtDur(f.bound)))
	ch.over.add(over-ch.a.jbTol, 1, &e, ch.a.maxEx)
}

func (ch *jitterCheck) result() CheckResult {
	a := ch.a
	switch {
	case a.policy == nil:
		return skip("no stated policy")
	case a.policy.Base <= 0:
		return skip("the stated policy has no base delay")
	case !a.jbBounded:
		return skip("decorrelated jitter without a stated cap has no upper bound")
	case a.pacingOn:
		return skip("the client is expected to self-throttle, and its limiter's waits cannot be told from its backoff")
	case ch.n.judged == 0:
		return skip("no retry paced by the client's own backoff")
	}
	badLo, _ := ch.over.count(ch.act(Raises).delay, 0)
	bad, ex := ch.over.count(0, 0)
	r := ch.decide(pct(badLo, ch.n.judged), pct(bad, ch.n.judged), ch.cfg.def.Threshold.Num, ch.n.judged,
		fmt.Sprintf("%d of %d client-paced retries waited longer than min(cap, base·2^n) + %s", bad, ch.n.judged, fmtDur(a.jbTol)))
	if bad > 0 {
		r.Reason += fmt.Sprintf(" (worst: %s over)", fmtDur(ch.n.worst))
	}
	r.Examples = ex
	return r
}
