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
type Stamps struct {
	mu      sync.Mutex
	raw     map[uint32]uint64 // readings in ms → arrivals
	n       uint64
	tick    uint32    // smallest non-zero reading so far, ms
	winAt   time.Time // the current batch window's first late stamp
	winN    int
	batch   int
	unknown atomic.Uint64 // arrivals the kernel gave no reading for
}

// BatchWindow is how close late stamps must fall to count as one batch.
const BatchWindow = time.Millisecond

// NewStamps returns an empty measurement.
func NewStamps() *Stamps { return &Stamps{raw: make(map[uint32]uint64)} }

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it keeps each connection in
// its requests' contexts for Observe.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Tick is the kernel's tick as the stamps know it so far: the smallest
// non-zero reading seen (0 before any). It is the true tick once one
// arrival was read within its first tick, and coarser until then.
func (s *Stamps) Tick() time.Duration {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.tick) * time.Millisecond
}

// Observe records the arrival stamped at `at` of the request whose context
// ConnContext filled, and returns how long it surely waited in its socket
// (0 when the kernel does not say, or less than a tick): at minus the
// wait is no earlier than the kernel's receipt of the request.
func (s *Stamps) Observe(ctx context.Context, at time.Time) time.Duration {
	if s == nil {
		return 0
	}
	c, _ := ctx.Value(connKey{}).(net.Conn)
	ms, ok := sinceReceipt(c)
	if !ok {
		s.unknown.Add(1)
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms > 0 && (s.tick == 0 || ms < s.tick) {
		s.tick = ms
	}
	s.raw[ms]++
	s.n++
	if s.tick == 0 || ms < 2*s.tick { // not surely a tick late
		return 0
	}
	wait := time.Duration(ms-s.tick) * time.Millisecond
	receipt := at.Add(-wait)
	if s.winN == 0 || receipt.Sub(s.winAt).Abs() > BatchWindow {
		s.winAt, s.winN = receipt, 0
	}
	s.winN++
	s.batch = max(s.batch, s.winN)
	return wait
}

// source is the stamps' socket waits (the lower bounds) as a noise
// source, and the batch; false when no arrival had a reading.
func (s *Stamps) source() (source, int, bool) {
	if s == nil {
		return source{}, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return source{}, 0, false
	}
	tick := s.tick
	type bin struct {
		late int64 // ns, lower bound
		n    uint64
	}
	bins := make([]bin, 0, len(s.raw))
	for ms, n := range s.raw {
		var late int64
		if tick > 0 && ms > tick {
			late = int64(ms-tick) * int64(time.Millisecond)
		}
		bins = append(bins, bin{late, n})
	}
	slices.SortFunc(bins, func(a, b bin) int { return cmp.Compare(a.late, b.late) })
	q := func(p float64) int64 {
		rank := uint64(p * float64(s.n))
		var seen uint64
		for _, b := range bins {
			seen += b.n
			if seen > rank {
				return b.late
			}
		}
		return bins[len(bins)-1].late
	}
	return source{name: timeline.NoiseStamp, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: bins[len(bins)-1].late, samples: int64(s.n)}, s.batch, true
}
