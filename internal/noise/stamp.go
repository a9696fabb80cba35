package noise

import (
	"cmp"
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Stamps measures how long a server's arrivals waited in their sockets
// before it read them, and tells it each one's wait so that it can stamp
// the arrival at the kernel's receipt instead: the stub's own lateness
// then moves no arrival. A server short of CPU leaves requests in its
// sockets and then reads a backlog of them at once; stamped when read,
// they would bunch though the clients sent them apart, and arrive late by
// the server's lateness, not the clients'.
//
// For each arrival, Observe asks the kernel how long ago the request's
// connection last received data (Linux TCP_INFO tcpi_last_data_recv, in
// whole kernel ticks: 4 ms at HZ=250). A reading of k ticks means the
// request waited between k-1 and k+1 ticks; Observe returns the lower
// bound, so an arrival moved back by it is never placed before its
// receipt, and an arrival read a tick late only because a tick fell
// between its receipt and its stamp is not moved. The tick is the
// smallest non-zero reading seen (never below the true tick, so the bound
// stays a lower bound before the true tick has been seen).
//
// The waits are evidence of how far behind the server ran (Noise.SocketP90
// and SocketP99); they are not lateness of the arrivals, which are
// stamped without them. Batch is the most arrivals that each waited at
// least a tick and whose receipts fall within BatchWindow of each other:
// what is left of a backlog once moved back to its receipts, at the
// kernel's tick resolution (on time, a lockstep fleet's arrivals bunch
// too, and count nothing).
//
// Where the kernel does not say (another OS, a connection that is not a
// socket: memnet, a synctest bubble), Observe counts nothing and returns
// 0. A nil *Stamps observes nothing.
//
// Observe is on the stub's path of every request: it allocates nothing,
// and takes the mutex only for a reading of smallMax ms or more or a late
// arrival. It asks the kernel (one system call, BenchmarkObserve) unless
// the connection's previous request was answered (Answered) less than a
// tick before: an HTTP/1.1 client sends its next request on a connection
// only once it has the whole answer, so the request was received since,
// and the kernel would read it under two ticks, on time. A closed-loop
// client on a host that keeps up asks nothing after its first request.
type Stamps struct {
	tick  atomic.Uint32 // smallest non-zero reading so far, ms
	small [smallMax]atomic.Uint64

	mu      sync.Mutex
	large   map[uint32]uint64 // readings of smallMax ms or more → arrivals
	winAt   time.Time         // the current batch window's first late stamp
	winN    int
	batch   int
	unknown atomic.Uint64 // arrivals the kernel gave no reading for
}

// smallMax bounds the readings (ms) counted without the mutex: an arrival
// read on time reads under 2 ticks (2-20 ms).
const smallMax = 64

// BatchWindow is how close late stamps must fall to count as one batch.
const BatchWindow = time.Millisecond

// NewStamps returns an empty measurement.
func NewStamps() *Stamps { return &Stamps{large: make(map[uint32]uint64)} }

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it keeps each connection's
// means of asking the kernel (made once per connection) in its requests'
// contexts for Observe.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, newConnStamp(c))
}

// Tick is the kernel's tick as the stamps know it so far: the smallest
// non-zero reading seen (0 before any). It is the true tick once one
// arrival was read within its first tick, and coarser until then.
func (s *Stamps) Tick() time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(s.tick.Load()) * time.Millisecond
}

// Observe records the arrival stamped at `at` of the request whose context
// ConnContext filled, and returns how long it surely waited in its socket
// (0 when the kernel does not say, or less than a tick): at minus the
// wait is no earlier than the kernel's receipt of the request.
func (s *Stamps) Observe(ctx context.Context, at time.Time) time.Duration {
	if s == nil {
		return 0
	}
	c, _ := ctx.Value(connKey{}).(*connStamp)
	ms, ok := c.sinceReceipt(at, s.tick.Load())
	if !ok {
		s.unknown.Add(1)
		return 0
	}
	tick := s.lowerTick(ms)
	if ms < smallMax {
		s.small[ms].Add(1)
	} else {
		s.mu.Lock()
		s.large[ms]++
		s.mu.Unlock()
	}
	if tick == 0 || ms < 2*tick { // not surely a tick late
		return 0
	}
	wait := time.Duration(ms-tick) * time.Millisecond
	receipt := at.Add(-wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.winN == 0 || receipt.Sub(s.winAt).Abs() > BatchWindow {
		s.winAt, s.winN = receipt, 0
	}
	s.winN++
	s.batch = max(s.batch, s.winN)
	return wait
}

// Answered notes that the stub answered the request of ctx (see
// ConnContext) at at: its handler returned, and the answer is written
// after.
func (s *Stamps) Answered(ctx context.Context, at time.Time) {
	if s == nil {
		return
	}
	c, _ := ctx.Value(connKey{}).(*connStamp)
	c.answer(at)
}

// lowerTick takes a reading of ms into the tick (the smallest non-zero
// reading) and returns the tick.
func (s *Stamps) lowerTick(ms uint32) uint32 {
	for {
		tick := s.tick.Load()
		if ms == 0 || (tick != 0 && tick <= ms) {
			return tick
		}
		if s.tick.CompareAndSwap(tick, ms) {
			return ms
		}
	}
}

// source is the stamps' socket waits (the lower bounds) as a noise
// source, and the batch; false when no arrival had a reading.
func (s *Stamps) source() (source, int, bool) {
	if s == nil {
		return source{}, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tick := s.tick.Load()
	type bin struct {
		late int64 // ns, lower bound
		n    uint64
	}
	var bins []bin
	var total uint64
	add := func(ms uint32, n uint64) {
		var late int64
		if tick > 0 && ms > tick {
			late = int64(ms-tick) * int64(time.Millisecond)
		}
		bins = append(bins, bin{late, n})
		total += n
	}
	for ms := range s.small {
		if n := s.small[ms].Load(); n > 0 {
			add(uint32(ms), n)
		}
	}
	for ms, n := range s.large {
		add(ms, n)
	}
	if total == 0 {
		return source{}, 0, false
	}
	slices.SortFunc(bins, func(a, b bin) int { return cmp.Compare(a.late, b.late) })
	q := func(p float64) int64 {
		rank := uint64(p * float64(total))
		var seen uint64
		for _, b := range bins {
			seen += b.n
			if seen > rank {
				return b.late
			}
		}
		return bins[len(bins)-1].late
	}
	return source{name: timeline.NoiseStamp, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: bins[len(bins)-1].late, samples: int64(total)}, s.batch, true
}
