package analyzer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// defaultGiveUp is the share of logical requests (%) a client may lose to
// impatience: a request that failed although the server began serving
// within its budget. Our reference client loses none on any built-in
// scenario, and a lost request is a user-visible failure, so the default
// tolerates only a stray one (docs/design/retry-checks.md has the measurements).
const defaultGiveUp = 1.0

// serving reports whether a phase answers requests with success at all:
// ok, a quota (200 while it has room), passthrough (the upstream's
// answer), or a mix with a 2xx or passthrough share.
func serving(respond string) bool {
	switch {
	case respond == "ok", respond == "passthrough", strings.HasPrefix(respond, "quota"):
		return true
	case strings.HasPrefix(respond, "mix "):
		for _, f := range strings.Fields(respond[len("mix "):]) {
			st, w, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			if st == "passthrough" {
				return true // the upstream's answer, taken to serve
			}
			code, err := strconv.Atoi(st)
			weight, werr := strconv.ParseFloat(w, 64)
			if err == nil && werr == nil && code >= 200 && code < 300 && weight > 0 {
				return true
			}
		}
	}
	return false
}

// giveUpCheck is the give-up check's state: the requests judged, and
// those lost although the server served within their wait (within, from
// where it came), by how long before the wait ended it served.
type giveUpCheck struct {
	checkBase
	n      counter
	within int64
	from   string
	over   overList
}

func newGiveUp(b checkBase) checker {
	ch := &giveUpCheck{checkBase: b}
	ch.within, ch.from = b.a.giveUpWithin(b.cfg)
	return ch
}

// giveUpWithin is how long a logical request may be expected to wait for
// the server: the scenario's give-up.within, else the stated policy's
// budget, else the fleet's watchdog, else 30 s.
func (a *Analyzer) giveUpWithin(c *checkCfg) (int64, string) {
	if v, ok := c.set("within"); ok {
		return int64(v.num * float64(time.Second)), "give-up.within"
	}
	if a.policy != nil && a.policy.Budget > 0 {
		return a.policy.Budget, "the stated budget"
	}
	if a.meta != nil && a.meta.Fleet != nil && a.meta.Fleet.Timeout > 0 {
		return a.meta.Fleet.Timeout, "the watchdog"
	}
	p, _ := c.def.Param("within")
	d := int64(p.Default.Num * float64(time.Second))
	return d, "the default " + time.Duration(d).String()
}

// servedBy returns the first serving phase in effect at some instant of
// [from, until), or nil. A phase that scales a finite capacity down (a
// trigger) does not serve: the server is overloaded by design.
func (a *Analyzer) servedBy(from, until int64) *timeline.Phase {
	if a.meta == nil {
		return nil
	}
	for i := range a.meta.Phases {
		ph := &a.meta.Phases[i]
		if a.meta.Capacity != nil && ph.Capacity > 0 && ph.Capacity < 1 {
			continue
		}
		if ph.Start < until && (ph.End == 0 || ph.End > from) && serving(ph.Respond) {
			return ph
		}
	}
	return nil
}

// giveUpOutcome judges one outcome for the give-up check: a request that
// failed (gave up, ran out of budget, or a library error) although a
// serving phase was in effect before its start + within was lost to
// impatience. Requests stopped by the run, by the watchdog (budget's
// business), by a non-retryable status, or by the harness are not judged.
// A request the client called non-retryable after a rate limit
// (limited: its last attempt's response was one, a 403 with Retry-After
// say) is judged as one that gave up: a rate limit is not a refusal. A
// request that stopped on an overloaded stub (overloaded, see
// Analyzer.overloaded) is not lost: against finite capacity, patience is
// more load, which the capacity checks judge.
//
// seen is how many attempts the stub recorded for the request (the
// evidence's count when the client reports none).
func (ch *giveUpCheck) outcome(o *timeline.Outcome, f outcomeFacts) {
	a, limited, seen := ch.a, f.limited, f.seen
	if o.Result == timeline.ResultHung {
		return
	}
	ch.n.judged++
	if a.overloaded(o) {
		return
	}
	switch o.Result {
	case timeline.ResultGaveUp, timeline.ResultBudget, timeline.ResultError:
	case timeline.ResultNonRetryable:
		if !limited {
			return
		}
	default:
		return
	}
	if ch.within <= 0 || a.meta == nil || len(a.meta.Phases) == 0 {
		return
	}
	ph := a.servedBy(o.Start, o.Start+ch.within)
	if ph == nil {
		return
	}
	// How long before its budget ended the server served: a request the
	// host made late by as much (each of its waits by the noise) is not
	// lost to impatience. Judged at Result, once the noise is known.
	at := max(ph.Start, o.Start)
	margin := o.Start + ch.within - at
	var e *Example
	if len(ch.over.ex) < a.maxEx {
		what := o.Result
		if limited && o.Result == timeline.ResultNonRetryable {
			what = fmt.Sprintf("non-retryable on a %d rate limit", o.Status)
		}
		n := max(o.Attempts, seen)
		e = &Example{Client: strings.Clone(o.Client), Key: strings.Clone(o.Key), Attempt: n, At: o.End, Prev: o.Start,
			Detail: fmt.Sprintf("%s after %s (%s), but phase %s served from %s, %s after the request started and within its %s", what, fmtDur(o.End-o.Start), attemptsText(n), ph.Name, fmtNS(ph.Start), fmtDur(at-o.Start), fmtDur(ch.within))}
	}
	ch.over.add(margin, max(o.Attempts, seen)+1, e, a.maxEx)
}

// overloaded reports whether a failed logical request stopped on a stub's
// finite capacity: the timeline states one, and the request's final
// status is a 503 or none (a full queue's rejection, or an attempt the
// client timed out on while it waited) although the phase it ended in
// answers neither by itself (ok or quota). The outcome is written when the
// client returns, before the stub records an attempt it abandoned, so the
// phase, not the attempt, tells.
func (a *Analyzer) overloaded(o *timeline.Outcome) bool {
	if a.load == nil || (o.Status != 0 && o.Status != 503) {
		return false
	}
	for i := range a.meta.Phases {
		ph := &a.meta.Phases[i]
		if o.End >= ph.Start && (ph.End == 0 || o.End < ph.End) {
			return ph.Respond == "ok" || strings.HasPrefix(ph.Respond, "quota")
		}
	}
	return len(a.meta.Phases) == 0
}

func (ch *giveUpCheck) result() CheckResult {
	a := ch.a
	switch {
	case a.meta == nil || a.meta.Recorder == "serve":
		return skip("a serve recording has no client outcomes")
	case a.fig.Outcomes == 0:
		return skip("the timeline has no outcomes")
	case len(a.meta.Phases) == 0:
		return skip("the timeline states no phases: when the server would have served is unknown")
	case ch.n.judged == 0:
		return skip("no logical request ended on its own (all canceled, hung or harness errors)")
	}
	// A reported success is a claim: one whose key the stub never
	// answered 2xx was lost all the same (a wrapper that swallowed the
	// error, a program that printed ok after giving up).
	t := a.tl
	lost, lostEx := t.lost, t.lostEx
	if a.unbacked() {
		lost, lostEx = 0, nil // a recording is missing: INCONCLUSIVE, not lost
	}
	// Each request lost may have been made late by the host, each of its
	// waits by up to the lateness: the range's low end credits it.
	lostLo, _ := ch.over.count(ch.act(Raises).delay, 0)
	lostWaiting, guEx := ch.over.count(0, 0)
	why := fmt.Sprintf("%d of %d logical requests failed although the server began serving within %s of their start (%s)", lostWaiting, ch.n.judged, fmtDur(ch.within), ch.from)
	if lostLo != lostWaiting {
		why += fmt.Sprintf("; %d with the host's lateness credited per attempt", lostLo)
	}
	if lost > 0 {
		why += fmt.Sprintf("; %d more were reported ok although the server never answered them 2xx", lost)
	}
	r := ch.decide(pct(lostLo+lost, ch.n.judged), pct(lostWaiting+lost, ch.n.judged), ch.cfg.def.Threshold.Num, ch.n.judged, why)
	r.Examples = append(append([]Example(nil), lostEx...), guEx...)
	if len(r.Examples) > a.maxEx {
		r.Examples = r.Examples[:a.maxEx]
	}
	return r
}
