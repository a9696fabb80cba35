//go:build !unix

package runner

import "time"

// cpuTime is unknown here (control_bench_test.go has it on unix): 0.
func cpuTime() time.Duration { return 0 }
