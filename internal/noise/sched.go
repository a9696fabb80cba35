package noise

import (
	"math"
	"runtime/metrics"

	"github.com/retrylab/retrylab/timeline"
)

const schedMetric = "/sched/latencies:seconds"

// readSched reads the runtime's scheduling-latency histogram; nil when the
// runtime does not have it.
func readSched() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram() // a fresh copy on every Read
}

// schedDiff is the sched source over the span between two reads of the
// histogram: the counts' difference, each quantile read as its bucket's
// upper edge (the lower edge for the last bucket, whose upper edge is
// +Inf), Samples the count. False when nothing was counted between them or
// the two do not have the same buckets.
func schedDiff(before, after *metrics.Float64Histogram) (source, bool) {
	if len(before.Counts) != len(after.Counts) || len(after.Buckets) != len(after.Counts)+1 {
		return source{}, false
	}
	d := make([]uint64, len(after.Counts))
	var n uint64
	for i := range d {
		if after.Counts[i] > before.Counts[i] { // counts only grow
			d[i] = after.Counts[i] - before.Counts[i]
			n += d[i]
		}
	}
	if n == 0 {
		return source{}, false
	}
	// edge is bucket i's value in ns: its upper edge, or its lower edge
	// when that is +Inf; never negative (the first bucket's lower edge is
	// -Inf).
	edge := func(i int) int64 {
		v := after.Buckets[i+1]
		if math.IsInf(v, 1) {
			v = after.Buckets[i]
		}
		switch {
		case v <= 0 || math.IsNaN(v):
			return 0
		case v*1e9 >= math.MaxInt64:
			return math.MaxInt64
		}
		return int64(math.Ceil(v * 1e9))
	}
	quantile := func(q float64) int64 {
		rank := max(uint64(math.Ceil(q*float64(n))), 1)
		var cum uint64
		for i, c := range d {
			cum += c
			if cum >= rank {
				return edge(i)
			}
		}
		return edge(len(d) - 1)
	}
	s := source{name: timeline.NoiseSched, p50: quantile(0.5), p90: quantile(0.9), p99: quantile(0.99), samples: int64(min(n, math.MaxInt64))}
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] > 0 {
			s.max = edge(i)
			break
		}
	}
	return s, true
}
