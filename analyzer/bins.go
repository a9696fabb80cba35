package analyzer

import (
	"math"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// The capacity bins: one time axis of first attempts, attempts,
// goodput, rejections and queueing, folded to stay bounded, that the
// capacity checks (capacity.go) read.

// Bounds of the capacity checks' memory: the run's time axis in at most
// loadBinCount bins, at least minLoadBin wide; a longer run doubles the
// bins' width and folds them.
const (
	loadBinCount = 4096
	minLoadBin   = int64(10 * time.Millisecond)
)

// loadState accumulates, on one binned time axis, what the capacity checks
// judge: first attempts and all attempts by arrival, successful responses
// delivered (goodput) by response, capacity rejections, and the time
// requests spent waiting for a worker; plus the service time given, and
// the part of it given to requests whose client had gone. It exists only
// when the meta states a capacity model.
type loadState struct {
	width                           int64 // ns per bin
	used                            int   // highest bin index written + 1
	first, attempts, good, rejected []int64
	// inTime counts, by arrival, the successful attempts recorded
	// abandoned that the stub queued and served within the fleet's
	// attempt timeout (timeout): their clients gave up on a response the
	// stub had in time, so only the response's way back, the host's
	// lateness, can have made it late. Recovery under measured noise
	// counts them as goodput (see judgeLoad).
	inTime  []int64
	timeout int64
	// qArea is the requests-waiting × ns in each bin, from the bins an
	// attempt's wait only partly covers; qFull a difference array of the
	// bins it covers whole (materialize adds them to qArea).
	qArea []float64
	qFull []int64

	firstAt, lastFirst int64 // first and last first-attempt arrivals
	firsts             int64
	service, wasted    int64 // ns of service given; of it, to abandoned attempts
	abandoned          int64 // attempts recorded abandoned
	wastedN            int64 // of them, the ones that were given service
	rejectedN          int64 // capacity rejections
	servedN            int64 // attempts given service
	inTimeN            int64 // sum of inTime
	inTimeWasted       int64 // ns of service given to the inTime attempts
}

func newLoadState(meta *timeline.Meta) *loadState {
	l := &loadState{width: minLoadBin}
	if meta.Duration > 0 {
		l.width = max(minLoadBin, NiceBin(meta.Duration, loadBinCount))
	}
	l.first = make([]int64, loadBinCount)
	l.attempts = make([]int64, loadBinCount)
	l.good = make([]int64, loadBinCount)
	l.rejected = make([]int64, loadBinCount)
	l.inTime = make([]int64, loadBinCount)
	if meta.Fleet != nil {
		l.timeout = meta.Fleet.AttemptTimeout
	}
	l.qArea = make([]float64, loadBinCount)
	l.qFull = make([]int64, loadBinCount+1)
	return l
}

// NiceBin is the smallest width of the form {1,2,5}·10^k ns that covers
// span in n bins: the one 1-2-5 bin rule of the analyzer's and the
// reports' time axes (1 for a span ≤ n).
func NiceBin(span int64, n int) int64 {
	w := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if c := w * m; span <= c*int64(n) {
				return c
			}
		}
		w *= 10
	}
}

// maxLoadTime bounds the times binned (146 years), so that the folded
// axis never overflows.
const maxLoadTime = int64(1) << 62

// bin returns the bin of t, folding the axis until it holds t.
func (l *loadState) bin(t int64) int {
	t = min(max(t, 0), maxLoadTime)
	for t/l.width >= loadBinCount {
		l.fold()
	}
	i := int(t / l.width)
	l.used = max(l.used, i+1)
	return i
}

// fold doubles the bins' width.
func (l *loadState) fold() {
	l.materialize()
	for _, s := range [][]int64{l.first, l.attempts, l.good, l.rejected, l.inTime} {
		h := len(s) / 2
		for i := 0; i < h; i++ {
			s[i] = s[2*i] + s[2*i+1]
		}
		clear(s[h:])
	}
	h := len(l.qArea) / 2
	for i := 0; i < h; i++ {
		l.qArea[i] = l.qArea[2*i] + l.qArea[2*i+1]
	}
	clear(l.qArea[h:])
	l.width *= 2
	l.used = (l.used + 1) / 2
}

// materialize adds the bins waits covered whole to qArea.
func (l *loadState) materialize() {
	var c int64
	for i := range l.qArea {
		c += l.qFull[i]
		if c != 0 {
			l.qArea[i] += float64(c) * float64(l.width)
		}
	}
	clear(l.qFull)
}

// wait adds a request waiting for a worker over [from, to).
func (l *loadState) wait(from, to int64) {
	from, to = min(max(from, 0), maxLoadTime), min(to, maxLoadTime)
	if to <= from {
		return
	}
	l.bin(to) // fold first: both ends then index the same axis
	bf, bt := l.bin(from), l.bin(to)
	w := l.width
	if bf == bt {
		l.qArea[bf] += float64(to - from)
		return
	}
	l.qArea[bf] += float64(int64(bf+1)*w - from)
	l.qArea[bt] += float64(to - int64(bt)*w)
	if bt > bf+1 {
		l.qFull[bf+1]++
		l.qFull[bt]--
	}
}

func (l *loadState) add(r *timeline.Attempt) {
	i := l.bin(r.At)
	l.attempts[i]++
	if r.Attempt == 1 {
		l.first[i]++
		if l.firsts == 0 || r.At < l.firstAt {
			l.firstAt = r.At
		}
		l.lastFirst = max(l.lastFirst, r.At)
		l.firsts++
	}
	if r.Limit == LimitCapacity {
		l.rejected[i]++
		l.rejectedN++
	}
	if r.Status >= 200 && r.Status < 300 {
		switch {
		case r.Fault == "":
			l.good[i]++
		case r.Fault == timeline.FaultAbandoned && l.timeout > 0 && r.Queue+r.Service <= l.timeout:
			l.inTime[i]++
			l.inTimeN++
			l.inTimeWasted += r.Service
		}
	}
	if r.Queue > 0 {
		l.wait(r.At, r.At+min(r.Queue, maxLoadTime))
	}
	if r.Service > 0 {
		l.service += r.Service
		l.servedN++
	}
	if r.Fault == timeline.FaultAbandoned {
		l.abandoned++
		if r.Service > 0 {
			l.wasted += r.Service
			l.wastedN++
		}
	}
}

// Recovery is what the recovery check read from a run.
type Recovery struct {
	// Skip says why the check judged nothing ("" when it judged).
	Skip string
	// End is when the last trigger ended (ns since the run's start);
	// Hold how long (ns) goodput had to stay at Share (%) of the offered
	// load; Threshold how long recovery may take.
	End       int64
	Hold      int64
	Share     float64
	Threshold time.Duration
	// Recovered: goodput was back at Share of the offered load from At
	// (≥ End) for Hold; Time is At − End.
	Recovered bool
	At        int64
	Time      time.Duration
	// Metastable: never recovered in the Observed ns of offered load after
	// End, at least Threshold + Hold.
	Metastable bool
	Observed   int64
}

// loadJudgement is what the capacity checks read at Result.
type loadJudgement struct {
	inTime bool  // goodput counts loadState.inTime
	window int64 // ns, a multiple of the bins' width
	w      int   // the window in bins
	rec    Recovery

	// load-amplification over the trigger spans (during) and from the last
	// trigger's end to the recovery (after).
	ampSkip               string
	during, after         ampSpan
	ampAttempts, ampFirst int64
	ampRejected           int64
	ampUntil              int64 // end of the after span
	// ampMost is the largest mean from the trigger to any instant from
	// its end to ampUntil: whatever window a recovery would have closed,
	// the figure over it is no more (a ratio of sums is at most the
	// largest of the cumulative ones).
	ampMost float64
	// baselineOver: the server was not keeping up before the trigger
	// (rec.Skip says so).
	baselineOver bool
}

// ampSpan is amplification over a span: totals and the worst window.
type ampSpan struct {
	attempts, first int64
	peak            float64
}

func (s *ampSpan) mean() float64 {
	if s.first == 0 {
		return math.NaN()
	}
	return float64(s.attempts) / float64(s.first)
}
