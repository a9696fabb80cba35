package procstat

import (
	"runtime"
	"testing"
)

// TestPeakRSS: on Linux the peak covers at least a buffer just touched.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ResetPeakRSS()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	if got := PeakRSS(); got < 64<<20 {
		t.Errorf("PeakRSS() = %d after touching 64 MiB; want at least that", got)
	}
	runtime.KeepAlive(buf)
}
