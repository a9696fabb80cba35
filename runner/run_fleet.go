// The fleet: clients launched at their arrival instants, and the wait
// for them until the run stops.

package runner

import (
	"context"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
)

// fleet starts every client at its arrival instant and waits for all.
//
// The launching runs on a goroutine of its own and the caller only waits:
// a launcher busy starting 100,000 goroutines gets a small share of the
// CPU, and the caller's wait must end at the cap whatever it is doing.
func (r *runner) fleet(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.launch(ctx, &wg)
	}()
	r.waitFleet(ctx, &wg)
}

// launch starts every client at its arrival instant, until ctx ends. A
// shard draws every client's arrival, in order, and starts its own: its
// clients arrive when they would in the whole fleet's run. With
// processes (fleet.processes), the instance of a client's process is
// made here, before its first client starts (processCaller).
func (r *runner) launch(ctx context.Context, wg *sync.WaitGroup) {
	sc := r.sc
	arrivals := newArrivals(sc.Fleet.Start, sc.Fleet.Clients, r.opts.Seed)
	shared := r.shared()
	for i := range sc.Fleet.Clients {
		at := arrivals.next() + time.Duration(i)*r.opts.Stagger
		if !r.opts.Shard.Has(i) {
			continue
		}
		if d := at - time.Since(r.start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		// Launch no further ahead of the scheduler than launchBacklog
		// clients: a burst of a million would otherwise queue a million
		// goroutines that have not run yet, and everything the runner
		// does after them (seal at the cap) would wait behind them. The
		// clients start late either way; their lateness is recorded.
		for r.unstarted.Load() >= launchBacklog && ctx.Err() == nil && !r.sealed.Load() {
			runtime.Gosched()
		}
		if ctx.Err() != nil || r.sealed.Load() {
			return
		}
		var caller subjects.Caller // nil: the client makes its own
		if shared {
			caller = r.processCaller(i)
		}
		wg.Add(1)
		r.unstarted.Add(1)
		go func() {
			r.unstarted.Add(-1)
			r.client(ctx, i, at, caller, wg.Done)
		}()
	}
}

// launchBacklog is how many launched clients may wait for their first
// run at once (see launch).
const launchBacklog = 1024

// fleetGrace bounds how long an exec fleet may take to wind down once the
// run has stopped (on top of exec's 1 s WaitDelay); processes still running
// after it are left behind, their requests in flight.
const fleetGrace = StopGrace / 2

// waitFleet waits for the fleet's goroutines until the run stops (ctx
// ends, or the cap passes): seal then records what is still in flight,
// whether or not its goroutine has been scheduled since.
func (r *runner) waitFleet(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	// A timer of our own for the cap, not ctx's: the goroutine a timed
	// context cancels from can be scheduled late when 100,000 clients
	// compete for the CPU, while this one is readied by the timer itself.
	hard := time.NewTimer(time.Until(r.capAt))
	defer hard.Stop()
	select {
	case <-done:
	case <-hard.C:
	case <-ctx.Done():
	}
}

// arrivals yields the fleet's start instants in order.
type arrivals struct {
	a     scenarios.Arrival
	n, i  int
	rand  *rand.Rand
	clock time.Duration
}

func newArrivals(a scenarios.Arrival, n int, seed int64) *arrivals {
	return &arrivals{a: a, n: n, rand: rand.New(rand.NewPCG(uint64(seed), 0xa771_7a15))}
}

// next returns the next client's start instant, relative to the run start.
func (a *arrivals) next() time.Duration {
	i := a.i
	a.i++
	switch a.a.Kind {
	case scenarios.ArrivalRamp:
		if a.n <= 1 {
			return 0
		}
		return time.Duration(float64(a.a.Over) * float64(i) / float64(a.n-1))
	case scenarios.ArrivalPoisson:
		if i == 0 {
			return 0
		}
		gap := a.rand.ExpFloat64() / a.a.Rate * float64(time.Second)
		a.clock += time.Duration(math.Min(gap, float64(scenarios.MaxDuration)))
		return a.clock
	}
	return 0
}
