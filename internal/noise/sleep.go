package noise

import (
	"runtime"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
)

// sleeper is the sleep source's loop: a goroutine on a thread of its own
// that sleeps a period at a time and counts how late each wake-up is.
type sleeper struct {
	quit chan struct{}
	done chan struct{}
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

// loop runs until halt. Locked to its thread, the goroutine wakes only
// when the kernel runs that thread, so a wake-up is late by the Go timer's
// delay, the scheduler's, and the kernel's keeping the thread off a CPU.
func (s *sleeper) loop(period time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	t := time.NewTimer(period)
	defer t.Stop()
	asked := time.Now()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			// Late until this goroutine ran, not until the timer fired
			// (the channel's value): read the clock here.
			s.hist.Add(int64(time.Since(asked) - period))
			if s.reached != nil && s.hist.N() == max(s.want, 1) {
				close(s.reached)
			}
			asked = time.Now()
			t.Reset(period)
		}
	}
}

// halt stops the loop and waits for it to end; hist is then the caller's.
func (s *sleeper) halt() {
	close(s.quit)
	<-s.done
}
