package analyzer

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
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
//   - spread: full jitter's coefficient of variation over the cohort's,
//     after subtracting the variance of the harness's start lateness
//     (scheduling noise of a loaded host is not jitter).
//
// The figure is the worst reading of the worst cohort.

const (
	// waveSample is the reservoir size of one cohort.
	waveSample = 2048
	// waveBins is the resolution of the pair readings: r = mean/waveBins, so
	// waits in lockstep read about waveBins on the shape.
	waveBins = 50
	// waveNoiseRatio: a cohort is judged under measured host noise only
	// when its mean own wait is at least this many times the noise's bulk
	// (p90): its pairs are read at a resolution no finer than that, so
	// lockstep arrivals, 90 % of them within it, still read about
	// waveNoiseRatio on the arrivals, at the default threshold.
	waveNoiseRatio = 10
	// waveBatchMin: from this many late arrivals stamped at once
	// (timeline.Noise.Batch), a FAIL of waves stands only if it also
	// fails at the noise's tail (see judgeWaves).
	waveBatchMin = 3
	// waveSyncRatio: server-synchronized retries raise the warning when
	// their arrivals are at least this concentrated relative to the
	// responses that triggered them.
	waveSyncRatio = 0.5
)

// waveSampleRec is one sampled retry of a cohort: the response that
// triggered it, the instant its own wait started from (the response, or
// the allowed instant of a Retry-After it honoured), and its arrival.
type waveSampleRec struct {
	trigger, base, arrival int64
}

func (r waveSampleRec) own() int64 { return r.arrival - r.base }

// waveCohort accumulates one cohort.
type waveCohort struct {
	w       welford // own waits, seconds
	seen    int64   // retries offered to the sample
	next    int64   // the seen count whose retry replaces a sampled one (Algorithm L)
	lw      float64 // Algorithm L's running weight
	sample  []waveSampleRec
	clients []string // distinct clients, up to the minimum asked
	ex      []Example
}

// wavesState is the analyzer's waves accumulation.
type wavesState struct {
	cohorts    [2 * waveGroups]waveCohort
	rng        uint64        // reservoir draws (fixed seed: the verdict is reproducible)
	late       welford       // harness start lateness (Start − Scheduled), seconds
	lateHist   *loghist.Hist // lateness, two buckets per power of two of µs, for the p90
	minClients int
}

// addLateness feeds one outcome's start lateness.
func (s *wavesState) addLateness(ns int64) {
	if ns < 0 {
		ns = 0
	}
	s.late.add(float64(ns) / 1e9)
	if s.lateHist == nil {
		s.lateHist = loghist.New(lateLayout)
	}
	s.lateHist.Add(ns)
}

// lateLayout buckets start lateness for the p90: under 1µs, then two
// buckets per power of two of µs.
var lateLayout = loghist.Layout{Unit: int64(time.Microsecond), Bits: 1}

// lateP90 is the 90th percentile of start lateness (the bucket's upper
// edge; 0 under 1µs and without outcomes).
func (s *wavesState) lateP90() int64 {
	if s.lateHist == nil {
		return 0
	}
	n := s.lateHist.N()
	b := s.lateHist.RankBucket((9*n + 9) / 10)
	if b <= 0 {
		return 0 // under 1µs: none
	}
	return lateLayout.Upper(b)
}

// uniform is a draw on (0, 1).
func (s *wavesState) uniform() float64 {
	return (float64(s.next()>>11) + 0.5) / (1 << 53)
}

// skip is how many retries Algorithm L passes over before the next
// replacement (≥ 1): a uniform reservoir with one draw per replacement, not
// one per retry.
func (s *wavesState) skip(w float64) int64 {
	if w >= 1 {
		return math.MaxInt64 / 4
	}
	k := math.Floor(math.Log(s.uniform())/math.Log1p(-w)) + 1
	return int64(min(k, math.MaxInt64/4))
}

func (s *wavesState) next() uint64 {
	// splitmix64
	s.rng += 0x9e3779b97f4a7c15
	z := s.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

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
	switch {
	case len(c.sample) < waveSample:
		c.sample = append(c.sample, waveSampleRec{trigger: p.done, base: base, arrival: x.at})
		if len(c.sample) == waveSample {
			c.lw = math.Exp(math.Log(s.uniform()) / waveSample)
			c.next = c.seen + s.skip(c.lw)
		}
	case c.seen == c.next:
		j, _ := bits.Mul64(s.next(), waveSample)
		c.sample[j] = waveSampleRec{trigger: p.done, base: base, arrival: x.at}
		c.lw *= math.Exp(math.Log(s.uniform()) / waveSample)
		c.next += s.skip(c.lw)
	}
	if len(c.ex) < 3 {
		c.ex = append(c.ex, Example{Client: st.client, Key: strings.Clone(key), Attempt: int(x.n), At: x.at, Prev: p.done,
			Detail: fmt.Sprintf("retry %d waited %s", k, fmtDur(own))})
	}
}

// cohortReading is one judged cohort.
type cohortReading struct {
	g                       int
	n                       int64
	mean                    float64 // seconds
	res                     int64   // pair resolution, ns
	arrivals, shape, spread float64
	immediate               bool    // mean own wait within the floor: no own wait
	unresolved              bool    // mean own wait within what the host's noise smears: not judged
	serverSync              bool    // after Retry-After, no spread of its own
	syncRatio               float64 // arrivals vs triggers (server-synchronized cohorts)
}

func (r *cohortReading) worst() float64 { return max(r.arrivals, r.shape, r.spread) }

func (r *cohortReading) name() string {
	k := r.g%waveGroups + 1
	what := fmt.Sprintf("retry %d", k)
	if k == waveGroups {
		what = fmt.Sprintf("retries %d+", k)
	}
	if r.g >= waveGroups {
		what += " (time beyond Retry-After)"
	}
	return what
}

// wavesJudgement is what the waves check and the server-synchronization
// warning read.
type wavesJudgement struct {
	cohorts     []cohortReading // the judged ones
	small       int64           // retries in cohorts too small to judge
	unresolved  []string        // cohorts the host's noise kept from judging
	late90      int64
	lateSD      float64 // seconds
	serverPaced int64
	clientPaced int64
}

// judgeCohorts computes the readings of every cohort big enough to judge,
// and how many retries were server- and client-paced (Figures).
func (a *Analyzer) judgeCohorts() *wavesJudgement { return a.judgeCohortsAt(a.noiseBulk()) }

// judgeCohortsAt judges the cohorts at the measured noise noiseLate (ns;
// judgeCohorts reads the bulk, p90).
func (a *Analyzer) judgeCohortsAt(noiseLate int64) *wavesJudgement {
	s := &a.wv
	j := &wavesJudgement{late90: s.lateP90()}
	lateVar := 0.0
	if s.late.n > 1 {
		lateVar = s.late.m2 / float64(s.late.n)
	}
	j.lateSD = math.Sqrt(lateVar)
	// Host noise. Measured (End.Noise), it replaces the start lateness as
	// the measure of how far the host moves arrivals: the floors widen by
	// it, pairs are read at a resolution no finer than it (a stub short of
	// CPU stamps a backlog of arrivals at once: bunching within the noise
	// is the host's), and a cohort whose mean own wait is under
	// waveNoiseRatio times it is not judged (lockstep smeared by that much
	// noise reads as jitter). Start lateness is the fleet's launch backlog,
	// not the lateness of a retry's wait, and is no longer subtracted.
	noise := a.fid.end != nil && a.fid.end.Noise != nil
	late := j.late90
	if noise {
		late, lateVar = noiseLate, 0
	}
	for g := range s.cohorts {
		c := &s.cohorts[g]
		if c.w.n == 0 {
			continue
		}
		if c.w.n < a.waveMin || len(c.clients) < s.minClients {
			j.small += c.w.n
			if g >= waveGroups && a.pacedByServer(&c.w, late, lateVar) {
				j.serverPaced += c.w.n
			} else {
				j.clientPaced += c.w.n
			}
			continue
		}
		r := cohortReading{g: g, n: c.w.n, mean: c.w.mean, arrivals: 1, shape: 1, spread: 1}
		floor := a.instWindow
		if g >= waveGroups {
			floor = a.waveSlack
		}
		floor += 2 * late
		m := int64(c.w.mean * 1e9)
		switch {
		case m <= floor:
			r.immediate = true
		case noise && m < waveNoiseRatio*late:
			r.unresolved = true
			j.unresolved = append(j.unresolved, r.name())
		default:
			r.res = max(m/waveBins, int64(time.Millisecond), late)
			v := c.w.m2/float64(c.w.n) - lateVar
			cv := math.Sqrt(max(v, 0)) / c.w.mean
			r.spread = maxWaveIndex
			if cv > fullJitterCV/maxWaveIndex {
				r.spread = fullJitterCV / cv
			}
			r.shape, r.arrivals = pairReadings(c.sample, m, r.res)
		}
		if g >= waveGroups && a.pacedByServer(&c.w, late, lateVar) {
			r.serverSync = true
			r.syncRatio = syncReading(c.sample, max(a.waveWindow, 2*late))
		}
		if r.serverSync {
			j.serverPaced += r.n
		} else {
			j.clientPaced += r.n
		}
		j.cohorts = append(j.cohorts, r)
	}
	return j
}

// pacedByServer tells whether the retries of a cohort that honoured a
// Retry-After came as it said, adding no spread of their own: the standard
// deviation of their waits beyond the allowed instant (less the variance
// of the harness's start lateness) is no more than that of a uniform draw
// over the slack (slack + twice the start lateness p90), or so small
// relative to their mean that the spread reading exceeds the threshold (a
// constant added to Retry-After, whatever the constant).
func (a *Analyzer) pacedByServer(w *welford, late90 int64, lateVar float64) bool {
	sd := math.Sqrt(max(w.m2/float64(w.n)-lateVar, 0))
	slack := float64(a.waveSlack+2*late90) / 1e9
	if sd <= slack/math.Sqrt(12) {
		return true
	}
	return w.mean > 0 && fullJitterCV/(sd/w.mean) > a.waveThreshold()
}

// waveThreshold is the waves check's threshold in force.
func (a *Analyzer) waveThreshold() float64 {
	return a.threshold(a.cfgOf(CheckWaves))
}

// pairReadings computes the shape and arrivals readings of a sample whose
// mean own wait is m (ns), at resolution r (ns).
func pairReadings(sample []waveSampleRec, m, r int64) (shape, arrivals float64) {
	n := len(sample)
	if n < 2 {
		return 1, 1
	}
	v := make([]int64, n)
	// Shape: pairs of waits within r, against two uniform draws on [0, 2m].
	for i, x := range sample {
		v[i] = x.own()
	}
	close := closePairs(v, r)
	pairs := float64(n) * float64(n-1) / 2
	a := 2 * float64(m)
	q := min(float64(r)/a, 1)
	pNull := 1 - (1-q)*(1-q)
	shape = ratio(float64(close), pairs*pNull)

	// Arrivals: pairs of arrivals within r, against arrivals drawn uniformly
	// on [base, base + 2m] (base: the response, or the allowed instant).
	for i, x := range sample {
		v[i] = x.arrival
	}
	close = closePairs(v, r)
	for i, x := range sample {
		v[i] = x.base
	}
	slices.Sort(v)
	var null float64
	reach := int64(a) + r
	for i := range v {
		for k := i + 1; k < n && v[k]-v[i] < reach; k++ {
			null += triangleWithin(float64(v[k]-v[i]), float64(r), a)
		}
	}
	arrivals = ratio(float64(close), null)
	return shape, arrivals
}

// closePairs counts the pairs of v (sorted in place) closer than r.
func closePairs(v []int64, r int64) int64 {
	slices.Sort(v)
	var n int64
	lo := 0
	for i := range v {
		for v[i]-v[lo] >= r {
			lo++
		}
		n += int64(i - lo)
	}
	return n
}

// triangleWithin is P(|d + U1 − U2| < r) for U1, U2 uniform on [0, a].
func triangleWithin(d, r, a float64) float64 {
	cdf := func(x float64) float64 { // of U1 − U2, triangular on [−a, a]
		switch {
		case x <= -a:
			return 0
		case x <= 0:
			return (x + a) * (x + a) / (2 * a * a)
		case x < a:
			return 1 - (a-x)*(a-x)/(2*a*a)
		}
		return 1
	}
	return cdf(r-d) - cdf(-r-d)
}

// ratio is real/null, 1 when both are (nearly) nothing, capped.
func ratio(real, null float64) float64 {
	if null < 1e-9 {
		if real == 0 {
			return 1
		}
		return maxWaveIndex
	}
	return min(real/null, maxWaveIndex)
}

// syncReading is how concentrated arrivals are relative to the responses
// that triggered them: pairs of arrivals within w over pairs of triggers
// within w.
func syncReading(sample []waveSampleRec, w int64) float64 {
	v := make([]int64, len(sample))
	for i, x := range sample {
		v[i] = x.arrival
	}
	arr := closePairs(v, w)
	for i, x := range sample {
		v[i] = x.trigger
	}
	trig := closePairs(v, w)
	if trig == 0 {
		if arr == 0 {
			return 0
		}
		return maxWaveIndex
	}
	return float64(arr) / float64(trig)
}

// judgeWaves is the waves check: the worst reading of the worst cohort.
//
// A stub that read a backlog of late arrivals at once (Noise.Batch)
// bunched what the clients may have sent apart, by as much as it kept
// them waiting. A FAIL then stands only if the cohorts still fail read at
// the noise's tail (p99) instead of its bulk: bunching finer than the
// tail may be the host's; lockstep that is still lockstep at the tail is
// the clients'. (A lockstep wave is itself a burst the stub reads late:
// its batch alone proves nothing.)
func (a *Analyzer) judgeWaves(c *checkCfg, j *wavesJudgement) CheckResult {
	r := a.judgeWavesOf(c, j)
	b := a.noiseBatch()
	if r.Status != StatusFail || b < waveBatchMin {
		return r
	}
	tail := a.noiseLate()
	if tail > a.noiseBulk() {
		if at := a.judgeWavesOf(c, a.judgeCohortsAt(tail)); at.Status == StatusFail {
			r.Reason += fmt.Sprintf("; the stub stamped up to %d late arrivals at once, and read at the noise's p99 (%s) the cohorts still fail: %s", b, fmtDur(tail), at.Reason)
			return r
		}
	}
	return a.noiseSkip(r, fmt.Sprintf("the stub stamped up to %d arrivals at once after they had waited in their sockets (%s), and at that lateness the cohorts do not fail: the bunching may be the host's, not the clients'", b, a.noiseText()))
}

// judgeWavesOf is the waves check on one judgement of the cohorts.
func (a *Analyzer) judgeWavesOf(c *checkCfg, j *wavesJudgement) CheckResult {
	var judged []cohortReading
	var n int64
	for _, r := range j.cohorts {
		if !r.serverSync && !r.unresolved {
			judged = append(judged, r)
			n += r.n
		}
	}
	noiseNote := ""
	if len(j.unresolved) > 0 {
		noiseNote = fmt.Sprintf("%s: %s not judged (mean own wait under %d× the noise's p90: lockstep smeared by it reads as jitter)", a.noiseText(), strings.Join(j.unresolved, ", "), waveNoiseRatio)
	}
	if len(judged) == 0 && noiseNote != "" {
		r := skip("every cohort big enough to judge waits less than the host's noise can resolve")
		r.Noise = noiseNote
		return r
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
	worst := 0
	for i := range judged {
		if judged[i].worst() > judged[worst].worst() {
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
	reason := fmt.Sprintf("worst cohort %s: %d retries, mean own wait %s, readings arrivals %.2f, shape %.2f, spread %.2f (worst: %s; %d cohorts over %d retries",
		w.name(), w.n, fmtDur(int64(w.mean*1e9)), w.arrivals, w.shape, w.spread, reading, len(judged), n)
	if j.late90 > 0 {
		reason += fmt.Sprintf("; harness start lateness p90 %s, sd %s", fmtDur(j.late90), fmtDur(int64(j.lateSD*1e9)))
	}
	reason += ")"
	if j.serverPaced > 0 {
		reason += fmt.Sprintf("; %d server-paced retries excluded", j.serverPaced)
	}
	r := verdict(c, w.worst(), c.def.Threshold.Num, n, reason)
	if r.Status != StatusFail {
		r.Noise = noiseNote
	}
	if r.Status == StatusFail {
		slices.SortStableFunc(judged, func(x, y cohortReading) int {
			switch {
			case x.worst() > y.worst():
				return -1
			case x.worst() < y.worst():
				return 1
			}
			return 0
		})
		for _, g := range judged[:min(len(judged), a.maxEx)] {
			if g.worst() <= r.Threshold {
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
			n, best.name(), fmtDur(int64(best.mean*1e9)), best.syncRatio, fmtDur(max(a.waveWindow, 2*j.late90))),
		Remedy: "spread Retry-After on the server (retry_after.spread), or add jitter on top of Retry-After in the client",
	}
}
