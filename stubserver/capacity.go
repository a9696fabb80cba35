package stubserver

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a Server's finite capacity: workers, the queue of requests
// waiting for one, and the source of service times. One mutex guards it;
// a request that finds a free worker takes it under the lock and pays no
// allocation.
type pool struct {
	cfg     Capacity
	lifo    bool
	cancel  bool
	workers []int // per phase: the workers it runs with
	scaled  bool  // some phase runs with fewer than Concurrency

	mu         sync.Mutex
	busy       int
	queued     int     // waiters in the list
	head, tail *waiter // oldest, newest
	rand       *rand.Rand
	timer      *time.Timer // armed while requests wait and a later phase changes the workers

	// Read by Counts without the lock.
	nBusy, nQueued    atomic.Int64
	rejected, dropped atomic.Uint64
	serviceNs         atomic.Int64 // service given, all requests
	wastedNs          atomic.Int64 // service given to requests recorded abandoned
}

// waiter is one request in the queue.
type waiter struct {
	prev, next *waiter
	ready      chan struct{} // closed when a worker is granted
	granted    bool          // under pool.mu
	service    time.Duration // drawn at the grant
}

// admission is what the pool made of a request.
type admission int

const (
	admitted admission = iota // it held a worker for its service time
	rejected                  // the queue was full: 503
	dropped                   // its client had gone (CancelOnDisconnect): no service
	released                  // the server stopped while it waited: 503
)

func newPool(k Capacity, phases []phase, seed int64) *pool {
	p := &pool{
		cfg:    k,
		lifo:   k.Discipline == DisciplineLIFO,
		cancel: k.CancelOnDisconnect,
		rand:   rand.New(rand.NewPCG(uint64(seed), 0xca9a_c17e)),
	}
	for _, ph := range phases {
		n := scaledWorkers(k.Concurrency, ph.Capacity)
		p.workers = append(p.workers, n)
		p.scaled = p.scaled || n != k.Concurrency
	}
	return p
}

// scaledWorkers is n scaled by share (0: unscaled), rounded to the nearest
// whole worker, at least 1.
func scaledWorkers(n int, share float64) int {
	if share <= 0 || share >= 1 {
		return n
	}
	return max(1, int(math.Round(float64(n)*share)))
}

// draw is a service time. Under p.mu, so the draws follow the pool's
// order of grants and a seeded run replays.
func (p *pool) draw() time.Duration {
	m := p.cfg.Service
	if m <= 0 {
		return 0
	}
	switch p.cfg.Dist {
	case DistExponential:
		return time.Duration(min(p.rand.ExpFloat64(), 50) * float64(m))
	case DistUniform:
		return time.Duration(p.rand.Int64N(2*int64(m) + 1))
	}
	return m
}

// workersAt is the number of workers at run instant at.
func (s *Server) workersAt(at int64) int {
	if !s.pool.scaled {
		return s.pool.cfg.Concurrency
	}
	i, _ := s.phaseAt(at)
	return s.pool.workers[i]
}

// nextChange is the start of the first phase after at that runs with
// another number of workers than the phase holding at (0: none).
func (s *Server) nextChange(at int64) int64 {
	i, _ := s.phaseAt(at)
	for j := i + 1; j < len(s.phases); j++ {
		if s.pool.workers[j] != s.pool.workers[i] {
			return s.phases[j].start
		}
	}
	return 0
}

// serve runs a request through the pool: it takes a worker at once when
// one is free (and nobody waits), else waits in the queue for one, or is
// rejected with the queue full. Once granted, it holds the worker for its
// service time (cut short when the server stops) whether or not its client
// is still there. It returns what happened and the time queued and served.
func (s *Server) serve(ctx context.Context) (adm admission, queued, service time.Duration) {
	p := s.pool
	if p.cancel && ctx.Err() != nil {
		p.dropped.Add(1)
		return dropped, 0, 0
	}
	if s.isStopping() {
		return released, 0, 0
	}
	p.mu.Lock()
	workers, now := p.cfg.Concurrency, int64(-1)
	if p.scaled {
		now = int64(time.Since(s.start))
		workers = s.workersAt(now)
	}
	if p.queued > 0 {
		p.dispatch(workers)
	}
	var d time.Duration
	if p.busy < workers {
		d = p.draw()
		if d == 0 {
			// Served in no time: the worker is free again at once.
			p.mu.Unlock()
			return admitted, 0, 0
		}
		p.busy++
		p.nBusy.Store(int64(p.busy))
		p.mu.Unlock()
	} else {
		if p.queued >= p.cfg.Queue {
			p.mu.Unlock()
			p.rejected.Add(1)
			return rejected, 0, 0
		}
		if now < 0 {
			now = int64(time.Since(s.start))
		}
		w := &waiter{ready: make(chan struct{})}
		p.push(w)
		s.armChange(now)
		p.mu.Unlock()
		began := time.Now()
		var gone <-chan struct{}
		if p.cancel {
			gone = ctx.Done()
		}
		select {
		case <-w.ready:
		case <-gone:
		case <-s.stopping:
		}
		p.mu.Lock()
		if !w.granted {
			p.remove(w)
			p.mu.Unlock()
			queued = time.Since(began)
			select {
			case <-s.stopping:
				return released, queued, 0
			default:
			}
			p.dropped.Add(1)
			return dropped, queued, 0
		}
		d = w.service
		p.mu.Unlock()
		queued = time.Since(began)
	}
	if d > 0 {
		began := time.Now()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.stopping:
		}
		t.Stop()
		service = time.Since(began)
	}
	p.serviceNs.Add(int64(service))
	p.mu.Lock()
	p.busy--
	if p.queued > 0 && !s.isStopping() {
		p.dispatch(s.workersAt(int64(time.Since(s.start))))
	}
	p.nBusy.Store(int64(p.busy))
	p.mu.Unlock()
	return admitted, queued, service
}

// isStopping reports whether Seal, Close or Shutdown has begun: from then
// on the pool starts no service.
func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// dispatch grants free workers to waiters, in discipline order, while
// fewer than workers are busy. Under p.mu.
func (p *pool) dispatch(workers int) {
	for p.busy < workers && p.queued > 0 {
		w := p.head
		if p.lifo {
			w = p.tail
		}
		p.remove(w)
		w.granted = true
		w.service = p.draw()
		p.busy++
		close(w.ready)
	}
	p.nBusy.Store(int64(p.busy))
	if p.queued == 0 && p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// armChange arms the timer that re-dispatches at the next phase boundary
// that changes the workers, so waiters meet a capacity that grows back at
// once. Under p.mu, with requests waiting.
func (s *Server) armChange(now int64) {
	p := s.pool
	if p.timer != nil {
		return
	}
	at := s.nextChange(now)
	if at == 0 {
		return
	}
	p.timer = time.AfterFunc(time.Duration(at-now), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.timer = nil
		if s.isStopping() {
			return
		}
		now := int64(time.Since(s.start))
		p.dispatch(s.workersAt(now))
		if p.queued > 0 {
			s.armChange(now)
		}
	})
}

// push appends w at the newest end of the queue. Under p.mu.
func (p *pool) push(w *waiter) {
	w.prev = p.tail
	if p.tail != nil {
		p.tail.next = w
	} else {
		p.head = w
	}
	p.tail = w
	p.queued++
	p.nQueued.Store(int64(p.queued))
}

// remove takes w out of the queue. Under p.mu.
func (p *pool) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		p.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		p.tail = w.prev
	}
	w.prev, w.next = nil, nil
	p.queued--
	p.nQueued.Store(int64(p.queued))
}
