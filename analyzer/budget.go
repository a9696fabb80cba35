package analyzer

import (
	"fmt"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// budget: a failed logical request must not hang, nor end more than the
// tolerance past the stated budget. Each wait of a request may have been
// made late by the host: the range's low end credits it with the lateness
// per attempt (schema row), so overruns are kept and counted at Result.
type budgetCheck struct {
	checkBase
	n           counter
	budget, tol int64    // ns
	over        overList // the failed requests past budget + tolerance
}

func newBudget(b checkBase) checker {
	ch := &budgetCheck{checkBase: b}
	if p := b.a.policy; p != nil {
		ch.budget = p.Budget
	}
	if v, ok := b.cfg.set("budget"); ok {
		ch.budget = secNS(v.num)
	}
	// No fixed default: a tenth of the budget, at least a second (the
	// schema says so for the docs).
	ch.tol = int64(max(time.Second, time.Duration(ch.budget)/10))
	if v, ok := b.cfg.set("tolerance"); ok {
		ch.tol = secNS(v.num)
	}
	return ch
}

func (ch *budgetCheck) outcome(o *timeline.Outcome, f outcomeFacts) {
	if o.Result == timeline.ResultOK {
		return
	}
	ch.n.judged++
	attempts := max(o.Attempts, f.seen)
	ex := Example{Client: strings.Clone(o.Client), Key: strings.Clone(o.Key), Attempt: attempts, At: o.End, Prev: o.Start}
	if o.Result == timeline.ResultHung {
		if ch.hit(&ch.n) {
			ex.Detail = fmt.Sprintf("never returned: the watchdog fired after %s (%s)", fmtDur(o.End-o.Start), attemptsText(attempts))
			ch.n.ex = append(ch.n.ex, ex)
		}
		return
	}
	if ch.budget <= 0 {
		return
	}
	if over := o.End - o.Start - ch.budget; over > ch.tol {
		ch.n.worst = max(ch.n.worst, over)
		ex.Detail = fmt.Sprintf("%s after %s (%s); the budget is %s", o.Result, fmtDur(o.End-o.Start), attemptsText(attempts), fmtDur(ch.budget))
		ch.over.add(over-ch.tol, attempts+1, &ex, ch.a.maxEx)
	}
}

func (ch *budgetCheck) result() CheckResult {
	a := ch.a
	switch {
	case a.meta != nil && a.meta.Recorder == "serve":
		return skip("a serve recording has no client outcomes")
	case a.fig.Outcomes == 0:
		return skip("the timeline has no outcomes")
	case ch.n.judged == 0:
		return skip("no logical request failed (outcomes of the harness, canceled or past the cap are not judged)")
	}
	// An exec program's end is when its line was read: the reader's
	// lateness too.
	h := ch.act(Raises)
	reader := int64(0)
	if h.delay > 0 {
		reader = h.n.reader
	}
	overLo, _ := ch.over.count(h.delay, reader)
	over, overEx := ch.over.count(0, 0)
	why := fmt.Sprintf("failed logical requests that hung or ended more than %s past the %s budget (of %d failed)", fmtDur(ch.tol), fmtDur(ch.budget), ch.n.judged)
	if ch.budget <= 0 {
		why = fmt.Sprintf("failed logical requests that hung (of %d failed); no stated budget, so durations were not judged", ch.n.judged)
	}
	r := ch.decide(float64(ch.n.bad+overLo), float64(ch.n.bad+over), ch.cfg.def.Threshold.Num, ch.n.judged, why)
	r.Examples = append(append([]Example(nil), ch.n.ex...), overEx...)
	if len(r.Examples) > a.maxEx {
		r.Examples = r.Examples[:a.maxEx]
	}
	return r
}
