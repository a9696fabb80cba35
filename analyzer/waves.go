package analyzer

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// The waves statistic. Retries are grouped into cohorts: the k-th retry of
// a logical request (k = 1..15, 16+), separately for retries that waited
// for a Retry-After (their own wait is the time beyond not_before). Each
// cohort keeps a running mean and variance of its own waits, a bounded
// uniform sample (reservoir) of (trigger, base, arrival), and how many
// distinct clients it saw (up to the minimum). At Result the cohort gets
// three readings, each scaled so that full jitter reads 1 and uniform
// jitter of ±p around a delay reads 1/p:
//
//   - arrivals: how much more often two retries of the cohort arrive within
//     a resolution r = mean/50 of each other than they would if each had
//     drawn its wait uniformly on [0, 2·mean] from its base (the response
//     that triggered it, or not_before): the null keeps the real trigger
//     times, so a burst start is explained;
//   - shape: the same on the waits alone (the waves the cohort forms when
//     its triggers come together, as an outage makes them);
//   - spread: full jitter's coefficient of variation over the cohort's.
//
// The figure is the worst reading of the worst cohort. Under the host's
// noise (schema row) each reading is a range: batches stamped at one
// instant make close pairs the clients did not (lo takes them out), and
// lateness smears pairs apart and adds spread (hi reads the pairs within
// the resolution plus the lateness p99, the spread without the
// lateness's variance).

// waveRetry feeds retry x (the k-th) of the attempt p before it to its
// cohort. Retries that honoured a Retry-After that paced them (afterNB) are
// judged on their wait beyond it, from base; retries that came earlier than
// not_before (retry-after's business) and retries without one on their gap
// (base is the previous response).
func (a *Analyzer) waveRetry(st *keyState, key string, k int, p, x *attemptLite, base int64, afterNB bool) {
	own := x.at - base
	g := min(k, waveGroups) - 1
	if afterNB {
		g += waveGroups
	}
	s := &a.wv
	c := &s.cohorts[g]
	c.w.add(float64(own) / 1e9)
	if len(c.clients) < s.minClients && !slices.Contains(c.clients, st.client) {
		c.clients = append(c.clients, st.client)
	}
	c.seen++
	rec := waveSampleRec{trigger: p.done, base: base, arrival: x.at, meant: x.claim, faultBase: p.fault}
	if x.claim >= 0 {
		rec.meant = p.done + x.claim
	}
	switch {
	case len(c.sample) < waveSample:
		c.sample = append(c.sample, rec)
		if len(c.sample) == waveSample {
			c.lw = math.Exp(math.Log(s.uniform()) / waveSample)
			c.next = c.seen + s.skipLen(c.lw)
		}
	case c.seen == c.next:
		j, _ := bits.Mul64(s.next(), waveSample)
		c.sample[j] = rec
		c.lw *= math.Exp(math.Log(s.uniform()) / waveSample)
		c.next += s.skipLen(c.lw)
	}
	if len(c.ex) < 3 {
		c.ex = append(c.ex, Example{Client: st.client, Key: strings.Clone(key), Attempt: int(x.n), At: x.at, Prev: p.done,
			Detail: fmt.Sprintf("retry %d waited %s", k, fmtDur(own))})
	}
}

// judgeCohorts computes the readings of every cohort big enough to judge,
// each with its range under the host's noise, and how many retries were
// server- and client-paced (Figures).
func (a *Analyzer) judgeCohorts() *wavesJudgement {
	s := &a.wv
	j := &wavesJudgement{}
	m := a.noise()
	row := a.cfgOf(CheckWaves).def.Noise
	loAct := m.act(row, Raises)
	for g := range s.cohorts {
		c := &s.cohorts[g]
		if c.w.n == 0 {
			continue
		}
		paced := g >= waveGroups && a.pacedByServer(&c.w, m.p90)
		if c.w.n < a.waveMin || len(c.clients) < s.minClients {
			j.small += c.w.n
			if paced {
				j.serverPaced += c.w.n
			} else {
				j.clientPaced += c.w.n
			}
			continue
		}
		r := cohortReading{g: g, n: c.w.n, mean: c.w.mean, arrivals: 1, shape: 1, spread: 1, lo: 1, hi: 1}
		floor := a.instWindow
		if g >= waveGroups {
			floor = a.waveSlack
		}
		a.readCohort(&r, c, floor, m, loAct.batch)
		if paced {
			r.serverSync = true
			r.syncRatio = syncReading(c.sample, a.waveWindow)
			j.serverPaced += r.n
		} else {
			j.clientPaced += r.n
		}
		j.cohorts = append(j.cohorts, r)
	}
	return j
}

// pacedByServer tells whether the retries of a cohort that honoured a
// Retry-After came as it said, adding no spread of their own: the
// standard deviation of their waits beyond the allowed instant is no more
// than that of a uniform draw over the slack and twice the host's
// lateness p90 (late, ns: the spread the host adds), or so small relative
// to their mean that the spread reading exceeds the threshold (a constant
// added to Retry-After, whatever the constant).
func (a *Analyzer) pacedByServer(w *welford, late int64) bool {
	sd := math.Sqrt(max(w.m2/float64(w.n), 0))
	slack := float64(a.waveSlack+2*late) / 1e9
	if sd <= slack/math.Sqrt(12) {
		return true
	}
	return w.mean > 0 && fullJitterCV/(sd/w.mean) > a.waveThreshold()
}

// waveThreshold is the waves check's threshold in force.
func (a *Analyzer) waveThreshold() float64 {
	return a.threshold(a.cfgOf(CheckWaves))
}

// judgeWaves is the waves check: the worst reading of the worst cohort,
// a range under the host's noise (the worst cohort's low end, the worst
// high end).
func (a *Analyzer) judgeWaves(c *checkCfg, j *wavesJudgement) CheckResult {
	var judged []cohortReading
	var n int64
	for _, r := range j.cohorts {
		if !r.serverSync {
			judged = append(judged, r)
			n += r.n
		}
	}
	if len(judged) == 0 {
		why := fmt.Sprintf("no client-paced cohort (retry number, before or beyond Retry-After) with %d retries from %d clients", a.waveMin, a.wv.minClients)
		if j.small > 0 {
			why += fmt.Sprintf("; %d retries in smaller cohorts", j.small)
		}
		if j.serverPaced > 0 {
			why += fmt.Sprintf("; %d retries paced by Retry-After", j.serverPaced)
		}
		return skip(why)
	}
	thr := a.threshold(c)
	lo, hi := 0.0, 0.0
	worst := 0
	for i := range judged {
		lo, hi = max(lo, judged[i].lo), max(hi, judged[i].hi)
		// The cohort named: the one that decides (its low end past the
		// threshold), else the one with the highest high end.
		w := &judged[worst]
		if judged[i].lo > thr && judged[i].lo > w.lo || w.lo <= thr && judged[i].hi > w.hi {
			worst = i
		}
	}
	w := judged[worst]
	reading := "spread"
	switch {
	case w.immediate:
		reading = "none (mean own wait within the floor: the retries arrive with their triggers)"
	case w.worst() == w.arrivals:
		reading = "arrivals"
	case w.worst() == w.shape:
		reading = "shape"
	}
	reason := fmt.Sprintf("worst cohort %s: %d retries, mean own wait %s, readings arrivals %.2f, shape %.2f, spread %.2f (worst: %s; %d cohorts over %d retries)",
		w.name(), w.n, fmtDur(int64(w.mean*1e9)), w.arrivals, w.shape, w.spread, reading, len(judged), n)
	if w.claimed {
		reason += "; read on the clients' wait claims, each consistent with its arrival"
	}
	if j.serverPaced > 0 {
		reason += fmt.Sprintf("; %d server-paced retries excluded", j.serverPaced)
	}
	r := a.decide(c, lo, hi, c.def.Threshold.Num, n, reason)
	if r.Status == StatusFail {
		slices.SortStableFunc(judged, func(x, y cohortReading) int {
			switch {
			case x.lo > y.lo:
				return -1
			case x.lo < y.lo:
				return 1
			}
			return 0
		})
		for _, g := range judged[:min(len(judged), a.maxEx)] {
			if g.lo <= r.Threshold {
				break
			}
			ex := Example{Detail: fmt.Sprintf("%s: %d retries, mean own wait %s, arrivals %.2f, shape %.2f, spread %.2f", g.name(), g.n, fmtDur(int64(g.mean*1e9)), g.arrivals, g.shape, g.spread)}
			if e := a.wv.cohorts[g.g].ex; len(e) > 0 {
				ex.Client, ex.Key, ex.Attempt, ex.At, ex.Prev = e[0].Client, e[0].Key, e[0].Attempt, e[0].At, e[0].Prev
			}
			r.Examples = append(r.Examples, ex)
		}
	}
	return r
}

// serverSyncWarning is the server-induced-synchronization warning, or nil.
func (a *Analyzer) serverSyncWarning(j *wavesJudgement) *Warning {
	var best *cohortReading
	var n int64
	for i := range j.cohorts {
		r := &j.cohorts[i]
		if !r.serverSync {
			continue
		}
		n += r.n
		if best == nil || r.syncRatio > best.syncRatio {
			best = r
		}
	}
	if best == nil || best.syncRatio < waveSyncRatio {
		return nil
	}
	return &Warning{
		ID: WarnServerSync,
		Message: fmt.Sprintf("server-induced synchronization: %d retries waited as Retry-After said, adding no spread of their own (%s: mean %s beyond the allowed instant); their arrivals are %.2f× as concentrated as the responses that triggered them (pairs within %s)",
			n, best.name(), fmtDur(int64(best.mean*1e9)), best.syncRatio, fmtDur(a.waveWindow)),
		Remedy: "spread Retry-After on the server (retry_after.spread), or add jitter on top of Retry-After in the client",
	}
}

// wavesCheck judges the retry cohorts the Analyzer keeps (they are
// shared: the capacity checks read their spread) once Result has read
// them (Analyzer.wvJ).
type wavesCheck struct{ checkBase }

func newWaves(b checkBase) checker { return wavesCheck{b} }

func (ch wavesCheck) result() CheckResult { return ch.a.judgeWaves(ch.cfg, ch.a.wvJ) }
