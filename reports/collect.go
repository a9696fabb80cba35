package reports

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Outcome classes of an attempt, in stacking order.
const (
	class2xx = iota
	class429
	class503
	classOther // any other status: 1xx, 3xx, other 4xx and 5xx
	classFault // a fault (reset, hang) or no status at all
	numClasses
)

var classNames = [numClasses]string{"2xx", "429", "503", "other 4xx/5xx", "fault"}

func classOf(a *timeline.Attempt) int {
	switch {
	case a.Fault != "" || a.Status == 0:
		return classFault
	case a.Status >= 200 && a.Status < 300:
		return class2xx
	case a.Status == 429:
		return class429
	case a.Status == 503:
		return class503
	}
	return classOther
}

// Bounds of the collector's memory.
const (
	timeBinCount    = 1024    // bins of the shared time axis
	keyGeneration   = 1 << 17 // logical requests remembered per generation (two generations)
	raSampleSize    = 4000    // Retry-After points kept, on time
	raEarlySize     = 2000    // Retry-After points kept, early
	delayGroups     = 20      // retry numbers drawn in the backoff plot
	delaySampleSize = 400     // delays kept per retry number
)

// Stats are the figures a report computes from a timeline on its own,
// independently of the analyzer.
type Stats struct {
	Attempts    int64 // requests the server saw
	OK          int64 // attempts answered 2xx
	Throttled   int64 // attempts answered 429
	Unavailable int64 // attempts answered 503
	OtherErrors int64 // attempts answered any other status
	Faults      int64 // attempts that met a fault (reset, hang) or got no status
	Retries     int64 // attempts after the first of their logical request

	// Requests is the number of logical requests: the outcome records when
	// the timeline has them, else the first attempts seen (an arrival whose
	// key's previous attempt succeeded starts a new logical request).
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
	// a past date or 0, paces nothing: its retries are own delays);
	// EarlyRetries those of them that came before its not_before, less the
	// tolerance.
	RetryAfterRetries int64
	EarlyRetries      int64
	// OwnDelays counts retries paced by the client's own backoff (after a
	// response with no usable Retry-After); BeyondBound those of them whose
	// delay exceeded the stated policy's bound by more than the bound
	// tolerance (0 without a policy).
	OwnDelays   int64
	BeyondBound int64

	// End is the last instant of the timeline (arrival, response or
	// outcome end), from time zero.
	End time.Duration
}

// keyState is what the collector remembers of a logical request's latest
// attempt.
type keyState struct {
	done      int64
	notBefore int64
	hasNB     bool  // a Retry-After that named a later instant
	ok        bool  // answered 2xx or 3xx in a serve recording: a later arrival is a new logical request
	attempt   int32 // attempts of the current logical request so far
}

// keyTable remembers the latest attempt per logical request in bounded
// memory: two generations of at most keyGeneration entries; when the young
// one fills up, the old one is dropped. A retry whose logical request was
// forgotten (more than 2·keyGeneration requests in flight) is not paired.
type keyTable struct {
	young, old map[string]keyState
	gen        int // entries per generation (0: keyGeneration)
}

func (t *keyTable) get(k string) (keyState, bool) {
	if s, ok := t.young[k]; ok {
		return s, true
	}
	s, ok := t.old[k]
	return s, ok
}

func (t *keyTable) put(k string, s keyState) {
	if t.young == nil {
		t.young = make(map[string]keyState)
	}
	gen := t.gen
	if gen <= 0 {
		gen = keyGeneration
	}
	if _, ok := t.young[k]; !ok {
		// A new map key is kept: it must not pin the decoder's line block.
		k = strings.Clone(k)
		if len(t.young) >= gen {
			t.old, t.young = t.young, make(map[string]keyState, gen)
		}
	}
	t.young[k] = s
	delete(t.old, k)
}

func (t *keyTable) remove(k string) {
	delete(t.young, k)
	delete(t.old, k)
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
// with Add, then call Write (or Stats). A Collector is not safe for
// concurrent use; its zero value is not usable: use NewCollector.
type Collector struct {
	meta *timeline.Meta
	// reuseKeys: a serve recording, whose clients may reuse a URL after a
	// success (see the analyzer's pairing).
	reuseKeys bool
	opts      Options

	bins   timeBins
	counts [numClasses][]uint64

	// Raster sampling: when the fleet size is known, client ids are
	// numbers and there are more clients than rows, every stride-th client
	// is kept; otherwise the clients with the smallest hashes (a uniform
	// sample) are kept.
	stride  int
	rows    map[string]*rasterRow
	rowHeap rowHeap

	keys keyTable

	raOnTime, raEarly *reservoir[raPoint]
	delays            [delayGroups]*reservoir[int64]
	delayMax          [delayGroups]int64
	delayBeyondGroups int64 // own delays of retries past the last group

	hists map[string]*logHist // completion by result
	all   logHist

	firsts int64 // first attempts seen
	stats  Stats
}

// NewCollector returns a Collector for the timeline whose meta record is
// meta (nil: an empty meta, every plot that needs it explains why it is
// missing).
func NewCollector(meta *timeline.Meta, opts Options) *Collector {
	if meta == nil {
		meta = &timeline.Meta{Recorder: "serve"}
	}
	opts = opts.withDefaults()
	c := &Collector{
		meta:      meta,
		reuseKeys: meta.Recorder == "serve",
		opts:      opts,
		rows:      make(map[string]*rasterRow),
		raOnTime:  newReservoir[raPoint](raSampleSize, 1),
		raEarly:   newReservoir[raPoint](raEarlySize, 2),
		hists:     make(map[string]*logHist),
	}
	c.bins = timeBins{width: 1_000_000, n: timeBinCount}
	if meta.Duration > 0 {
		c.bins.width = niceWidth(meta.Duration, timeBinCount)
	}
	for i := range c.counts {
		c.counts[i] = make([]uint64, timeBinCount)
	}
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
}

func (c *Collector) seeEnd(t int64) {
	if d := time.Duration(t); d > c.stats.End {
		c.stats.End = d
	}
}

// Add accumulates one record. Meta records after the first and records of
// unknown types are ignored.
func (c *Collector) Add(rec *timeline.Record) {
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
	if r := c.row(a.Client); r != nil {
		r.cells[bin] |= 1 << cl
	}

	// A later arrival with the key of an earlier one is a retry, unless the
	// earlier one succeeded in a serve recording: then it is a new logical
	// request reusing the key (a client outside the harness requesting the
	// same URL again), as the analyzer has it. A fleet run gives every
	// logical request its own key.
	prev, seen := c.keys.get(a.Key)
	var n int32
	switch {
	case seen && !prev.ok:
		s.Retries++
		c.addRetry(a, prev)
		n = prev.attempt + 1
	case !seen && a.Attempt > 1: // its earlier attempts are not in the stream (or forgotten)
		s.Retries++
		n = int32(min(a.Attempt, math.MaxInt32))
	default:
		c.firsts++
		n = 1
	}
	st := keyState{done: a.Done, notBefore: a.NotBefore, hasNB: a.HasNotBefore && a.NotBefore > a.Done, attempt: n,
		ok: c.reuseKeys && a.Status >= 200 && a.Status < 400 && a.Fault == ""}
	c.keys.put(a.Key, st)
}

// addRetry pairs a retry with the previous attempt of its logical request.
func (c *Collector) addRetry(a *timeline.Attempt, prev keyState) {
	taken := a.At - prev.done
	if prev.hasNB {
		p := raPoint{asked: prev.notBefore - prev.done, taken: taken}
		c.stats.RetryAfterRetries++
		if a.At < prev.notBefore-int64(c.opts.Tolerance) {
			c.stats.EarlyRetries++
			c.raEarly.add(p)
		} else {
			c.raOnTime.add(p)
		}
		return
	}
	c.stats.OwnDelays++
	retry := int(prev.attempt) // the retry number: 1 for the second attempt
	if b, ok := c.bound(retry); ok && float64(taken) > b+float64(c.opts.BoundTolerance) {
		c.stats.BeyondBound++
	}
	if retry < 1 || retry > delayGroups {
		c.delayBeyondGroups++
		return
	}
	c.delays[retry-1].add(taken)
	if taken > c.delayMax[retry-1] {
		c.delayMax[retry-1] = taken
	}
}

// bound is the stated policy's largest delay before retry number n
// (1-based): min(cap, base·2^(n-1)), in ns, or the cap alone for
// decorrelated jitter, as the analyzer's jitter-bounds check has it. ok is
// false when the policy states no bound.
func (c *Collector) bound(n int) (b float64, ok bool) {
	p := c.meta.Policy
	if p != nil && p.Jitter == "decorrelated" {
		return float64(p.Cap), p.Cap > 0
	}
	if p == nil || p.Base <= 0 || n < 1 {
		return 0, false
	}
	b = float64(p.Base) * math.Exp2(float64(n-1))
	if p.Cap > 0 && b > float64(p.Cap) {
		b = float64(p.Cap)
	}
	return b, true
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
	c.keys.remove(o.Key)
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

// Stats returns the figures accumulated so far.
func (c *Collector) Stats() Stats {
	s := c.stats
	s.Results = make(map[string]int64, len(c.stats.Results))
	for k, v := range c.stats.Results {
		s.Results[k] = v
	}
	s.Requests = c.firsts
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
