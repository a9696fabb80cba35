//go:build unix

package timeline

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system), for
// benchmarks on a shared machine, where wall time also counts the time
// other processes held the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
