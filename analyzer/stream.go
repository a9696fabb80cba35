package analyzer

import (
	"fmt"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Add feeds one record to the analyzer. A meta record after the first is
// ignored; records of unknown types are ignored. Add keeps nothing of rec
// past the call, not even its strings (it clones what it keeps): the
// caller may reuse their memory (Analyze does).
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
	if a.sinceSweep >= 4096 && a.sinceSweep >= a.keys.len() && a.now-a.lastSweep >= max(a.idle/4, int64(time.Second)) {
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
	beFailed := r.Backend == timeline.BackendClosed
	if beFailed {
		a.fidelityBackend(r)
	} else if r.Upstream != timeline.UpstreamFailed && (r.Fault != "" || r.Status >= 400) {
		a.exercised++
	}
	if r.Fault != "" {
		a.faults[a.own(r.Fault)]++
	} else if r.Status > 0 && r.Status < len(a.statuses) {
		a.statuses[r.Status]++
	}
	if a.load != nil {
		a.load.add(r)
	}

	// Pairwise checks.
	x := attemptLite{
		n: int32(r.Attempt), status: int32(r.Status), class: class, fault: r.Fault != "",
		upFailed: r.Upstream == timeline.UpstreamFailed, beFailed: beFailed,
		hasNB: r.HasNotBefore, at: r.At, done: r.Done, nb: r.NotBefore,
		refused: refusedAnswer(r), claim: claimOf(r.WaitClaim),
	}
	if x.upFailed {
		a.fidelityUpstream(r)
	}
	if x.fault {
		// The client never saw a status (a reset, or a response it left
		// before: abandoned records the status it would have had).
		x.status = 0
	}
	abandoned := r.Fault == timeline.FaultAbandoned
	if !abandoned && r.Fault == "" && a.attemptTimeout > 0 && r.Done > r.At+a.attemptTimeout {
		// Answered after the client's attempt timeout (given to every
		// subject): a stub behind on its work did not see the client
		// leave, but the client had left. To the client it was an
		// abandoned attempt.
		late := *r
		late.Fault = timeline.FaultAbandoned
		x.class, x.fault, x.status, abandoned = ClassifyResponse(&late), true, 0, true
	}
	if abandoned {
		// Nor the Retry-After of a response it left before, and it failed
		// when its attempt timeout fired, not when the stub wrote (a
		// stub with finite capacity serves queued work long after): a
		// retry's wait starts there.
		x.hasNB = false
		if a.attemptTimeout > 0 {
			x.done = min(x.done, x.at+a.attemptTimeout)
		}
	}
	h := a.keys.hash(r.Key)
	st := a.keys.get(r.Key, h)
	if st == nil {
		st = a.newKey(r.Key, r.Client, h)
	}
	st.last = a.now
	a.insert(st, r.Key, x)

	// Attempts of this logical request: a key reused after a success (a
	// client outside the harness requesting the same URL again) starts over.
	n := r.Attempt - st.base
	if int32(n) > st.count {
		st.count = int32(n)
	}
	if n == 1 && st.firstAt == 0 {
		st.firstAt = r.At + 1
	}
	if r.Status >= 200 && r.Status < 300 && r.Fault == "" {
		st.got2x = true
	}
	if a.attCap > 0 && n == a.attCap+1 {
		st.capAt = r.At
	}
	// The key of the earliest attempt seen ("" when it carried none;
	// a legacy record that says only that one was present is not kept).
	if (st.idemN == 0 || int32(r.Attempt) < st.idemN) && (r.IdemKey != "" || !r.Idempotent) {
		st.idem, st.idemN = strings.Clone(r.IdemKey), int32(r.Attempt)
	}
	for _, h := range a.attemptHooks {
		h.attempt(r, class, st)
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
	if p.beFailed {
		// The stub's own quota backend failed: its 503 is the test
		// environment's, and how the client answered it is not judged.
		a.fid.beRetries++
		return
	}
	k := max(int(x.n)-1-st.base, 1) // x is the k-th retry (≥ 1 even when records disagree)
	// A Retry-After paces the retry only when it names a later instant; one
	// that allows an immediate retry (a past date, "0") paces nothing.
	// One value, reused: passed through an interface, a fresh one would
	// be allocated per retry.
	f := &a.facts
	*f = retryFacts{st: st, key: key, p: *p, x: *x, k: k, gap: x.at - p.done, base: p.done}
	f.paced = p.hasNB && p.nb > p.done
	f.early = f.paced && p.nb-x.at > a.raTol
	// The retry's own wait starts at the response, or at the instant a
	// Retry-After that paced it allowed when it honoured it.
	honoured := f.paced && !f.early
	if honoured {
		f.base = min(p.nb, x.at)
	}
	if !f.paced && a.jbJudges() {
		f.bounded, f.bound = true, a.policyBound(k)
		f.beyond = f.gap-f.bound > a.jbTol
	}
	a.waveRetry(st, key, k, p, x, f.base, honoured)
	for _, h := range a.retryHooks {
		h.retry(f)
	}
	if a.onRetry != nil {
		r := Retry{Client: st.client, Key: st.key, Attempt: int(x.n), Number: k, Status: int(p.status), Class: p.class, Prev: p.done, At: x.at,
			Paced: f.paced, Early: f.early, Own: x.at - f.base, Bounded: f.bounded, Bound: f.bound, Beyond: f.beyond}
		if f.paced {
			r.NotBefore = p.nb
		}
		a.onRetry(r)
	}
}

func (a *Analyzer) addOutcome(o *timeline.Outcome) {
	a.fig.Outcomes++
	result := ownResult(o.Result, a)
	a.results[result]++
	a.fidelityOutcome(o)
	h := a.keys.hash(o.Key)
	st := a.keys.get(o.Key, h)
	if st == nil && a.crossCheck() {
		// No attempt recorded (yet): the outcome's claim waits, through
		// the grace, for the stub's records of its key.
		st = a.newKey(o.Key, o.Client, h)
	}
	judged := a.judgedOutcome(o)
	// Did the client stop on a rate limit? Its last attempt says.
	var f outcomeFacts
	if st != nil {
		if len(st.att) > 0 {
			last := &st.att[len(st.att)-1]
			f.limited = last.class == ResponseRateLimit && (o.Status == 0 || int(last.status) == o.Status)
		}
		f.seen = int(st.count)
		st.outcome, st.excluded = true, !judged
		st.reportedOK = o.Result == timeline.ResultOK
		st.outStart, st.outEnd = o.Start, o.End
		if judged && st.firstAt > 0 {
			a.firstLate = max(a.firstLate, st.firstAt-1-o.Scheduled)
		}
	}
	if judged {
		for _, h := range a.outcomeHooks {
			h.outcome(o, f)
		}
	}
	if o.End > a.now {
		a.now = o.End
	}
	if st != nil && o.Result != timeline.ResultHung && st.closed == 0 {
		st.closed = a.now + 1
		st.last = a.now
		a.closing = append(a.closing, closing{st: st, key: st.key, at: a.now})
	}
}

// own returns the analyzer's copy of s, made once per distinct value. A
// record's strings may point into memory the decoder reuses once Add
// returns (Analyze borrows them), and assigning to a map entry stores the
// key given: a map the analyzer keeps is indexed by owned strings only.
func (a *Analyzer) own(s string) string {
	if c, ok := a.names[s]; ok {
		return c
	}
	if a.names == nil {
		a.names = make(map[string]string)
	}
	c := strings.Clone(s)
	a.names[c] = c
	return c
}

// ownResult is an outcome's result as a string the record does not share
// (Analyzer.own): the constant when it is a known one.
func ownResult(r string, a *Analyzer) string {
	for _, k := range knownResults {
		if r == k {
			return k
		}
	}
	return a.own(r)
}

// knownResults are the outcome results a timeline is written with.
var knownResults = [...]string{timeline.ResultOK, timeline.ResultGaveUp, timeline.ResultBudget, timeline.ResultNonRetryable,
	timeline.ResultError, timeline.ResultHung, timeline.ResultCanceled}

// newKey makes the state of a logical request; h is its key's hash.
func (a *Analyzer) newKey(key, client string, h uint64) *keyState {
	var st *keyState
	if n := len(a.free); n > 0 {
		st = a.free[n-1]
		a.free = a.free[:n-1]
	} else {
		st = new(keyState)
		st.att = st.buf[:0]
	}
	// One copy holds both strings.
	var b strings.Builder
	b.Grow(len(key) + len(client))
	b.WriteString(key)
	b.WriteString(client)
	both := b.String()
	st.key, st.client, st.hash = both[:len(key)], both[len(key):], h
	st.last = a.now
	a.keys.put(st)
	return st
}

// tally adds the closed request st to t.
func (a *Analyzer) tally(t *keyTally, st *keyState) {
	if st.excluded {
		t.exclAttempts += int64(st.count)
		if st.count > 0 {
			t.exclRequests++
		}
		return
	}
	if int(st.count) > t.maxAtt {
		t.maxAtt = int(st.count)
	}
	if st.capAt != 0 {
		t.attBad++
		t.attEx = keepEarliest(t.attEx, a.maxEx, Example{Client: st.client, Key: st.key, Attempt: a.attCap + 1, At: st.capAt},
			func() string {
				return fmt.Sprintf("attempt %d arrived at %s; at most %d allowed (%d attempts in all)", a.attCap+1, fmtNS(st.capAt), a.attCap, st.count)
			})
	}
	if st.outcome && st.reportedOK && !st.got2x && a.crossCheck() {
		t.lost++
		t.lostEx = keepEarliest(t.lostEx, a.maxEx, Example{Client: st.client, Key: st.key, Attempt: int(st.count), At: st.outEnd, Prev: st.outStart},
			func() string {
				if st.count == 0 {
					return "reported ok, the server recorded no attempt for it"
				}
				return fmt.Sprintf("reported ok, the server never answered 2xx (%s recorded)", attemptsText(int(st.count)))
			})
	}
}

// sweep drops the state of closed or idle logical requests (all of it when
// final).
func (a *Analyzer) sweep(final bool) {
	a.sinceSweep = 0
	a.lastSweep = a.now
	drop := a.swept[:0] // not while the table is read: a deletion moves entries
	for st := range a.keys.all() {
		if final || (st.closed != 0 && a.now-st.closed > a.grace) || a.now-st.last > a.idle {
			drop = append(drop, st)
		}
	}
	for _, st := range drop {
		a.drop(st)
	}
	clear(drop)
	a.swept = drop[:0]
}

// drop forgets a logical request, counting its unpaired retries.
func (a *Analyzer) drop(st *keyState) {
	for _, x := range st.att {
		if !x.prevDone {
			a.unpaired++
		}
	}
	a.tally(&a.done, st)
	a.keys.del(st)
	*st = keyState{att: st.buf[:0]}
	if len(a.free) < 4096 {
		a.free = append(a.free, st)
	}
}

// OpenRequests is how many logical requests the analyzer holds state for.
func (a *Analyzer) OpenRequests() int { return a.keys.len() }

// judgedOutcome is the one rule that decides which outcomes the checks
// of a client's logical requests (budget, give-up, attempts,
// amplification) see: not those the harness or the subject's plumbing
// failed, not those the run canceled, and not those that ended after the
// run's cap.
func (a *Analyzer) judgedOutcome(o *timeline.Outcome) bool {
	if o.Harness || o.Result == timeline.ResultCanceled {
		return false
	}
	if a.meta != nil && a.meta.Duration > 0 && o.End > a.meta.Duration {
		return false
	}
	return true
}

// fidelityBackend notes an attempt the stub answered itself because its
// quota backend failed.
func (a *Analyzer) fidelityBackend(r *timeline.Attempt) {
	a.fid.backend++
	if a.fid.backendEx == "" {
		a.fid.backendEx = fmt.Sprintf("%s %s attempt %d at %s", strings.Clone(r.Method), strings.Clone(r.Path), r.Attempt, fmtNS(r.At))
	}
}

// fidelityUpstream notes an attempt whose upstream gave no response.
func (a *Analyzer) fidelityUpstream(r *timeline.Attempt) {
	a.fid.upstream++
	if a.fid.upstreamEx == "" {
		a.fid.upstreamEx = fmt.Sprintf("%s %s attempt %d at %s", strings.Clone(r.Method), strings.Clone(r.Path), r.Attempt, fmtNS(r.At))
	}
}

func (a *Analyzer) addEnd(e *timeline.End) {
	c := *e
	c.Errors = append([]string(nil), e.Errors...)
	a.fid.end = &c
	if e.At > a.now {
		a.now = e.At
	}
}

// fidelityOutcome notes what one outcome says about the harness.
func (a *Analyzer) fidelityOutcome(o *timeline.Outcome) {
	if o.Harness {
		a.fid.harness++
		if a.fid.harnessEx == "" {
			a.fid.harnessEx = fmt.Sprintf("%s %s: %s", o.Client, o.Key, strings.Clone(o.Error))
		}
	}
	if o.Result != timeline.ResultCanceled || o.Start > 0 {
		a.fid.lateness.add(o.Start - o.Scheduled)
	}
}
