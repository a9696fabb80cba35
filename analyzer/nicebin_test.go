package analyzer

import (
	"testing"
	"time"
)

// TestNiceBin: the one 1-2-5 bin rule picks the smallest width of the form
// {1,2,5}·10^k ns that covers the span in n bins.
func TestNiceBin(t *testing.T) {
	tests := []struct {
		span int64
		n    int
		want int64
	}{
		{0, 4096, 1},
		{4096, 4096, 1},
		{4097, 4096, 2},
		{2 * 4096, 4096, 2},
		{2*4096 + 1, 4096, 5},
		{5*4096 + 1, 4096, 10},
		{int64(time.Second), 1024, int64(time.Millisecond)},
		{int64(30 * time.Second), 1024, int64(50 * time.Millisecond)},
		{int64(time.Hour), loadBinCount, int64(time.Second)},
	}
	for _, tt := range tests {
		if got := NiceBin(tt.span, tt.n); got != tt.want {
			t.Errorf("NiceBin(%d, %d) = %d; want %d", tt.span, tt.n, got, tt.want)
		}
	}
}
