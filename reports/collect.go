package reports

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// Outcome classes of an attempt, in stacking order.
const (
	class2xx   = iota
	class429   // a rate limit: 429, or another status the analyzer's rule makes one
	class503   // a 503 that is not a rate limit
	classOther // any other status: 1xx, 3xx, other 4xx and 5xx
	classFault // a fault (reset, hang) or no status at all
	numClasses
)

var classNames = [numClasses]string{"2xx", "429", "503", "other 4xx/5xx", "fault"}

// classOf is the class an attempt is drawn in. Which responses are rate
// limits is the analyzer's rule (analyzer.ClassifyResponse), so a 403 the
// verdict treats as a rate limit is drawn with the 429s.
func classOf(a *timeline.Attempt) int {
	switch {
	case a.Fault != "" || a.Status == 0:
		return classFault
	case analyzer.ClassifyResponse(a) == analyzer.ResponseRateLimit:
		return class429
	case a.Status >= 200 && a.Status < 300:
		return class2xx
	case a.Status == 503:
		return class503
	}
	return classOther
}

// className is the legend's name of class cl: the rate limits are "429"
// while every one was a 429, else "rate limit 403/429" (their statuses).
func (c *Collector) className(cl int) string {
	if cl == class429 {
		return rateLimitName(c.rateLimitStatuses())
	}
	return classNames[cl]
}

// rateLimitName names the rate-limit class for the statuses it held.
func rateLimitName(statuses []int) string {
	if len(statuses) == 0 || len(statuses) == 1 && statuses[0] == 429 {
		return "429"
	}
	ss := make([]string, len(statuses))
	for i, st := range statuses {
		ss[i] = strconv.Itoa(st)
	}
	return "rate limit " + strings.Join(ss, "/")
}

// Bounds of the collector's memory.
const (
	timeBinCount    = 1024 // bins of the shared time axis
	raSampleSize    = 4000 // Retry-After points kept, on time
	raEarlySize     = 2000 // Retry-After points kept, early
	delayGroups     = 20   // retry numbers drawn in the backoff plot
	delaySampleSize = 400  // delays kept per retry number
)

// Stats are the figures of a report. It counts attempts and outcomes
// itself; what concerns retries (which attempt is a retry of which, what
// paced it, whether it was early or beyond the bound) is the analyzer's
// classification, so the report and the verdict agree.
type Stats struct {
	Attempts    int64 // requests the server saw
	OK          int64 // attempts answered 2xx
	Throttled   int64 // attempts answered with a rate limit: 429, or another status the analyzer makes one (a 403 with Retry-After)
	Unavailable int64 // attempts answered 503
	OtherErrors int64 // attempts answered any other status
	Faults      int64 // attempts that met a fault (reset, hang) or got no status
	Retries     int64 // attempts after the first of their logical request (the analyzer's Figures.Retries)

	// Requests is the number of logical requests: the outcome records when
	// the timeline has them, else the analyzer's count of first attempts
	// (in a serve recording an arrival whose key's previous attempt
	// succeeded starts a new logical request).
	Requests int64
	// Outcomes counts outcome records; 0 for a serve recording.
	Outcomes int64
	// Results counts outcomes by result (timeline.Result*).
	Results map[string]int64
	// SuccessRate is the share of outcomes with result ok, in [0, 1];
	// NaN when there are no outcomes.
	SuccessRate float64
	// Amplification is attempts per logical request (NaN without any).
	Amplification float64
	// P50 and P99 are completion-time quantiles of all logical requests
	// (within 1%); zero without outcomes.
	P50, P99 time.Duration

	// RetryAfterRetries counts retries that followed a response whose
	// Retry-After named a later instant (one that allows an immediate retry,
	// a past date or 0, paces nothing: its retries are own delays): the
	// retries the retry-after check judged. EarlyRetries those of them that
	// came before its not_before, less the check's tolerance: its
	// offenders.
	RetryAfterRetries int64
	EarlyRetries      int64
	// OwnDelays counts retries paced by the client's own backoff (after a
	// response with no usable Retry-After); BeyondBound those of them whose
	// delay exceeded the stated policy's bound by more than the
	// jitter-bounds check's tolerance (0 when the check judges no delay).
	OwnDelays   int64
	BeyondBound int64
	// ServerPaced and ClientPaced are the analyzer's Figures: retries that
	// waited exactly as Retry-After said, and the others.
	ServerPaced, ClientPaced int64

	// End is the last instant of the timeline (arrival, response or
	// outcome end), from time zero.
	End time.Duration

	// RateLimitStatuses are the statuses of the Throttled attempts, in
	// order: [429] in most runs; [403, 429] with a provider's secondary
	// limit.
	RateLimitStatuses []int
}

// raPoint is one retry after a usable Retry-After: the wait asked for and
// the wait taken, in ns.
type raPoint struct{ asked, taken int64 }

// rasterRow is one sampled client's attempts on the time axis: a set of
// classes per bin.
type rasterRow struct {
	client string
	prio   uint64 // lower is kept
	cells  []uint8
	index  int // in the heap
}

// rowHeap is a max-heap on prio, so the row to evict is on top.
type rowHeap []*rasterRow

func (h rowHeap) Len() int           { return len(h) }
func (h rowHeap) Less(i, j int) bool { return h[i].prio > h[j].prio }
func (h rowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *rowHeap) Push(x any)        { r := x.(*rasterRow); r.index = len(*h); *h = append(*h, r) }
func (h *rowHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// A Collector accumulates, in one pass over a timeline and in bounded
// memory, everything the report draws. Feed it the records after the meta
// with Add, then call Write (or Stats, Verdict). It runs an analyzer on the
// same records and draws the facts the analyzer judges each retry on, so
// Verdict is the verdict of the timeline the report shows. A Collector is
// not safe for concurrent use; its zero value is not usable: use
// NewCollector.
type Collector struct {
	meta *timeline.Meta
	an   *analyzer.Analyzer
	// verdict is an.Result() since the last Add: Verdict and Stats share
	// it, so a report judges its timeline once.
	verdict *analyzer.Verdict
	opts    settings

	bins   timeBins
	counts [numClasses][]uint64

	// Raster sampling: when the fleet size is known, client ids are
	// numbers and there are more clients than rows, every stride-th client
	// is kept; otherwise the clients with the smallest hashes (a uniform
	// sample) are kept.
	stride  int
	rows    map[string]*rasterRow
	rowHeap rowHeap

	raOnTime, raEarly *reservoir[raPoint]
	delays            [delayGroups]*reservoir[int64]
	delayMax          [delayGroups]int64
	delayBeyondGroups int64 // own delays of retries past the last group

	hists map[string]*logHist // completion by result
	all   logHist

	quota   *quotaSeries // nil unless the meta lists limits
	quotaPh int          // index of the phase of the last attempt (inQuotaPhase)

	stats Stats
	// throttledBy marks the statuses of the rate limits (Stats.Throttled);
	// index 0 stands for any status outside 1–599.
	throttledBy [600]bool
}

// rateLimitStatuses lists the statuses of the rate limits seen, in order.
func (c *Collector) rateLimitStatuses() []int {
	var out []int
	for st, on := range c.throttledBy {
		if on {
			out = append(out, st)
		}
	}
	return out
}

// settings are a collector's options with the analyzer's tolerances in
// force, which the plots state.
type settings struct {
	Options
	Tolerance      time.Duration // retry-after's
	BoundTolerance time.Duration // jitter-bounds'
}

// NewCollector returns a Collector for the timeline whose meta record is
// meta (nil: an empty meta, every plot that needs it explains why it is
// missing). Its analyzer runs with opts.Analyzer, whose unknown check ids
// and parameters are ignored (Collect reports them).
func NewCollector(meta *timeline.Meta, opts Options) *Collector {
	opts = opts.withDefaults()
	c := &Collector{
		meta:     meta,
		rows:     make(map[string]*rasterRow),
		raOnTime: newReservoir[raPoint](raSampleSize, 1),
		raEarly:  newReservoir[raPoint](raEarlySize, 2),
		hists:    make(map[string]*logHist),
	}
	aopts := opts.Analyzer
	if user := aopts.OnRetry; user != nil {
		aopts.OnRetry = func(r analyzer.Retry) { c.addRetry(r); user(r) }
	} else {
		aopts.OnRetry = c.addRetry
	}
	c.an = analyzer.New(meta, aopts)
	if c.meta == nil {
		c.meta = &timeline.Meta{Recorder: "serve"}
	}
	meta = c.meta
	c.opts = settings{Options: opts}
	ra, b := c.an.Tolerances()
	c.opts.Tolerance, c.opts.BoundTolerance = ra, b
	c.bins = timeBins{width: 1_000_000, n: timeBinCount}
	if meta.Duration > 0 {
		c.bins.width = niceWidth(meta.Duration, timeBinCount)
	}
	for i := range c.counts {
		c.counts[i] = make([]uint64, timeBinCount)
	}
	c.quota = newQuotaSeries(meta, timeBinCount)
	if f := meta.Fleet; f != nil && f.Clients > opts.MaxClients {
		c.stride = (f.Clients + opts.MaxClients - 1) / opts.MaxClients
	}
	for i := range c.delays {
		c.delays[i] = newReservoir[int64](delaySampleSize, uint64(10+i))
	}
	return c
}

// Meta is the meta record the collector was made with.
func (c *Collector) Meta() *timeline.Meta { return c.meta }

func (c *Collector) fold() {
	for _, s := range c.counts {
		foldSum(s)
	}
	for _, r := range c.rows {
		foldOr(r.cells)
	}
	if c.quota != nil {
		c.quota.fold()
	}
}

func (c *Collector) seeEnd(t int64) {
	if d := time.Duration(t); d > c.stats.End {
		c.stats.End = d
	}
}

// Add accumulates one record (and feeds it to the collector's analyzer).
// Meta records after the first and records of unknown types are ignored.
func (c *Collector) Add(rec *timeline.Record) {
	c.verdict = nil
	c.an.Add(rec)
	switch rec.Type {
	case timeline.TypeAttempt:
		c.addAttempt(&rec.Attempt)
	case timeline.TypeOutcome:
		c.addOutcome(&rec.Outcome)
	}
}

func (c *Collector) addAttempt(a *timeline.Attempt) {
	s := &c.stats
	s.Attempts++
	cl := classOf(a)
	switch cl {
	case class2xx:
		s.OK++
	case class429:
		s.Throttled++
		if a.Status > 0 && a.Status < len(c.throttledBy) {
			c.throttledBy[a.Status] = true
		} else {
			c.throttledBy[0] = true // a status outside 1–599
		}
	case class503:
		s.Unavailable++
	case classOther:
		s.OtherErrors++
	default:
		s.Faults++
	}
	c.seeEnd(a.At)
	c.seeEnd(a.Done)
	bin := c.bins.index(a.At, c.fold)
	c.counts[cl][bin]++
	if c.quota != nil && c.inQuotaPhase(a.At) {
		c.quota.add(a, bin)
	}
	if r := c.row(a.Client); r != nil {
		r.cells[bin] |= 1 << cl
	}
}

// addRetry draws one retry the analyzer paired, as it classified it.
func (c *Collector) addRetry(r analyzer.Retry) {
	taken := r.At - r.Prev
	if r.Paced {
		p := raPoint{asked: r.NotBefore - r.Prev, taken: taken}
		c.stats.RetryAfterRetries++
		if r.Early {
			c.stats.EarlyRetries++
			c.raEarly.add(p)
		} else {
			c.raOnTime.add(p)
		}
		return
	}
	c.stats.OwnDelays++
	if r.Beyond {
		c.stats.BeyondBound++
	}
	if r.Number < 1 || r.Number > delayGroups {
		c.delayBeyondGroups++
		return
	}
	c.delays[r.Number-1].add(taken)
	if taken > c.delayMax[r.Number-1] {
		c.delayMax[r.Number-1] = taken
	}
}

// bound is the longest delay the analyzer's jitter-bounds check allows
// before retry number n (1-based), in ns; ok is false when it judges none.
func (c *Collector) bound(n int) (b float64, ok bool) {
	d, ok := c.an.Bound(n)
	return float64(d), ok
}

func (c *Collector) addOutcome(o *timeline.Outcome) {
	s := &c.stats
	s.Outcomes++
	if s.Results == nil {
		s.Results = make(map[string]int64)
	}
	s.Results[o.Result]++
	c.seeEnd(o.End)
	h := c.hists[o.Result]
	if h == nil {
		h = new(logHist)
		c.hists[o.Result] = h
	}
	d := o.End - o.Start
	h.add(d)
	c.all.add(d)
}

// row returns the raster row of client, or nil when the client is not in
// the sample.
func (c *Collector) row(client string) *rasterRow {
	if r, ok := c.rows[client]; ok {
		return r
	}
	var prio uint64
	if c.stride > 0 {
		id, err := strconv.Atoi(client)
		if err == nil {
			if id < 0 || id%c.stride != 0 {
				return nil
			}
			prio = uint64(id)
		} else {
			// Not a number: sample by hash among the non-numeric
			// clients, after every numeric one.
			prio = 1<<63 | fnv64(client)>>1
		}
	} else {
		prio = fnv64(client)
	}
	if len(c.rowHeap) >= c.opts.MaxClients {
		top := c.rowHeap[0]
		if prio >= top.prio {
			return nil
		}
		heap.Pop(&c.rowHeap)
		delete(c.rows, top.client)
	}
	client = strings.Clone(client) // kept: must not pin the decoder's line block
	r := &rasterRow{client: client, prio: prio, cells: make([]uint8, timeBinCount)}
	heap.Push(&c.rowHeap, r)
	c.rows[client] = r
	return r
}

// Verdict is the collector's analyzer's judgement of what was added so far:
// the verdict on the facts the report draws, computed once until the next
// Add (callers share it: do not modify it).
func (c *Collector) Verdict() *analyzer.Verdict {
	if c.verdict == nil {
		c.verdict = c.an.Result()
	}
	return c.verdict
}

// Stats returns the figures accumulated so far.
func (c *Collector) Stats() Stats {
	s := c.stats
	s.Results = make(map[string]int64, len(c.stats.Results))
	for k, v := range c.stats.Results {
		s.Results[k] = v
	}
	f := c.Verdict().Figures
	s.Retries, s.ServerPaced, s.ClientPaced = f.Retries, f.ServerPaced, f.ClientPaced
	s.Requests = f.Requests
	if s.Outcomes > 0 {
		s.Requests = s.Outcomes
	}
	s.SuccessRate = math.NaN()
	if s.Outcomes > 0 {
		s.SuccessRate = float64(s.Results[timeline.ResultOK]) / float64(s.Outcomes)
	}
	s.Amplification = math.NaN()
	if s.Requests > 0 {
		s.Amplification = float64(s.Attempts) / float64(s.Requests)
	}
	s.RateLimitStatuses = c.rateLimitStatuses()
	s.P50 = time.Duration(c.all.quantile(0.50))
	s.P99 = time.Duration(c.all.quantile(0.99))
	return s
}

// sortedRows returns the sampled rows ordered by client id (numerically
// when both are numbers).
func (c *Collector) sortedRows() []*rasterRow {
	rows := make([]*rasterRow, 0, len(c.rows))
	for _, r := range c.rows {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *rasterRow) int { return compareClients(a.client, b.client) })
	return rows
}

func compareClients(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// fnv64 is the FNV-1a hash of s: fixed, so the sample is the same on every
// run.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
