package runner

import (
	"os"
	"sync"
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
//
// Runs that overlap share one floor, made by the first and dropped by the
// last release. A floor made again reuses freed heap, which the runtime
// zeroes (and so makes resident) where fresh memory needs nothing: a
// caller that runs many runs in a row may hold one across them.
func keepHeapFloor() (release func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	floor.Lock()
	if floor.holders == 0 {
		floor.mem = make([]byte, heapFloor)
	}
	floor.holders++
	floor.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			floor.Lock()
			if floor.holders--; floor.holders == 0 {
				floor.mem = nil
			}
			floor.Unlock()
		})
	}
}

// floor is the heap floor held, and by how many.
var floor struct {
	sync.Mutex
	holders int
	mem     []byte
}
