package noise

import (
	"runtime"
	"sync"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
)

// sleeper is the sleep source's loop: a goroutine on a thread of its own
// that sleeps a period at a time and counts how late each wake-up is.
type sleeper struct {
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex    // guards hist while the loop runs (peek)
	hist *loghist.Hist // the loop's until done is closed
	// reached, when not nil, is closed once want wake-ups are counted.
	reached chan struct{}
	want    uint64
}

// startSleeper starts the loop; reached, when not nil, is closed once
// want wake-ups are counted.
func startSleeper(period time.Duration, want uint64, reached chan struct{}) *sleeper {
	s := &sleeper{quit: make(chan struct{}), done: make(chan struct{}), hist: loghist.New(lateLayout), want: want, reached: reached}
	go s.loop(period)
	return s
}

// loop runs until halt. Locked to its thread and sleeping in the kernel
// (nap), the goroutine wakes when the kernel runs that thread again and
// goes on once it has a Go processor back: a wake-up is late by the time
// the kernel kept the thread off a CPU (other processes, CPU hogs) and the
// time the Go scheduler kept it waiting.
func (s *sleeper) loop(period time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		default:
		}
		asked := time.Now()
		if !nap(period) {
			continue // cut short (a signal): no measure
		}
		late := int64(time.Since(asked) - period)
		s.mu.Lock()
		s.hist.Add(late)
		n := s.hist.N()
		s.mu.Unlock()
		if s.reached != nil && n == max(s.want, 1) {
			close(s.reached)
		}
	}
}

// halt stops the loop and waits for it to end (at most a period); hist is
// then the caller's.
func (s *sleeper) halt() {
	close(s.quit)
	<-s.done
}

// peek is a copy of the lateness counted so far, the loop going on.
func (s *sleeper) peek() *loghist.Hist {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist.Clone()
}
