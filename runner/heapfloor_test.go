package runner

import (
	"os"
	"runtime"
	"testing"
)

// heapSink keeps the churn's allocations from being optimized away.
var heapSink []byte

// churnGCs allocates 16 MiB of short-lived garbage and returns how many
// collections ran meanwhile.
func churnGCs() uint32 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 2048 {
		heapSink = make([]byte, 8<<10)
	}
	runtime.ReadMemStats(&after)
	heapSink = nil
	return after.NumGC - before.NumGC
}

// TestHeapFloorSpacesCollections: while a real-time run holds the floor,
// 16 MiB of garbage runs the collector at most once (without it, every
// few MiB); a GOGC set in the environment is the user's tuning, and the
// floor then holds nothing.
func TestHeapFloorSpacesCollections(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: the floor leaves it alone (tested below with t.Setenv)")
	}
	without := churnGCs()
	if without < 2 {
		t.Fatalf("16 MiB of garbage without the floor ran %d collections; want 2 or more (else this test shows nothing)", without)
	}
	release := keepHeapFloor()
	with := churnGCs()
	release()
	if with > 1 {
		t.Errorf("16 MiB of garbage with the floor held ran %d collections (%d without); want at most 1", with, without)
	}

	t.Setenv("GOGC", "100")
	release = keepHeapFloor()
	if n := churnGCs(); n < 2 {
		t.Errorf("GOGC set: 16 MiB of garbage ran %d collections with the floor asked for; want it not held (2 or more)", n)
	}
	release()
}
