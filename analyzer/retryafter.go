package analyzer

import (
	"fmt"

	"github.com/retrylab/retrylab/internal/loghist"
)

// retry-after: a retry after a Retry-After that named a later instant
// must not arrive before it (less the tolerance). The host only makes a
// retry later: an early retry was early (lo); one that arrived within the
// lateness p50 after the earliest instant allowed may have been early
// too (hi).
type retryAfterCheck struct {
	checkBase
	n counter
	// slack: how far past not_before − tolerance the retries it paced
	// arrived.
	slack *loghist.Hist
}

func newRetryAfter(b checkBase) checker { return &retryAfterCheck{checkBase: b} }

func (ch *retryAfterCheck) retry(f *retryFacts) {
	if !f.paced {
		return
	}
	ch.n.judged++
	p, x, tol := f.p, f.x, ch.a.raTol
	if !f.early {
		if ch.slack == nil {
			ch.slack = loghist.New(latencyLayout)
		}
		ch.slack.Add(x.at - (p.nb - tol))
		return
	}
	e := p.nb - x.at
	ch.n.worst = max(ch.n.worst, e)
	if ch.hit(&ch.n) {
		ch.n.ex = append(ch.n.ex, f.example(fmt.Sprintf("attempt %d arrived at %s, %s before not_before %s (the previous response at %s)",
			x.n, fmtNS(x.at), fmtDur(e), fmtNS(p.nb), fmtNS(p.done))))
	}
}

func (ch *retryAfterCheck) result() CheckResult {
	a, c := ch.a, &ch.n
	if c.judged == 0 {
		return skip("no retry followed a Retry-After that named a later instant")
	}
	why := fmt.Sprintf("%d of %d retries after a usable Retry-After arrived more than %s before not_before%s",
		c.bad, c.judged, fmtDur(a.raTol), a.clockNote())
	if c.bad > 0 {
		why += fmt.Sprintf(" (worst: %s early)", fmtDur(c.worst))
	}
	hidden := int64(0)
	if late := ch.act(Lowers).bulk; late > 0 && ch.slack != nil {
		hidden = int64(ch.slack.Below(late))
		if hidden > 0 {
			why += fmt.Sprintf("; %d more arrived within the host's lateness p50 %s of it", hidden, fmtDur(late))
		}
	}
	r := ch.decide(float64(c.bad), float64(c.bad+hidden), ch.cfg.def.Threshold.Num, c.judged, why)
	r.Examples = c.ex
	return r
}
