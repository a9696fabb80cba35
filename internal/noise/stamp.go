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

// Stamps measures how late a server stamps its arrivals behind the
// kernel's receipt of them: the evidence a recording without a fleet has
// (serve --record), and the stub's own view in a run. A server short of
// CPU leaves requests in its sockets and then reads a backlog of them at
// once: their stamps bunch, though the clients sent them apart.
//
// For each arrival, Observe asks the kernel how long ago the request's
// connection last received data (Linux TCP_INFO tcpi_last_data_recv, in
// whole kernel ticks: 4 ms at HZ=250). A reading of k ticks means the
// request waited between k-1 and k+1 ticks; Stamps keeps the lower bound,
// so an arrival read a tick late only because a tick fell between its
// receipt and its stamp counts as on time. The tick is the smallest
// non-zero reading seen.
//
// Batch is the most arrivals stamped within BatchWindow of each other that
// each waited at least a tick: stamps bunched by the server, not by the
// clients (on time, a lockstep fleet's arrivals bunch too, and count
// nothing).
//
// Where the kernel does not say (another OS, a connection that is not a
// socket: memnet, a synctest bubble), Observe counts nothing. A nil
// *Stamps observes nothing.
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

// Observe records the arrival stamped at `at` of the request whose context
// ConnContext filled.
func (s *Stamps) Observe(ctx context.Context, at time.Time) {
	if s == nil {
		return
	}
	c, _ := ctx.Value(connKey{}).(net.Conn)
	ms, ok := sinceReceipt(c)
	if !ok {
		s.unknown.Add(1)
		return
	}
	s.mu.Lock()
	if ms > 0 && (s.tick == 0 || ms < s.tick) {
		s.tick = ms
	}
	late := s.tick > 0 && ms >= 2*s.tick // waited at least a tick for sure
	s.raw[ms]++
	s.n++
	if late {
		if s.winN == 0 || at.Sub(s.winAt) > BatchWindow {
			s.winAt, s.winN = at, 0
		}
		s.winN++
		s.batch = max(s.batch, s.winN)
	}
	s.mu.Unlock()
}

// source is the stamps' lateness (the lower bounds) as a noise source,
// and the batch; false when no arrival had a reading.
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
