package analyzer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

// pacing: a client expected to self-throttle (the scenario lists pacing)
// keeps its steady-state attempts in quota phases within the published
// limit. A paced client's requests bunched by the host's lateness draw
// rate limits from a bucket that cannot absorb the bunch: burst/rate is
// how much lateness the quota absorbs; past it, the host alone may have
// made every rejection (the range's low end is 0).
type pacingCheck struct {
	checkBase
	n      counter
	by     limitCounts // the offenders by the limit that rejected them
	warmup int64
	lastPh int // index of the phase of the last attempt
}

// newPacing builds pacing only for a client expected to self-throttle
// under a published quota; otherwise the check skips (pacingOff).
func newPacing(b checkBase) checker {
	if !b.a.pacingOn {
		return pacingOff{b}
	}
	return &pacingCheck{checkBase: b, warmup: secNS(b.cfg.num("warmup"))}
}

// pacingOff is pacing when it is not expected.
type pacingOff struct{ checkBase }

func (ch pacingOff) result() CheckResult {
	if ch.a.meta == nil || ch.a.meta.Quota == nil {
		return skip("no published quota")
	}
	return skip("self-throttling not expected: list pacing in expect.checks or pass --check pacing")
}

func (ch *pacingCheck) result() CheckResult {
	a := ch.a
	if ch.n.judged == 0 {
		return skip(fmt.Sprintf("no steady-state attempt in a quota phase (the first %s of each is warm-up)", fmtDur(ch.warmup)))
	}
	why := fmt.Sprintf("%d of %d steady-state attempts in quota phases were rate-limited", ch.n.bad, ch.n.judged)
	if ch.n.bad > 0 {
		why += " (" + ch.by.String() + ")"
	}
	why += fmt.Sprintf("; the first %s of each phase is warm-up; the most restrictive published limit is %s", fmtDur(ch.warmup), QuotaText(a.meta.Quota))
	fig := pct(ch.n.bad, ch.n.judged)
	lo := fig
	q := a.meta.Quota
	absorbs := int64(float64(max(q.Burst, 1)) / q.Rate * 1e9)
	if late := ch.act(Raises).delay; q.Rate > 0 && late > absorbs {
		why += fmt.Sprintf("; the host's lateness p99 %s exceeds what the quota's burst absorbs (%d at %.4g/s: %s)", fmtDur(late), max(q.Burst, 1), q.Rate, fmtDur(absorbs))
		lo = 0
	}
	r := ch.decide(lo, fig, ch.cfg.def.Threshold.Num, ch.n.judged, why)
	r.Examples = ch.n.ex
	return r
}

func (ch *pacingCheck) attempt(r *timeline.Attempt, class ResponseClass, _ *keyState) {
	// The quota backend failed: the request was not metered (open) or
	// was refused by the stub itself (closed); neither is pacing's.
	if r.Backend != "" {
		return
	}
	a := ch.a
	start := int64(0)
	if phases := a.meta.Phases; len(phases) > 0 {
		// The phase containing the arrival; records come nearly in time
		// order, so the last one found is tried first.
		i := ch.lastPh
		if i >= len(phases) || r.At < phases[i].Start || (phases[i].End != 0 && r.At >= phases[i].End) {
			i = -1
			for j, ph := range phases {
				if r.At >= ph.Start && (ph.End == 0 || r.At < ph.End) {
					i = j
					break
				}
			}
			if i < 0 {
				return
			}
			ch.lastPh = i
		}
		if !strings.HasPrefix(phases[i].Respond, "quota") {
			return
		}
		start = phases[i].Start
	}
	if r.At < start+ch.warmup {
		return
	}
	ch.n.judged++
	if class != ResponseRateLimit {
		return
	}
	ch.n.bad++
	ch.by.add(r.Limit)
	if len(ch.n.ex) < a.maxEx {
		by := "no limit named"
		if r.Limit != "" {
			by = "rejected by limit " + r.Limit
		}
		ch.n.ex = append(ch.n.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: r.Attempt, At: r.At,
			Detail: fmt.Sprintf("%d at %s (%s), in the steady state of a quota phase", r.Status, fmtNS(r.At), by)})
	}
}

// maxLimitNames bounds the limit names pacing counts apart; the rest share
// one count.
const maxLimitNames = 64

// limitCounts counts rate limits by the name of the limit that rejected
// ("" when none was named), for at most maxLimitNames names.
type limitCounts struct {
	n     map[string]*int64 // by pointer: an assignment would store the record's key
	other int64             // beyond maxLimitNames names
}

func (l *limitCounts) add(name string) {
	if n, ok := l.n[name]; ok {
		*n++
		return
	}
	if len(l.n) >= maxLimitNames {
		l.other++
		return
	}
	if l.n == nil {
		l.n = make(map[string]*int64)
	}
	one := int64(1)
	l.n[strings.Clone(name)] = &one
}

// String lists the counts, most first: "minute: 40, second: 3".
func (l *limitCounts) String() string {
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range l.n {
		kvs = append(kvs, kv{k, *v})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].v != kvs[j].v {
			return kvs[i].v > kvs[j].v
		}
		return kvs[i].k < kvs[j].k
	})
	var parts []string
	for _, x := range kvs {
		name := x.k
		if name == "" {
			name = "no limit named"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, x.v))
	}
	if l.other > 0 {
		parts = append(parts, fmt.Sprintf("other limits: %d", l.other))
	}
	return strings.Join(parts, ", ")
}
