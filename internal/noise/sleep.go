package noise

import (
	"runtime"
	"sync"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
)

// sleeper is a sleep loop: a goroutine that sleeps a period at a time and
// counts how late each wake-up is.
type sleeper struct {
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex    // guards hist while the loop runs (peek)
	hist *loghist.Hist // the loop's until done is closed
	// reached, when not nil, is closed once want wake-ups are counted.
	reached chan struct{}
	want    uint64
}

// How a sleeper sleeps.
const (
	// onTimer sleeps on a Go timer, on no thread of its own: a wake-up
	// is late by the timer's delay, the time the Go scheduler kept the
	// goroutine waiting, and the time the kernel kept the process's
	// threads off a CPU — what a client goroutine's retry delay meets. It
	// holds no Go processor while it sleeps: the meter of a process that
	// runs a fleet.
	onTimer = false
	// inKernel sleeps in the kernel (nanosleep) on a thread locked to
	// the goroutine: a wake-up is late by the time the kernel kept that
	// thread off a CPU, as any program's sleeping thread. The Go
	// processor stays with the thread while it sleeps (the runtime takes
	// it back only after up to 10 ms), so it is for a process that does
	// nothing else: the probe.
	inKernel = true
)

// startSleeper starts the loop, sleeping inKernel or onTimer; reached,
// when not nil, is closed once want wake-ups are counted.
func startSleeper(period time.Duration, kernel bool, want uint64, reached chan struct{}) *sleeper {
	s := &sleeper{quit: make(chan struct{}), done: make(chan struct{}), hist: loghist.New(lateLayout), want: want, reached: reached}
	if kernel {
		go s.napLoop(period)
	} else {
		go s.timerLoop(period)
	}
	return s
}

// timerLoop runs until halt, sleeping on a timer.
func (s *sleeper) timerLoop(period time.Duration) {
	defer close(s.done)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		asked := time.Now()
		t.Reset(period)
		select {
		case <-s.quit:
			// The period under way is measured, as napLoop's: a
			// measure shorter than a period still has its sample.
			<-t.C
			s.add(int64(time.Since(asked) - period))
			return
		case <-t.C:
			// Late until this goroutine ran, not until the timer fired
			// (the channel's value): read the clock here.
			s.add(int64(time.Since(asked) - period))
		}
	}
}

// napLoop runs until halt, sleeping in the kernel on a locked thread.
func (s *sleeper) napLoop(period time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	for {
		asked := time.Now()
		if nap(period) { // else cut short (a signal): no measure
			s.add(int64(time.Since(asked) - period))
		}
		select {
		case <-s.quit:
			return
		default:
		}
	}
}

// add counts a wake-up late by late ns.
func (s *sleeper) add(late int64) {
	s.mu.Lock()
	s.hist.Add(late)
	n := s.hist.N()
	s.mu.Unlock()
	if s.reached != nil && n == max(s.want, 1) {
		close(s.reached)
	}
}

// halt stops the loop and waits for it to end, the period under way
// measured (at most a period); hist is then the caller's. A nil sleeper
// (Options.NoSleep) has nothing to stop.
func (s *sleeper) halt() {
	if s == nil {
		return
	}
	close(s.quit)
	<-s.done
}

// peek is a copy of the lateness counted so far, the loop going on.
func (s *sleeper) peek() *loghist.Hist {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist.Clone()
}
