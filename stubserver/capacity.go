package stubserver

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
	ends       ends    // the busy workers' service ends, soonest first
	seq        uint64  // holds so far: orders ends that fall at one instant
	virtual    bool    // admit requests in turn (see Server.inTurn)
	turn       []*ticket
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
	hold       *hold         // the worker granted (nil: served in no time)
	at         int64         // run instant of the grant
}

// hold is a worker held for one request's service, until end (run
// instant, ns).
//
// A worker is free at its service's end whichever goroutine notices
// first: the request's own, when its timer fires, or any request arriving
// at or after that instant, which releases every hold that has ended
// before it looks at the workers. So what a request finds does not depend
// on the order in which goroutines run at one instant — in virtual time
// (a synctest bubble) many events share an instant, and a seeded run
// must replay: a request arriving at the instant a service ends finds
// that worker free, always.
type hold struct {
	end      int64
	seq      uint64
	index    int  // in pool.ends
	released bool // under pool.mu
}

// ends is a min-heap of holds by end, then by the order they were taken.
type ends []*hold

func (h ends) Len() int { return len(h) }
func (h ends) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].seq < h[j].seq
}
func (h ends) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *ends) Push(x any) {
	x.(*hold).index = len(*h)
	*h = append(*h, x.(*hold))
}
func (h *ends) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// admission is what the pool made of a request.
type admission int

const (
	admitted admission = iota // it held a worker for its service time
	rejected                  // the queue was full: 503
	dropped                   // its client had gone (CancelOnDisconnect): no service
	released                  // the server stopped while it waited: 503
)

func newPool(k Capacity, phases []phase, seed int64, virtual bool) *pool {
	p := &pool{
		virtual: virtual,
		cfg:     k,
		lifo:    k.Discipline == DisciplineLIFO,
		cancel:  k.CancelOnDisconnect,
		rand:    rand.New(rand.NewPCG(uint64(seed), 0xca9a_c17e)),
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
// order ranks the request among those arriving at the same instant of a
// virtual run (see inTurn).
//
// waited is how long the request waited in its socket before the stub
// read it (Attempt.Waited): the pool takes it as arriving that much
// earlier, when the kernel received it, so the stub's own lateness in
// reading its sockets neither queues requests nor shrinks its capacity.
func (s *Server) serve(ctx context.Context, order string, waited time.Duration) (adm admission, queued, service time.Duration) {
	p := s.pool
	if p.cancel && ctx.Err() != nil {
		p.dropped.Add(1)
		return dropped, 0, 0
	}
	if s.isStopping() {
		return released, 0, 0
	}
	arrived := max(0, int64(time.Since(s.start)-waited))
	var (
		h *hold
		w *waiter
	)
	if p.virtual {
		h, w, adm = s.inTurn(arrived, order)
	} else {
		p.mu.Lock()
		h, w, adm = s.admit(arrived)
		p.mu.Unlock()
	}
	if adm != admitted {
		return adm, 0, 0
	}
	granted := arrived
	if w != nil {
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
			queued = time.Since(s.start) - time.Duration(arrived)
			select {
			case <-s.stopping:
				return released, queued, 0
			default:
			}
			p.dropped.Add(1)
			return dropped, queued, 0
		}
		h, granted = w.hold, w.at
		p.mu.Unlock()
		queued = time.Duration(granted - arrived)
	}
	if h == nil {
		return admitted, queued, 0 // served in no time
	}
	// The service: until the hold's end, unless another request released
	// it first (the end has passed) or the server stops.
	if d := time.Duration(h.end - int64(time.Since(s.start))); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.stopping:
		}
		t.Stop()
	}
	now := int64(time.Since(s.start))
	service = time.Duration(min(now, h.end) - granted)
	p.serviceNs.Add(int64(service))
	p.mu.Lock()
	p.flushBefore(s, now) // may release h: an arrival in turn at or after its end
	if !h.released {
		heap.Remove(&p.ends, h.index)
		p.release(h)
		if p.queued > 0 && !s.isStopping() {
			at := min(h.end, now)
			p.dispatch(s.workersAt(at), at)
		}
	}
	p.mu.Unlock()
	if service == 0 && s.isStopping() {
		// Granted at the instant the server stopped: no service began, so
		// the request was released, whichever goroutine ran first then.
		return released, queued, 0
	}
	return admitted, queued, service
}

// admit is the pool's decision for a request arriving at run instant now:
// a worker held (h; nil when served in no time), a place in the queue (w),
// or rejected with the queue full. Under p.mu.
func (s *Server) admit(now int64) (h *hold, w *waiter, adm admission) {
	p := s.pool
	p.flushBefore(s, now)
	p.releaseEnded(s, now)
	workers := s.workersAt(now)
	if p.queued > 0 {
		p.dispatch(workers, now)
	}
	if p.busy < workers {
		if d := p.draw(); d > 0 {
			h = p.take(now + int64(d))
		}
		return h, nil, admitted
	}
	if p.queued >= p.cfg.Queue {
		p.rejected.Add(1)
		return nil, nil, rejected
	}
	w = &waiter{ready: make(chan struct{})}
	p.push(w)
	s.armChange(now)
	return nil, w, admitted
}

// ticket is a request waiting for its turn in a virtual run.
type ticket struct {
	at    int64
	order string
	ready chan struct{} // closed once admitted
	h     *hold
	w     *waiter
	adm   admission
}

// inTurn admits a request of a virtual run in its turn. In a synctest
// bubble many requests arrive at one instant and the goroutines run in
// any order, so admitting each as it comes would make a seeded run's
// queue order, rejections and service draws differ from one run to the
// next. Instead the requests arriving at one instant wait a nanosecond,
// by which time every one of them has arrived (the bubble's clock moves
// only when all its goroutines are blocked), and are admitted in order,
// as arriving at that instant. Whatever touches the pool at a later
// instant — a service ending, the next arrival, a phase change — admits
// the waiting ones first, so the pool's state is always that of the
// instant it is looked at.
func (s *Server) inTurn(at int64, order string) (*hold, *waiter, admission) {
	p := s.pool
	t := &ticket{at: at, order: order, ready: make(chan struct{})}
	p.mu.Lock()
	p.flushBefore(s, at)
	p.turn = append(p.turn, t)
	if len(p.turn) == 1 {
		time.AfterFunc(time.Nanosecond, func() {
			p.mu.Lock()
			p.flushBefore(s, at+1)
			p.mu.Unlock()
		})
	}
	p.mu.Unlock()
	<-t.ready
	return t.h, t.w, t.adm
}

// flushBefore admits the requests waiting for their turn that arrived
// before run instant now, in order. Under p.mu.
func (p *pool) flushBefore(s *Server, now int64) {
	if len(p.turn) == 0 || p.turn[0].at >= now {
		return
	}
	turn := p.turn
	p.turn = nil
	slices.SortFunc(turn, func(a, b *ticket) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.order, b.order)
	})
	for _, t := range turn {
		t.h, t.w, t.adm = s.admit(t.at)
		close(t.ready)
	}
}

// take holds a worker until end. Under p.mu.
func (p *pool) take(end int64) *hold {
	p.seq++
	h := &hold{end: end, seq: p.seq}
	heap.Push(&p.ends, h)
	p.busy++
	p.nBusy.Store(int64(p.busy))
	return h
}

// release frees h's worker; h is out of p.ends. Under p.mu.
func (p *pool) release(h *hold) {
	h.released = true
	p.busy--
	p.nBusy.Store(int64(p.busy))
}

// releaseEnded frees every worker whose service ended at or before now,
// soonest first, each granting the queue's next waiters at the instant it
// ended. Under p.mu.
func (p *pool) releaseEnded(s *Server, now int64) {
	for len(p.ends) > 0 && p.ends[0].end <= now {
		h := heap.Pop(&p.ends).(*hold)
		p.release(h)
		if p.queued > 0 && !s.isStopping() {
			p.dispatch(s.workersAt(h.end), h.end)
		}
	}
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
// fewer than workers are busy, at run instant at. Under p.mu.
func (p *pool) dispatch(workers int, at int64) {
	for p.busy < workers && p.queued > 0 {
		w := p.head
		if p.lifo {
			w = p.tail
		}
		p.remove(w)
		w.granted = true
		w.service, w.at = p.draw(), at
		if w.service > 0 {
			w.hold = p.take(at + int64(w.service))
		}
		close(w.ready)
	}
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
		p.flushBefore(s, now)
		p.releaseEnded(s, now)
		p.dispatch(s.workersAt(now), now)
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
