package runner

import (
	"os"
	"runtime"
	"testing"
)

// heapSink keeps the churn's allocations from being optimized away.
var heapSink []byte

// churnGCs allocates n bytes of short-lived garbage and returns how many
// collections ran meanwhile.
func churnGCs(n int) uint32 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n / (8 << 10) {
		heapSink = make([]byte, 8<<10)
	}
	runtime.ReadMemStats(&after)
	heapSink = nil
	return after.NumGC - before.NumGC
}

// TestHeapFloorSpacesCollections: while a real-time run holds the floor,
// garbage of 3 times the live heap (4 MiB at least) runs the collector
// at most once; without it, twice or more (GOGC=100 collects each time
// the heap doubles). A GOGC set in the environment is the user's tuning,
// which the floor leaves alone (TestHeapFloorLeavesGOGCAlone).
func TestHeapFloorSpacesCollections(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: the floor leaves it alone (TestHeapFloorLeavesGOGCAlone)")
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	live := max(int(m.HeapAlloc), 4<<20)
	if live > 30<<20 {
		t.Skipf("the test process holds %d MiB live: the floor's %d MiB would not cover 3 times that", live>>20, heapFloor>>20)
	}
	n := 3 * live
	without := churnGCs(n)
	if without < 2 {
		t.Fatalf("%d MiB of garbage over %d MiB live, without the floor, ran %d collections; want 2 or more (else this test shows nothing)", n>>20, live>>20, without)
	}
	release := keepHeapFloor()
	with := churnGCs(n)
	release()
	if with > 1 {
		t.Errorf("%d MiB of garbage with the floor held ran %d collections (%d without); want at most 1", n>>20, with, without)
	}
}

// TestHeapFloorLeavesGOGCAlone: with GOGC set in the environment the
// floor allocates nothing; without it, the whole floor. (Counting
// collections here would read the pacer, whose goal the floor just
// released may still hold under the race detector.)
func TestHeapFloorLeavesGOGCAlone(t *testing.T) {
	allocated := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.TotalAlloc
	}
	for _, gogc := range []string{"", "100", "off"} {
		t.Setenv("GOGC", gogc)
		before := allocated()
		release := keepHeapFloor()
		grew := allocated() - before
		release()
		held := grew >= heapFloor
		if want := gogc == ""; held != want || (!held && grew > heapFloor/8) {
			t.Errorf("GOGC=%q: the floor allocated %d MiB; want the floor held (%d MiB) only when GOGC is unset, else nothing", gogc, grew>>20, heapFloor>>20)
		}
	}
}

// TestHeapFloorShared: runs that overlap share one floor, dropped with
// the last release; a later run makes one again.
func TestHeapFloorShared(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: the floor leaves it alone")
	}
	allocated := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.TotalAlloc
	}
	before := allocated()
	r1 := keepHeapFloor()
	r2 := keepHeapFloor()
	if grew := allocated() - before; grew < heapFloor || grew >= 2*heapFloor {
		t.Errorf("two runs held floors of %d MiB; want one floor, %d MiB", grew>>20, heapFloor>>20)
	}
	r1()
	r1() // a second call of a release does nothing
	if floor.mem == nil {
		t.Error("the floor was dropped while a run still holds it")
	}
	r2()
	if floor.mem != nil || floor.holders != 0 {
		t.Errorf("after the last release: %d holders, floor kept %v; want none, dropped", floor.holders, floor.mem != nil)
	}
	before = allocated()
	keepHeapFloor()()
	if grew := allocated() - before; grew < heapFloor {
		t.Errorf("a run after the last release allocated %d MiB; want a floor of its own", grew>>20)
	}
}
