//go:build !unix

package stubserver

import "time"

// processCPU is unknown here; the CPU figures read 0.
func processCPU() time.Duration { return 0 }
