package analyzer

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/timeline"
)

// retry-after: a retry after a Retry-After that named a later instant
// must not arrive before it (less the tolerance). The host only makes a
// retry later: an early retry was early (lo); one that arrived within the
// lateness p50 after the earliest instant allowed may have been early
// too (hi).
//
// Over gRPC it also counts the retries after a pushback that said not to
// retry (negative or malformed, gRPC A6). A retry that arrived after that
// answer is a violation unless it was a hedge sent before the answer and
// made late by the host: so lo counts those that came later than the
// per-event lateness bound after it, hi all of them.
type retryAfterCheck struct {
	checkBase
	n counter
	// slack: how far past not_before − tolerance the retries it paced
	// arrived.
	slack *loghist.Hist
	// refused: the gaps from a "do not retry" pushback to the retry that
	// followed it (up to maxOvers; refusedMore past it, counted in hi)
	refused     []int64
	refusedMore int64
	refusedEx   []Example
	// refusals: the answers whose pushback said not to retry, each a
	// chance to retry that a client of A6 leaves
	refusals int64
}

// attempt counts the answers whose pushback said not to retry, which
// the client saw (not a fault, nor abandoned).
func (ch *retryAfterCheck) attempt(r *timeline.Attempt, _ ResponseClass, _ *keyState) {
	if refusedAnswer(r) {
		ch.refusals++
	}
}

func newRetryAfter(b checkBase) checker { return &retryAfterCheck{checkBase: b} }

// refusedAnswer reports whether the client saw an answer that said not to
// retry: a pushback that refuses, on an attempt without a fault (an
// abandoned one's answer never reached it).
func refusedAnswer(r *timeline.Attempt) bool {
	return r.Fault == "" && pushbackRefuses(r.Pushback)
}

// pushbackRefuses reports whether a grpc-retry-pushback-ms value says
// not to retry: gRPC A6 reads a negative or unparsable value so.
func pushbackRefuses(v string) bool {
	if v == "" {
		return false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	return err != nil || ms < 0
}

func (ch *retryAfterCheck) retry(f *retryFacts) {
	if f.p.refused && f.x.at > f.p.done {
		ch.refusedRetry(f)
		return
	}
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

func (ch *retryAfterCheck) refusedRetry(f *retryFacts) {
	p, x := f.p, f.x
	if len(ch.refused) >= maxOvers {
		ch.refusedMore++
		return
	}
	ch.refused = append(ch.refused, x.at-p.done)
	if len(ch.refusedEx) < ch.a.maxEx {
		ch.refusedEx = append(ch.refusedEx, f.example(fmt.Sprintf(
			"attempt %d arrived at %s, %s after attempt %d's answer said not to retry (its pushback)",
			x.n, fmtNS(x.at), fmtDur(x.at-p.done), p.n)))
	}
}

func (ch *retryAfterCheck) result() CheckResult {
	a, c := ch.a, &ch.n
	refused := int64(len(ch.refused)) + ch.refusedMore
	if c.judged == 0 && ch.refusals == 0 {
		if a.meta != nil && a.meta.Protocol == "grpc" {
			return skip("no retry followed a pushback or RetryInfo that named a later instant, nor did the server say not to retry")
		}
		return skip("no retry followed a Retry-After that named a later instant")
	}
	why := fmt.Sprintf("%d of %d retries after a usable Retry-After arrived more than %s before not_before%s",
		c.bad, c.judged, fmtDur(a.raTol), a.clockNote())
	if c.bad > 0 {
		why += fmt.Sprintf(" (worst: %s early)", fmtDur(c.worst))
	}
	// The retries after a refusal: sure past the host's per-event
	// lateness (a hedge it made late is not one), possible within it.
	var sure, maybe int64
	if ch.refusals > 0 {
		late := ch.act(Raises).delay
		for _, g := range ch.refused {
			if g > late {
				sure++
			}
		}
		maybe = refused - sure
		if c.judged == 0 {
			why = ""
		} else {
			why += "; "
		}
		why += fmt.Sprintf("%d retries came after the %d gRPC answers whose pushback said not to retry (negative or malformed grpc-retry-pushback-ms)", refused, ch.refusals)
		if maybe > 0 {
			why += fmt.Sprintf(", %d of them within the host's lateness p99 %s of that answer (a hedge sent before it, made late, is not a retry)", maybe, fmtDur(late))
		}
	}
	hidden := int64(0)
	if late := ch.act(Lowers).bulk; late > 0 && ch.slack != nil {
		hidden = int64(ch.slack.Below(late))
		if hidden > 0 {
			why += fmt.Sprintf("; %d more arrived within the host's lateness p50 %s of it", hidden, fmtDur(late))
		}
	}
	r := ch.decide(float64(c.bad+sure), float64(c.bad+hidden+sure+maybe), ch.cfg.def.Threshold.Num, c.judged+ch.refusals, why)
	r.Examples = slices.Concat(ch.refusedEx, c.ex)
	return r
}
