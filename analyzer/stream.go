package analyzer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// waveGroups is how many retry numbers the waves statistic keeps apart; later
// retries share the last group.
const waveGroups = 16

// closeGrace is how long (stream time) the state of a logical request
// outlives its outcome, for attempt records written just after it.
const closeGrace = int64(500 * time.Millisecond)

// attemptLite is what a check needs of an attempt to judge the next one.
type attemptLite struct {
	n        int32
	status   int32
	class    ResponseClass // ClassifyResponse of the record
	fault    bool
	upFailed bool // the stub's upstream gave no response (timeline.UpstreamFailed)
	hasNB    bool
	prevDone bool // paired with its predecessor (or the first attempt)
	at, done int64
	nb       int64
}

// closing is a logical request whose outcome arrived at `at`.
type closing struct {
	st  *keyState
	key string
	at  int64
}

// keyState is one open logical request: the attempts not yet paired with
// both neighbours, sorted by number (one entry when records come in order).
type keyState struct {
	key    string // the map's key
	client string
	att    []attemptLite
	buf    [2]attemptLite // att's storage while it is short
	base   int            // attempts before the current logical request (a reused key)
	last   int64          // stream time of the last news
	closed int64          // stream time of the outcome + 1; 0 while open
}

// welford accumulates a mean and variance in one pass.
type welford struct {
	n    int64
	mean float64
	m2   float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

// Add feeds one record to the analyzer. A meta record after the first is
// ignored; records of unknown types are ignored.
func (a *Analyzer) Add(rec *timeline.Record) {
	switch rec.Type {
	case timeline.TypeAttempt:
		a.addAttempt(&rec.Attempt)
	case timeline.TypeOutcome:
		a.addOutcome(&rec.Outcome)
	case timeline.TypeEnd:
		if rec.End != nil {
			a.addEnd(rec.End)
		}
		return
	default:
		return
	}
	// Drop the requests whose outcome is older than the grace period.
	for a.qHead < len(a.closing) && a.now-a.closing[a.qHead].at > a.grace {
		c := a.closing[a.qHead]
		a.closing[a.qHead] = closing{}
		a.qHead++
		if c.st.key == c.key && c.st.closed == c.at+1 {
			a.drop(c.st)
		}
	}
	if a.qHead > 1024 && a.qHead > len(a.closing)/2 {
		n := copy(a.closing, a.closing[a.qHead:])
		clear(a.closing[n:])
		a.closing, a.qHead = a.closing[:n], 0
	}
	// Now and then, drop the idle ones (no outcome: serve recordings).
	a.sinceSweep++
	if a.sinceSweep >= 4096 && a.sinceSweep >= len(a.keys) && a.now-a.lastSweep >= max(a.idle/4, int64(time.Second)) {
		a.sweep(false)
	}
}

func (a *Analyzer) addAttempt(r *timeline.Attempt) {
	if !a.seen {
		a.seen, a.first = true, r.At
	}
	if r.At > a.now {
		a.now = r.At
	}
	if r.At < a.first {
		a.first = r.At
	}
	a.fig.Attempts++
	if r.Attempt == 1 {
		a.fig.Requests++
	} else {
		a.fig.Retries++
	}
	class := ClassifyResponse(r)
	if r.Fault != "" {
		a.faults[r.Fault]++
	} else if r.Status > 0 && r.Status < len(a.statuses) {
		a.statuses[r.Status]++
		if a.nonRetry[r.Status] {
			if class == ResponseRateLimit {
				a.nonrLimited++
			} else {
				a.nonrSent++
			}
		}
	}

	if a.pacingOn {
		a.pacingAttempt(r, class)
	}
	if a.load != nil {
		a.load.add(r)
	}

	// Pairwise checks.
	x := attemptLite{
		n: int32(r.Attempt), status: int32(r.Status), class: class, fault: r.Fault != "",
		upFailed: r.Upstream == timeline.UpstreamFailed,
		hasNB:    r.HasNotBefore, at: r.At, done: r.Done, nb: r.NotBefore,
	}
	if x.upFailed {
		a.fidelityUpstream(r)
	}
	if x.fault {
		// The client never saw a status (a reset, or a response it left
		// before: abandoned records the status it would have had).
		x.status = 0
	}
	st := a.keys[r.Key]
	if st == nil {
		if n := len(a.free); n > 0 {
			st = a.free[n-1]
			a.free = a.free[:n-1]
		} else {
			st = new(keyState)
			st.att = st.buf[:0]
		}
		st.key, st.client = strings.Clone(r.Key), strings.Clone(r.Client)
		a.keys[st.key] = st
	}
	st.last = a.now
	a.insert(st, r.Key, x)

	// Attempts of this logical request: a key reused after a success (a
	// client outside the harness requesting the same URL again) starts over.
	n := r.Attempt - st.base
	if n > a.maxAtt {
		a.maxAtt = n
	}
	if n > 1 && (r.Method == "POST" || r.Method == "PATCH") {
		a.idem.judged++
		if !r.Idempotent {
			if a.idem.hit(a.maxEx) {
				a.idem.ex = append(a.idem.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: r.Attempt, At: r.At,
					Detail: fmt.Sprintf("%s %s retried (attempt %d at %s) without an Idempotency-Key", r.Method, r.Path, r.Attempt, fmtNS(r.At))})
			}
		}
	}
	if a.attCap > 0 && n == a.attCap+1 {
		if a.att.hit(a.maxEx) {
			a.att.ex = append(a.att.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: n, At: r.At,
				Detail: fmt.Sprintf("attempt %d arrived at %s; at most %d allowed", n, fmtNS(r.At), a.attCap)})
		}
	}
}

// insert places x among the key's unpaired attempts, pairs it with any
// neighbour present, and drops the attempts paired on both sides.
func (a *Analyzer) insert(st *keyState, key string, x attemptLite) {
	att := st.att
	// The common cases: a first attempt, or the successor of the only one.
	switch {
	case len(att) == 0:
		x.prevDone = x.n == 1
		st.att = append(att, x)
		return
	case len(att) == 1 && att[0].n+1 == x.n:
		a.pair(st, key, &att[0], &x)
		x.prevDone = true
		att[0] = x
		return
	}
	i := len(att)
	for i > 0 && att[i-1].n > x.n {
		i--
	}
	if i > 0 && att[i-1].n == x.n {
		return // a duplicate record
	}
	x.prevDone = x.n == 1
	att = append(att, attemptLite{})
	copy(att[i+1:], att[i:])
	att[i] = x
	if i > 0 && att[i-1].n == x.n-1 {
		a.pair(st, key, &att[i-1], &att[i])
		att[i].prevDone = true
	}
	if i+1 < len(att) && att[i+1].n == x.n+1 {
		a.pair(st, key, &att[i], &att[i+1])
		att[i+1].prevDone = true
	}
	// Drop every attempt but the last whose both sides are paired.
	j := 0
	for k := range att {
		if k < len(att)-1 && att[k].prevDone && att[k+1].n == att[k].n+1 {
			continue
		}
		att[j] = att[k]
		j++
	}
	att = att[:j]
	if len(att) > 8 { // hopelessly out of order: give up on the oldest
		if !att[0].prevDone {
			a.unpaired++
		}
		att = append(att[:0], att[1:]...)
	}
	st.att = att
}

// pair judges retry x against the attempt p before it.
func (a *Analyzer) pair(st *keyState, key string, p, x *attemptLite) {
	if p.status >= 200 && p.status < 400 && a.reuseKeys {
		// A later logical request reusing the key, not a retry: only in
		// serve recordings, whose clients may request one URL again. In a
		// fleet run every logical request has its own key, so an attempt
		// after a success is a retry the client should not have made.
		st.base = int(x.n) - 1
		a.fig.Requests++
		a.fig.Retries--
		return
	}
	if p.upFailed {
		// The stub's upstream failed, not an injected fault: how the client
		// answered that 502 is not judged (the run is INCONCLUSIVE).
		a.fid.upRetries++
		return
	}
	k := max(int(x.n)-1-st.base, 1) // x is the k-th retry (≥ 1 even when records disagree)
	gap := x.at - p.done
	ex := func(detail string) Example {
		return Example{Client: st.client, Key: strings.Clone(key), Attempt: int(x.n), At: x.at, Prev: p.done, Detail: detail}
	}

	// A Retry-After paces the retry only when it names a later instant; one
	// that allows an immediate retry (a past date, "0") paces nothing.
	paced := p.hasNB && p.nb > p.done
	early := paced && p.nb-x.at > a.raTol
	if paced {
		a.ra.judged++
		if early {
			e := p.nb - x.at
			if e > a.ra.worst {
				a.ra.worst = e
			}
			if a.ra.hit(a.maxEx) {
				a.ra.ex = append(a.ra.ex, ex(fmt.Sprintf("attempt %d arrived at %s, %s before not_before %s (the previous response at %s)",
					x.n, fmtNS(x.at), fmtDur(e), fmtNS(p.nb), fmtNS(p.done))))
			}
		}
	}
	// A rate limit is never non-retryable, whatever its status.
	if p.class != ResponseRateLimit && p.status > 0 && int(p.status) < len(a.nonRetry) && a.nonRetry[p.status] {
		if a.nonr.hit(a.maxEx) {
			a.nonr.ex = append(a.nonr.ex, ex(fmt.Sprintf("retried after a %d: attempt %d at %s, %s after the response", p.status, x.n, fmtNS(x.at), fmtDur(gap))))
		}
	}

	// The retry's own wait starts at the response, or at the instant a
	// Retry-After that paced it allowed when it honoured it.
	honoured := paced && !early
	base := p.done
	if honoured {
		base = min(p.nb, x.at)
	}
	a.waveRetry(st, key, k, p, x, base, honoured)

	unadvised := !paced
	if unadvised && p.class.Retryable() {
		a.inst.judged++
		a.instEx += a.instantProb(k)
		if gap < a.instWindow {
			if a.inst.hit(a.maxEx) {
				what := strconv.Itoa(int(p.status))
				if p.class == ResponseRateLimit && p.status != 429 {
					what += " rate limit"
				}
				a.inst.ex = append(a.inst.ex, ex(fmt.Sprintf("retry %d came %s after a %s without a usable Retry-After", k, fmtDur(gap), what)))
			}
		}
	}
	bounded := unadvised && a.jbJudges()
	var b int64
	beyond := false
	if bounded {
		a.jb.judged++
		b = a.bound(k)
		if over := gap - b; over > a.jbTol {
			beyond = true
			if over > a.jb.worst {
				a.jb.worst = over
			}
			if a.jb.hit(a.maxEx) {
				a.jb.ex = append(a.jb.ex, ex(fmt.Sprintf("retry %d waited %s; the stated policy allows at most %s", k, fmtDur(gap), fmtDur(b))))
			}
		}
	}
	if a.onRetry != nil {
		r := Retry{Client: st.client, Key: st.key, Attempt: int(x.n), Number: k, Status: int(p.status), Class: p.class, Prev: p.done, At: x.at,
			Paced: paced, Early: early, Own: x.at - base, Bounded: bounded, Bound: b, Beyond: beyond}
		if paced {
			r.NotBefore = p.nb
		}
		a.onRetry(r)
	}
}

// bound is the longest delay the stated policy allows before retry k (1-based):
// min(cap, base·2^n) with n = k-1+first_exponent; the cap alone for
// decorrelated jitter.
func (a *Analyzer) bound(k int) int64 {
	p := a.policy
	if p.Jitter == "decorrelated" {
		return p.Cap
	}
	n := k - 1 + a.firstExp
	b := p.Base
	for i := 0; i < n && b < math.MaxInt64/2; i++ {
		b *= 2
	}
	if p.Cap > 0 && b > p.Cap {
		b = p.Cap
	}
	return b
}

// instantProb is the probability that the stated policy's delay before retry
// k is shorter than the instant window (0.5 without a policy: no opinion).
func (a *Analyzer) instantProb(k int) float64 {
	p := a.policy
	if p == nil || p.Base <= 0 {
		return 0
	}
	w := float64(a.instWindow)
	b := float64(a.bound(k))
	clamp := func(x float64) float64 { return min(1, max(0, x)) }
	switch p.Jitter {
	case "none", "":
		if b < w {
			return 1
		}
		return 0
	case "equal":
		return clamp((w - b/2) / (b / 2))
	case "decorrelated":
		base := float64(p.Base)
		return clamp((w - base) / (2 * base))
	default: // full and anything unknown: uniform on [0, b]
		if b <= 0 {
			return 1
		}
		return clamp(w / b)
	}
}

func (a *Analyzer) pacingAttempt(r *timeline.Attempt, class ResponseClass) {
	start := int64(0)
	if phases := a.meta.Phases; len(phases) > 0 {
		// The phase containing the arrival; records come nearly in time
		// order, so the last one found is tried first.
		i := a.lastPh
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
			a.lastPh = i
		}
		if !strings.HasPrefix(phases[i].Respond, "quota") {
			return
		}
		start = phases[i].Start
	}
	if r.At < start+a.warmup {
		return
	}
	a.pace.judged++
	if class != ResponseRateLimit {
		return
	}
	a.pace.bad++
	a.paceBy.add(r.Limit)
	if len(a.pace.ex) < a.maxEx {
		by := "no limit named"
		if r.Limit != "" {
			by = "rejected by limit " + r.Limit
		}
		a.pace.ex = append(a.pace.ex, Example{Client: strings.Clone(r.Client), Key: strings.Clone(r.Key), Attempt: r.Attempt, At: r.At,
			Detail: fmt.Sprintf("%d at %s (%s), in the steady state of a quota phase", r.Status, fmtNS(r.At), by)})
	}
}

// maxLimitNames bounds the limit names pacing counts apart; the rest share
// one count.
const maxLimitNames = 64

// limitCounts counts rate limits by the name of the limit that rejected
// ("" when none was named), for at most maxLimitNames names.
type limitCounts struct {
	n     map[string]int64
	other int64 // beyond maxLimitNames names
}

func (l *limitCounts) add(name string) {
	if n, ok := l.n[name]; ok {
		l.n[name] = n + 1
		return
	}
	if len(l.n) >= maxLimitNames {
		l.other++
		return
	}
	if l.n == nil {
		l.n = make(map[string]int64)
	}
	l.n[strings.Clone(name)] = 1
}

// String lists the counts, most first: "minute: 40, second: 3".
func (l *limitCounts) String() string {
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range l.n {
		kvs = append(kvs, kv{k, v})
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

func (a *Analyzer) addOutcome(o *timeline.Outcome) {
	a.fig.Outcomes++
	a.results[o.Result]++
	a.fidelityOutcome(o)
	// Did the client stop on a rate limit? Its last attempt says.
	limited := false
	if st := a.keys[o.Key]; st != nil && len(st.att) > 0 {
		last := &st.att[len(st.att)-1]
		limited = last.class == ResponseRateLimit && (o.Status == 0 || int(last.status) == o.Status)
	}
	a.giveUpOutcome(o, limited, a.overloaded(o))
	a.wv.addLateness(o.Start - o.Scheduled)
	if o.End > a.now {
		a.now = o.End
	}
	if st := a.keys[o.Key]; st != nil && o.Result != timeline.ResultHung && st.closed == 0 {
		st.closed = a.now + 1
		st.last = a.now
		a.closing = append(a.closing, closing{st: st, key: st.key, at: a.now})
	}
	switch o.Result {
	case timeline.ResultOK, timeline.ResultCanceled:
		return
	}
	a.bud.judged++
	ex := func(detail string) Example {
		return Example{Client: strings.Clone(o.Client), Key: strings.Clone(o.Key), Attempt: o.Attempts, At: o.End, Prev: o.Start, Detail: detail}
	}
	if o.Result == timeline.ResultHung {
		if a.bud.hit(a.maxEx) {
			a.bud.ex = append(a.bud.ex, ex(fmt.Sprintf("never returned: the watchdog fired after %s", fmtDur(o.End-o.Start))))
		}
		return
	}
	if a.budget > 0 {
		if over := o.End - o.Start - a.budget; over > a.budgetTol {
			if over > a.bud.worst {
				a.bud.worst = over
			}
			if a.bud.hit(a.maxEx) {
				a.bud.ex = append(a.bud.ex, ex(fmt.Sprintf("%s after %s (%d attempts); the budget is %s", o.Result, fmtDur(o.End-o.Start), o.Attempts, fmtDur(a.budget))))
			}
		}
	}
}

// sweep drops the state of closed or idle logical requests (all of it when
// final).
func (a *Analyzer) sweep(final bool) {
	a.sinceSweep = 0
	a.lastSweep = a.now
	for _, st := range a.keys {
		if final || (st.closed != 0 && a.now-st.closed > a.grace) || a.now-st.last > a.idle {
			a.drop(st)
		}
	}
}

// drop forgets a logical request, counting its unpaired retries.
func (a *Analyzer) drop(st *keyState) {
	for _, x := range st.att {
		if !x.prevDone {
			a.unpaired++
		}
	}
	delete(a.keys, st.key)
	st.att, st.key, st.client, st.closed, st.base = st.buf[:0], "", "", 0, 0
	if len(a.free) < 4096 {
		a.free = append(a.free, st)
	}
}

// OpenRequests is how many logical requests the analyzer holds state for.
func (a *Analyzer) OpenRequests() int { return len(a.keys) }

func fmtNS(ns int64) string { return fmtDur(ns) }

// fmtDur renders a duration compactly with millisecond precision above a
// second ("1.204s", "3ms", "250µs").
func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "-" + fmtDur(-ns)
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
	case d >= time.Millisecond:
		return strings.TrimSuffix(strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64), ".0") + "ms"
	default:
		return d.String()
	}
}
