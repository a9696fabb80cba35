package analyzer

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// A capSim is an open-loop fleet against a stub with finite capacity, in
// virtual time (an event queue, no clock): logical requests arrive as a
// Poisson process, one per client; the server has workers serving one
// request each for a service time, a bounded queue in FIFO or LIFO order,
// and rejects a request that finds the queue full with a 503 (Limit
// "capacity"); phases scale the workers (the trigger). A client abandons
// an attempt after its timeout and retries after a backoff, up to
// maxAttempts, within an optional fleet-wide retry budget. It records the
// timeline the capacity contract describes (meta.capacity, phase
// capacity shares, attempt queue and service times, abandoned attempts),
// so the capacity checks can be tested and calibrated on realistic shapes.
type capSim struct {
	seed     uint64
	rate     float64       // logical requests per second
	duration time.Duration // arrivals stop here; the run ends when every request has
	workers  int
	queue    int
	service  time.Duration
	exp      bool // exponential service times (else fixed)
	lifo     bool
	cancel   bool // cancel_on_disconnect: a queued request whose client left is dropped
	phases   []timeline.Phase

	timeout     time.Duration // per attempt
	maxAttempts int           // 1: no retries
	backoff     func(k int, r *rand.Rand) time.Duration
	// budget: each first attempt earns this many retry tokens (at most
	// budgetCap held; the bucket starts full), each retry spends one; a
	// request with no token left gives up. 0: no budget.
	budget, budgetCap float64

	noCapacity bool // record no meta.capacity (the checks skip)
}

// triggerPhases is a run at full capacity, then share of it for length
// from at, then full capacity again until the end.
func triggerPhases(at, length time.Duration, share float64) []timeline.Phase {
	return []timeline.Phase{
		{Name: "steady", Start: 0, End: int64(at), Respond: "ok"},
		{Name: "trigger", Start: int64(at), End: int64(at + length), Respond: "ok", Capacity: share},
		{Name: "after", Start: int64(at + length), Respond: "ok"},
	}
}

func capJitter(base, cap time.Duration) func(int, *rand.Rand) time.Duration {
	return func(k int, r *rand.Rand) time.Duration {
		b := min(cap, base<<(k-1))
		return time.Duration(r.Int64N(int64(b) + 1))
	}
}

func capFixed(d time.Duration) func(int, *rand.Rand) time.Duration {
	return func(int, *rand.Rand) time.Duration { return d }
}

// capacity is the share of the workers in effect at t.
func (s *capSim) share(t int64) float64 {
	for _, ph := range s.phases {
		if t >= ph.Start && (ph.End == 0 || t < ph.End) && ph.Capacity > 0 {
			return ph.Capacity
		}
	}
	return 1
}

func (s *capSim) active(t int64) int {
	return max(1, int(math.Round(float64(s.workers)*s.share(t))))
}

func (s *capSim) meta() *timeline.Meta {
	m := &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "capsim", Subject: "capsim", Seed: int64(s.seed),
		Phases: s.phases, Duration: int64(s.duration) * 4,
		Fleet: &timeline.Fleet{Clients: int(s.rate * s.duration.Seconds()), Requests: 1, Start: "poisson"}}
	if !s.noCapacity {
		dist, disc := "fixed", "fifo"
		if s.exp {
			dist = "exponential"
		}
		if s.lifo {
			disc = "lifo"
		}
		m.Capacity = &timeline.Capacity{Concurrency: s.workers, Queue: s.queue, Service: int64(s.service), Dist: dist, Discipline: disc, CancelOnDisconnect: s.cancel}
	}
	return m
}

type capEvent struct {
	t    int64
	seq  int64
	kind int
	att  *capAttempt
}

const (
	evArrive  = iota // an attempt reaches the server
	evFinish         // a worker finishes an attempt
	evTimeout        // the client gives up on an attempt
	evPhase          // a phase starts: the workers in effect change
)

type capEvents []*capEvent

func (h capEvents) Len() int { return len(h) }
func (h capEvents) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h capEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *capEvents) Push(x any)   { *h = append(*h, x.(*capEvent)) }
func (h *capEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type capRequest struct {
	client, key string
	scheduled   int64
	attempts    int
	done        bool
}

type capAttempt struct {
	req       *capRequest
	n         int
	at, start int64
	state     int // queued, serving, finished, dropped
	abandoned bool
}

const (
	stQueued = iota
	stServing
	stFinished
	stDropped
)

// records runs the simulation and returns the timeline, meta first,
// attempts and outcomes in the order a recorder writes them (by the time
// they are done), an end record last.
func (s capSim) records() []timeline.Record {
	r := rand.New(rand.NewPCG(s.seed, 11))
	var evs capEvents
	var seq int64
	push := func(t int64, kind int, a *capAttempt) {
		seq++
		heap.Push(&evs, &capEvent{t: t, seq: seq, kind: kind, att: a})
	}
	type out struct {
		t   int64
		rec timeline.Record
	}
	var outs []out
	tokens := s.budgetCap
	n := 0
	for t := r.ExpFloat64() / s.rate; t < s.duration.Seconds(); t += r.ExpFloat64() / s.rate {
		c := strconv.Itoa(n)
		req := &capRequest{client: c, key: c + "/0", scheduled: int64(t * 1e9)}
		push(req.scheduled, evArrive, &capAttempt{req: req, n: 1})
		n++
	}
	for _, ph := range s.phases {
		if ph.Start > 0 {
			push(ph.Start, evPhase, nil)
		}
	}
	busy := 0
	var queue []*capAttempt // with dropped ones (lazy deletion)
	queued := 0             // live entries of queue
	svc := func() int64 {
		if s.exp {
			return int64(r.ExpFloat64() * float64(s.service))
		}
		return int64(s.service)
	}
	record := func(a *capAttempt, done int64, status int, fault, limit string, q, service int64) {
		at := timeline.Attempt{Client: a.req.client, Key: a.req.key, Attempt: a.n, Method: "GET", Path: "/c/" + a.req.client + "/r/0",
			At: a.at, Done: done, Status: status, Fault: fault, Limit: limit, Queue: q, Service: service}
		outs = append(outs, out{done, timeline.Record{Type: timeline.TypeAttempt, Attempt: at}})
	}
	outcome := func(req *capRequest, t int64, result string, status int) {
		req.done = true
		o := timeline.Outcome{Client: req.client, Key: req.key, Scheduled: req.scheduled, Start: req.scheduled, End: t, Result: result, Status: status, Attempts: req.attempts}
		outs = append(outs, out{t, timeline.Record{Type: timeline.TypeOutcome, Outcome: o}})
	}
	// failed: the client saw attempt a fail at t (a rejection, or its own
	// timeout): retry after the backoff, within the cap and the budget.
	failed := func(a *capAttempt, t int64, status int) {
		req := a.req
		if a.n >= s.maxAttempts {
			outcome(req, t, timeline.ResultGaveUp, status)
			return
		}
		if s.budget > 0 {
			if tokens < 1 {
				outcome(req, t, timeline.ResultBudget, status)
				return
			}
			tokens--
		}
		push(t+int64(s.backoff(a.n, r)), evArrive, &capAttempt{req: req, n: a.n + 1})
	}
	start := func(a *capAttempt, t int64) {
		busy++
		a.state, a.start = stServing, t
		push(t+svc(), evFinish, a)
	}
	// pull starts queued attempts while workers are free.
	pull := func(t int64) {
		for busy < s.active(t) && queued > 0 {
			var a *capAttempt
			if s.lifo {
				a, queue = queue[len(queue)-1], queue[:len(queue)-1]
			} else {
				a, queue = queue[0], queue[1:]
			}
			if a.state == stDropped {
				continue
			}
			queued--
			start(a, t)
		}
		if queued == 0 {
			queue = queue[:0]
		}
	}
	for evs.Len() > 0 {
		e := heap.Pop(&evs).(*capEvent)
		t, a := e.t, e.att
		switch e.kind {
		case evArrive:
			a.at = t
			a.req.attempts = a.n
			if a.n == 1 && s.budget > 0 {
				tokens = min(s.budgetCap, tokens+s.budget)
			}
			switch {
			case busy < s.active(t) && queued == 0:
				start(a, t)
			case queued < s.queue:
				a.state = stQueued
				queue = append(queue, a)
				queued++
			default:
				done := t + int64(time.Millisecond)
				a.state = stFinished
				record(a, done, 503, "", LimitCapacity, 0, 0)
				failed(a, done, 503)
				continue
			}
			push(t+int64(s.timeout), evTimeout, a)
		case evFinish:
			busy--
			a.state = stFinished
			if a.abandoned {
				record(a, t, 200, timeline.FaultAbandoned, "", a.start-a.at, t-a.start)
			} else {
				record(a, t, 200, "", "", a.start-a.at, t-a.start)
				outcome(a.req, t, timeline.ResultOK, 200)
			}
			pull(t)
		case evTimeout:
			if a.state == stFinished || a.state == stDropped {
				continue
			}
			a.abandoned = true
			if s.cancel && a.state == stQueued {
				a.state = stDropped
				queued--
				record(a, t, 0, timeline.FaultAbandoned, "", t-a.at, 0)
			}
			failed(a, t, 0)
		case evPhase:
			pull(t)
		}
	}
	slices.SortStableFunc(outs, func(x, y out) int { return int(min(max(x.t-y.t, -1), 1)) })
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: s.meta()}}
	var end int64
	for _, o := range outs {
		recs = append(recs, o.rec)
		end = o.t
	}
	recs[0].Meta.Scheduled = int64(n)
	return append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{At: end, Reason: timeline.EndCompleted}})
}

// verdict feeds the simulation's records to a fresh Analyzer.
func (s capSim) verdict(opts Options) (*Verdict, *LoadSeries) {
	recs := s.records()
	an := New(recs[0].Meta, opts)
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	return an.Result(), an.Load()
}

// judge feeds the simulation's records to a fresh Analyzer and returns it
// with its verdict.
func (s capSim) judge(opts Options) (*Verdict, *Analyzer) {
	recs := s.records()
	an := New(recs[0].Meta, opts)
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	return an.Result(), an
}
