package analyzer

import (
	"fmt"
	"math"
)

// The retry cohorts the Analyzer keeps for waves and for the capacity
// checks' spread (waves.go reads them): per retry number, a running mean
// and variance of the own waits and a bounded uniform sample.

// waveSampleRec is one sampled retry of a cohort: the response that
// triggered it, the instant its own wait started from (the response, or
// the allowed instant of a Retry-After it honoured), and its arrival.
type waveSampleRec struct {
	trigger, base, arrival int64
	// meant is where the client's wait claim puts the arrival (the
	// trigger plus the claimed wait); noClaim or badClaim without one.
	meant int64
	// faultBase: the trigger is a fault or an abandoned answer, whose
	// instant the client saw by its own timer, not the stub's stamp.
	faultBase bool
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
	rng        uint64 // reservoir draws (fixed seed: the verdict is reproducible)
	minClients int
}

// uniform is a draw on (0, 1).
func (s *wavesState) uniform() float64 {
	return (float64(s.next()>>11) + 0.5) / (1 << 53)
}

// skipLen is how many retries Algorithm L passes over before the next
// replacement (≥ 1): a uniform reservoir with one draw per replacement, not
// one per retry.
func (s *wavesState) skipLen(w float64) int64 {
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

// cohortReading is one judged cohort.
type cohortReading struct {
	g                       int
	n                       int64
	mean                    float64 // seconds
	res                     int64   // pair resolution, ns
	arrivals, shape, spread float64 // as read
	lo, hi                  float64 // the worst reading's range under the host's noise
	immediate               bool    // mean own wait within the floor: no own wait
	serverSync              bool    // after Retry-After, no spread of its own
	claimed                 bool    // read on its clients' wait claims (claimedSample)
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
	serverPaced int64
	clientPaced int64
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

// fullJitterCV is the coefficient of variation of a uniform delay on [0, b]:
// the spread of waits that full jitter gives, the reference of waves.
var fullJitterCV = 1 / math.Sqrt(3)

// maxWaveIndex caps the waves figure (waits with no spread at all).
const maxWaveIndex = 1000

// defaultWaves is the waves check's default threshold, in × full
// jitter's concentration: ±p uniform jitter reads 1/p, so narrower than
// ±10% fails.
const defaultWaves = 10.0

// waveGroups is how many retry numbers the waves statistic keeps apart; later
// retries share the last group.
const waveGroups = 16

const (
	// waveSample is the reservoir size of one cohort.
	waveSample = 2048
	// waveBins is the resolution of the pair readings: r = mean/waveBins, so
	// waits in lockstep read about waveBins on the shape.
	waveBins = 50
	// waveSyncRatio: server-synchronized retries raise the warning when
	// their arrivals are at least this concentrated relative to the
	// responses that triggered them.
	waveSyncRatio = 0.5
)
