// How a run ends: each goroutine client's slot, seal (what is in flight
// when the run stops becomes "canceled"), the outcome counts, and the end
// record.

package runner

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

var resultNames = [...]string{
	timeline.ResultOK, timeline.ResultGaveUp, timeline.ResultBudget, timeline.ResultNonRetryable,
	timeline.ResultError, timeline.ResultHung, timeline.ResultCanceled,
}

// resultIndex is s's index in resultNames; an unknown result counts as
// an error.
func resultIndex(s string) int {
	for i, n := range resultNames {
		if n == s {
			return i
		}
	}
	return resultIndex(timeline.ResultError)
}

// slot is one goroutine client's logical request in flight. A goroutine
// client claims the right to write each outcome from its slot, and seal
// takes the slots of requests still in flight and records them canceled
// itself, at once, without waiting for (possibly 100,000) client
// goroutines to be scheduled. The slot is lock-free: with 100,000
// goroutines competing for the CPU, seal must never wait for a client
// that was preempted holding a lock.
type slot struct {
	state atomic.Int32 // slotIdle, slotActive, slotTaken, slotClosed
	out   timeline.Outcome
}

const (
	slotIdle   = iota // no request in flight
	slotActive        // a request in flight; out describes it
	slotTaken         // seal recorded the request in flight canceled
	slotClosed        // seal found the slot idle: start nothing more
)

// begin marks o in flight; false when the run is sealed (start nothing).
func (s *slot) begin(o *timeline.Outcome) bool {
	s.out = *o // only the client touches out while the slot is idle
	return s.state.CompareAndSwap(slotIdle, slotActive)
}

// end records o, the outcome of the request in flight; false when seal
// already recorded it canceled (the client must stop).
func (s *slot) end(r *runner, o *timeline.Outcome) bool {
	// Once the run is sealed, seal records the request (its slot is still
	// active, so seal's walk takes it): a client woken by the stop does not
	// touch writing, so seal's wait below never waits for the thousands
	// of clients the stop wakes at once, only for claims made before it.
	if r.sealed.Load() {
		return false
	}
	// Counted before the claim, so that seal, which waits for writing to
	// drop to zero after its pass, never closes the recorder under a
	// write it let through; sealed is read again after the count, so a
	// claim either precedes seal (and is waited for) or is left to it.
	r.writing.Add(1)
	defer r.writing.Add(-1)
	if r.sealed.Load() {
		return false
	}
	if !s.state.CompareAndSwap(slotActive, slotIdle) {
		return false
	}
	r.finish(o)
	return true
}

// seal stops the fleet for good: no request starts after it, and every
// goroutine client's request still in flight gets a "canceled" outcome
// ending at now (when the run stopped),
// counted now and returned for the caller to write once the recorder is
// closed (straight to the encoder: no goroutine but the caller's need be
// scheduled). It then waits for the outcome writes clients claimed before
// it; after it returns no goroutine client writes an outcome.
func (r *runner) seal(now int64) []timeline.Outcome {
	if !r.sealed.Swap(true) && r.turnsOff != nil {
		close(r.turnsOff)
	}
	// A million slots take a processor most of a second to walk: each
	// processor walks a part (the fleet, held by the stub, is quiet by
	// now), and the parts join in slot order.
	n := min(runtime.GOMAXPROCS(0), max(1, len(r.slots)/sealPart))
	parts := make([][]timeline.Outcome, n)
	if n == 1 {
		parts[0] = r.sealSlots(r.slots, now)
	} else {
		var wg sync.WaitGroup
		for p := range n {
			lo, hi := len(r.slots)*p/n, len(r.slots)*(p+1)/n
			wg.Go(func() { parts[p] = r.sealSlots(r.slots[lo:hi], now) })
		}
		wg.Wait()
	}
	pending := slices.Concat(parts...)
	for r.writing.Load() > 0 {
		time.Sleep(time.Millisecond) // writers wait for the recorder, which drains
	}
	return pending
}

// sealPart is the fewest slots worth a walker of their own.
const sealPart = 1 << 16

// sealSlots closes each of slots, taking the requests in flight: their
// canceled outcomes, counted.
func (r *runner) sealSlots(slots []slot, now int64) []timeline.Outcome {
	var pending []timeline.Outcome
	for i := range slots {
		s := &slots[i]
		for {
			if s.state.CompareAndSwap(slotIdle, slotClosed) {
				break
			}
			if s.state.CompareAndSwap(slotActive, slotTaken) {
				o := s.out
				o.End, o.Result, o.Error = max(now, o.Start), timeline.ResultCanceled, "the run stopped"
				r.count(&o)
				pending = append(pending, o)
				break
			}
			// The client moved between idle and active: look again.
		}
	}
	return pending
}

// finish records o. Goroutine clients call it once their slot has let them
// (see slot), exec fleets from the runner's goroutine before seal.
func (r *runner) finish(o *timeline.Outcome) {
	if r.rec != nil {
		r.rec.Outcome(o)
	}
	r.count(o)
}

// count adds o to the run's totals.
func (r *runner) count(o *timeline.Outcome) {
	if o.Result == timeline.ResultCanceled {
		r.inFlight.Add(1)
	}
	if o.Harness {
		r.harness.Add(1)
	}
	r.results[resultIndex(o.Result)].Add(1)
	r.done.Add(1)
}

// stopReason is why the run stopped, judged once the stub has shut down:
// a timeline write error, then the caller's context (a signal), then the
// cap when requests were left; and the end record it starts.
func (r *runner) stopReason(ctx context.Context, stoppedAt int64) (stopped string, end timeline.End) {
	end = timeline.End{At: stoppedAt, Reason: timeline.EndCompleted}
	stopped = StoppedDone
	switch {
	case r.rec != nil && r.rec.Err() != nil:
		stopped, end.Reason = StoppedWriteError, timeline.EndWriteError
		end.Errors = append(end.Errors, r.rec.Err().Error())
	case ctx.Err() != nil:
		stopped, end.Reason = StoppedCanceled, timeline.EndInterrupted
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) {
			end.Signal = in.Signal
		}
	case r.inFlight.Load() > 0 || r.done.Load() < r.total:
		// The cap, whether or not its context has noticed yet.
		stopped, end.Reason = StoppedDuration, timeline.EndDuration
	}
	return stopped, end
}

// fillEnd completes the end record once the fleet and the stub are done:
// what was in flight or never started, the harness's dial errors and
// problems, when an exec fleet was ready, the stub's shutdown error, the
// host's noise (nil in a virtual run).
func (r *runner) fillEnd(end *timeline.End, pf *programFleet, shErr error) {
	end.Noise = r.meter.Stop() // stopped when the fleet stopped: its measure
	end.InFlight = r.inFlight.Load() + r.dropped.Load()
	end.Unstarted = max(0, r.total-r.done.Load()-r.dropped.Load())
	end.DialErrors = r.dialErrors.Load()
	if pf != nil {
		// An exec fleet's start barrier; a goroutine fleet has none (its
		// schedule is not its readiness), and records no fleet_ready.
		end.FleetReady = pf.readyAt
		if h := pf.readerLag; end.Noise != nil && h.N() > 0 {
			end.Noise.ReaderP90, end.Noise.ReaderP99 = h.Quantile(0.90), h.Quantile(0.99)
		}
	}
	r.errMu.Lock()
	end.Errors = append(end.Errors, r.harnessErrs...)
	r.errMu.Unlock()
	if shErr != nil {
		end.Errors = append(end.Errors, shErr.Error())
	}
}

// writeEnd writes, once the recorder is closed (the encoder is the
// runner's again), the outcomes seal recorded canceled, then the end
// record, and flushes.
func writeEnd(enc *timeline.Encoder, pending []timeline.Outcome, end *timeline.End) error {
	for i := range pending {
		if err := enc.EncodeOutcome(&pending[i]); err != nil {
			return err
		}
	}
	if err := enc.EncodeEnd(end); err != nil {
		return err
	}
	return enc.Flush()
}

// summary is what the run did, once it is over.
func (r *runner) summary(elapsed, flushed time.Duration, stopped string, end timeline.End) *Summary {
	st := r.stubStats()
	sum := &Summary{
		Scenario: r.sc.Name, Subject: r.subj.Name(), Seed: r.opts.Seed, Clients: r.opts.Shard.Clients(r.sc.Fleet.Clients),
		Shard: r.opts.Shard.String(), Target: r.opts.Target,
		Planned: r.total, Requests: r.done.Load(), Results: map[string]int64{},
		Attempts: st.Attempts, Throttled429: st.Throttled429, Unavailable503: st.Unavailable503,
		Elapsed: elapsed, Flushed: flushed, Stopped: stopped, End: end, Harness: r.harness.Load(), Shed: r.shed.Load(), StartLateness: summarizeLateness(r.late),
	}
	for i := range r.results {
		if n := r.results[i].Load(); n > 0 {
			sum.Results[resultNames[i]] = n
		}
	}
	return sum
}
