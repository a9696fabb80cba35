package stubserver

import (
	"sync"
	"testing/synctest"
)

// settler lets a virtual run's handlers decide after everything due at
// the current instant has happened. In a testing/synctest bubble a
// client's timeout and the end of its request's service often fall at the
// same instant; whether the response counts as delivered or abandoned
// would then depend on which goroutine runs first, and a seeded run would
// not replay. A handler that settles waits until every other goroutine
// of the bubble is durably blocked (synctest.Wait, on one goroutine, the
// only one that calls it), without the clock moving: a client that gave
// up at that instant has by then, and the response is abandoned, always.
type settler struct {
	once    sync.Once
	mu      sync.Mutex
	waiting []chan struct{}
	kick    chan struct{}
	closing <-chan struct{}
}

// settle returns once the bubble has settled at the current instant.
// Only in a bubble (Options.Virtual).
func (st *settler) settle() {
	st.once.Do(func() {
		st.kick = make(chan struct{}, 1)
		go st.run()
	})
	c := make(chan struct{})
	st.mu.Lock()
	st.waiting = append(st.waiting, c)
	st.mu.Unlock()
	select {
	case st.kick <- struct{}{}:
	default:
	}
	select {
	case <-c:
	case <-st.closing:
	}
}

func (st *settler) run() {
	for {
		select {
		case <-st.kick:
		case <-st.closing:
			return
		}
		synctest.Wait()
		st.mu.Lock()
		w := st.waiting
		st.waiting = nil
		st.mu.Unlock()
		for _, c := range w {
			close(c)
		}
	}
}
