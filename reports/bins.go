package reports

import (
	"time"

	"github.com/retrylab/retrylab/analyzer"
)

// timeBins is the time axis shared by the binned aggregates (attempts over
// time, the client raster). It covers [0, width·n) with n bins; when a time
// falls beyond it, the bin width doubles and every aggregate folds pairs of
// bins, so a stream of unknown length is binned in bounded memory.
type timeBins struct {
	width int64 // ns per bin, > 0
	n     int   // number of bins, even
	used  int   // highest bin index written + 1
}

// index returns the bin of t (ns), growing the axis as needed; fold is
// called once per doubling. Negative times land in bin 0.
func (b *timeBins) index(t int64, fold func()) int {
	if t < 0 {
		t = 0
	}
	for t/b.width >= int64(b.n) {
		b.width *= 2
		b.used = (b.used + 1) / 2
		fold()
	}
	i := int(t / b.width)
	if i+1 > b.used {
		b.used = i + 1
	}
	return i
}

// foldSum halves a bin slice in place by summing pairs; the upper half is
// cleared.
func foldSum(s []uint64) {
	h := len(s) / 2
	for i := 0; i < h; i++ {
		s[i] = s[2*i] + s[2*i+1]
	}
	clear(s[h:])
}

// foldOr halves a bin slice of class bit sets in place by or-ing pairs.
func foldOr(s []uint8) {
	h := len(s) / 2
	for i := 0; i < h; i++ {
		s[i] = s[2*i] | s[2*i+1]
	}
	clear(s[h:])
}

// niceWidth returns the smallest bin width of the form {1,2,5}·10^k ns that
// covers span with at most n bins, at least 1 ms: analyzer.NiceBin's rule.
func niceWidth(span int64, n int) int64 {
	return max(int64(time.Millisecond), analyzer.NiceBin(span, n))
}
