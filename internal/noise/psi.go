package noise

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// psiPath is Linux's CPU pressure file (kernel 4.20+ with PSI enabled).
const psiPath = "/proc/pressure/cpu"

// readPSI is the CPU pressure's "some" total, µs; -1 when unknown.
func readPSI() int64 {
	b, err := os.ReadFile(psiPath)
	if err != nil {
		return -1
	}
	total, ok := parsePSI(b)
	if !ok {
		return -1
	}
	return total
}

// parsePSI reads the "some" line's total (µs) from the contents of a PSI
// file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// False when there is no "some" line with a non-negative integer total.
func parsePSI(b []byte) (int64, bool) {
	for line := range bytes.Lines(b) {
		fields := bytes.Fields(line)
		if len(fields) == 0 || string(fields[0]) != "some" {
			continue
		}
		for _, f := range fields[1:] {
			v, ok := bytes.CutPrefix(f, []byte("total="))
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return 0, false
			}
			return n, true
		}
		return 0, false
	}
	return 0, false
}

// pressure is the share of wall (percent, 0–100) that the "some" total
// grew by from before to after (µs); 0 when either is unknown, the total
// went back, or no time passed.
func pressure(before, after int64, wall time.Duration) float64 {
	us := wall.Microseconds()
	if before < 0 || after < before || us <= 0 {
		return 0
	}
	return min(float64(after-before)/float64(us)*100, 100)
}
