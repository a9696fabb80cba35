// Package procstat reads this process's memory figures from Linux's /proc,
// for benchmarks that report peak resident memory.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the process's peak resident set (VmHWM) in bytes, 0 when
// unknown (not Linux, or /proc unreadable).
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ResetPeakRSS resets the kernel's peak-RSS mark, so PeakRSS measures from
// now (Linux; a no-op elsewhere).
func ResetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
