package analyzer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

// non-retryable: a response with a status of the set (400, 401, 403,
// 404, 422 by default) that was not a rate limit must not be retried.
// Rate limits with those statuses (a 403 with Retry-After) are not in the
// population: retrying them is correct.
type nonRetryCheck struct {
	checkBase
	set     [600]bool
	n       counter
	sent    int64 // responses of the set that were not rate limits
	limited int64 // rate limits among the responses of the set
}

func newNonRetry(b checkBase) checker {
	ch := &nonRetryCheck{checkBase: b}
	for _, s := range b.cfg.statuses("statuses") {
		ch.set[s] = true
	}
	return ch
}

func (ch *nonRetryCheck) attempt(r *timeline.Attempt, class ResponseClass, _ *keyState) {
	if r.Fault != "" || r.Status <= 0 || r.Status >= len(ch.set) || !ch.set[r.Status] {
		return
	}
	if class == ResponseRateLimit {
		ch.limited++
	} else {
		ch.sent++
	}
}

func (ch *nonRetryCheck) retry(f *retryFacts) {
	p := f.p
	// A rate limit is never non-retryable, whatever its status.
	if p.class == ResponseRateLimit || p.status <= 0 || int(p.status) >= len(ch.set) || !ch.set[p.status] {
		return
	}
	if ch.hit(&ch.n) {
		ch.n.ex = append(ch.n.ex, f.example(fmt.Sprintf("retried after a %d: attempt %d at %s, %s after the response", p.status, f.x.n, fmtNS(f.x.at), fmtDur(f.gap))))
	}
}

func (ch *nonRetryCheck) result() CheckResult {
	if ch.sent == 0 {
		why := fmt.Sprintf("the server sent no %s", ch.list())
		if ch.limited > 0 {
			why += fmt.Sprintf(" other than %d rate limits (retrying a rate limit is correct)", ch.limited)
		}
		return skip(why)
	}
	why := fmt.Sprintf("retries after %d responses %s", ch.sent, ch.list())
	if ch.limited > 0 {
		why += fmt.Sprintf("; %d rate limits with those statuses were not judged (retrying a rate limit is correct)", ch.limited)
	}
	r := verdict(ch.cfg, float64(ch.n.bad), ch.cfg.def.Threshold.Num, ch.sent, why)
	r.Examples = ch.n.ex
	return r
}

func (ch *nonRetryCheck) list() string {
	var s []string
	for st, on := range ch.set {
		if on {
			s = append(s, strconv.Itoa(st))
		}
	}
	return strings.Join(s, ", ")
}
