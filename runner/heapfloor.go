package runner

import (
	"os"
	"runtime"
)

// heapFloor is the heap a real-time run keeps live for its duration
// without touching it (keepHeapFloor).
const heapFloor = 64 << 20

// keepHeapFloor raises the heap the collector paces itself on by
// heapFloor until the returned func is called, so that the collector runs
// about every heapFloor of allocation instead of every few MiB of a run's
// small live heap. Why: on a host short of CPU a collection waits for
// descheduled threads and stalls the whole process, stub and fleet, for
// tens of ms: noise the harness makes itself, which tipped metastable's
// stub into overload before its trigger (BENCHMARKS.md, "The retries
// vouch for a PASS"). The floor is never written, so it takes no resident
// memory; the rarer collections let at most heapFloor more garbage stay.
// A GOGC set in the environment is the user's tuning and is left alone.
func keepHeapFloor() (release func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	floor := make([]byte, heapFloor)
	return func() { runtime.KeepAlive(floor) }
}
