// Processes: the clients grouped into processes that share one instance
// of the subject (fleet.processes), each logical request's own draw
// source, and, in virtual time, the order in which a shared instance
// hears the answers that arrive at one instant.

package runner

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/subjects"
)

// shared reports whether the fleet's clients share subject instances:
// fewer processes than clients (fleet.processes), with a goroutine
// subject (an exec subject's processes are programFleet's).
func (r *runner) shared() bool {
	if _, ok := r.subj.(subjects.Program); ok {
		return false
	}
	return r.sc.Fleet.ProcessCount() < r.sc.Fleet.Clients
}

// processCaller returns the shared instance of client id's process,
// making it on the first call: New once per process, with
// processParams. Only the launcher calls it (one goroutine).
func (r *runner) processCaller(id int) subjects.Caller {
	p := r.sc.Fleet.ProcessOf(id)
	if r.procs == nil {
		r.procs = make(map[int]subjects.Caller)
	}
	if c, ok := r.procs[p]; ok {
		return c
	}
	next := r.next
	if r.opts.Virtual {
		next = &inTurn{next: next, off: r.turnsOff}
	}
	c := r.subj.New(next, r.processParams(p))
	r.procs[p] = c
	return c
}

// processParams are the Params of process p's shared instance: those of
// its first client (client p: its id, its source), with Process p and
// Clients the number of the whole fleet's clients in it (a shard's
// instance serves only the shard's clients of the process, but is named
// as the whole fleet's process).
func (r *runner) processParams(p int) subjects.Params {
	f := &r.sc.Fleet
	n := f.ProcessCount()
	params := r.sc.SubjectParams(p, rand.New(rand.NewPCG(uint64(r.opts.Seed), uint64(p))), r.opts.Virtual)
	params = r.harnessParams(params)
	params.Process = p
	params.Clients = f.Clients / n
	if p < f.Clients%n {
		params.Clients++
	}
	return params
}

// requestRand is the draw source of client id's logical request seq in a
// fleet of shared instances (client.WithRand): seeded from the run's seed
// and the request's identity only, so that its draws are the same in
// every run of the seed however the calls of a process interleave. Its
// stream is the (client, request) pair mixed into 64 bits (splitmix64),
// apart from the clients' own streams (PCG(seed, client)) but by chance.
func requestRand(seed int64, id, seq int) *rand.Rand {
	z := uint64(id)<<32 ^ uint64(uint32(seq)) ^ 0x7265_7175_6573_7473
	z += 0x9e37_79b9_7f4a_7c15
	z = (z ^ z>>30) * 0xbf58_476d_1ce4_e5b9
	z = (z ^ z>>27) * 0x94d0_49bb_1331_11eb
	z ^= z >> 31
	return rand.New(rand.NewPCG(uint64(seed), z))
}

// withRequestRand puts the request's draw source on ctx when the
// client's instance is shared (else the instance is the client's own, and
// draws from its Params.Rand in the client's order, as it always did).
func (r *runner) withRequestRand(ctx context.Context, shared bool, id, seq int) context.Context {
	if !shared {
		return ctx
	}
	return client.WithRand(ctx, requestRand(r.opts.Seed, id, seq))
}

// inTurn is the harness transport of a shared instance in virtual time:
// it hands the instance the answers (responses and errors) that arrive at
// one instant one at a time, in the order of their requests' paths, each
// a nanosecond after the last. Why: in a synctest bubble the goroutines
// woken at one instant run in any order, so the state the instance's
// clients share (the retry budget, the rate-limit slow-down) would change
// in another order each run, and a seeded run would not replay. An answer
// is handed over once the bubble has settled (every answer of its instant
// has arrived), the next once the instance has blocked again. Cost: the
// n-th answer of an instant arrives n ns late. Not ordered: draws on a
// shared limiter or slow-down slot by clients woken by their own timers
// at one instant (a shared Retry-After date, clock-aligned retries).
type inTurn struct {
	next http.RoundTripper
	// off ends the turns when the run is sealed: the answers still held
	// are handed over at once. The bubble's clock stops when the run
	// returns, and with it the steps, so a call still in flight then (a
	// hung one past the duration cap) would wait for its turn forever and
	// the bubble would deadlock. Nothing a client does after the seal is
	// recorded, so its order no longer matters.
	off <-chan struct{}

	mu      sync.Mutex
	pending []*answer
	armed   bool // a step is scheduled
}

// answer is an attempt's result waiting for its turn.
type answer struct {
	at    int64 // arrival, ns on the bubble's clock
	key   string
	ready chan struct{}
}

func (t *inTurn) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	a := &answer{at: time.Now().UnixNano(), key: req.URL.Path, ready: make(chan struct{})}
	t.mu.Lock()
	t.pending = append(t.pending, a)
	if !t.armed {
		t.armed = true
		time.AfterFunc(time.Nanosecond, t.step)
	}
	t.mu.Unlock()
	select {
	case <-a.ready:
	case <-t.off:
	}
	return resp, err
}

// step hands over the first pending answer that arrived before now, by
// arrival then path, and schedules the next step while any is pending.
func (t *inTurn) step() {
	now := time.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	best := -1
	for i, a := range t.pending {
		if a.at >= now {
			continue // arrived at this instant: its turn comes after it
		}
		if best < 0 || a.at < t.pending[best].at || a.at == t.pending[best].at && a.key < t.pending[best].key {
			best = i
		}
	}
	if best >= 0 {
		close(t.pending[best].ready)
		t.pending = append(t.pending[:best], t.pending[best+1:]...)
	}
	if len(t.pending) > 0 {
		time.AfterFunc(time.Nanosecond, t.step)
	} else {
		t.armed = false
	}
}
