package reports

import (
	"container/heap"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// synth describes a synthetic run: an outage answered 503 with Retry-After
// until outageEnd, then a quota answering 429 (sometimes with an unusable
// Retry-After, so the clients back off on their own), a few faults and a
// few 404s. Some clients misbehave on purpose: every 7th ignores
// Retry-After, every 11th overshoots its backoff bound.
type synth struct {
	clients, requests int
	seed              uint64
	stride            time.Duration // between client starts
	wellBehaved       bool          // no client misbehaves
}

const (
	synthOutageEnd = 2 * time.Second
	synthBase      = 100 * time.Millisecond
	synthCap       = 1600 * time.Millisecond
	synthBudget    = 6 * time.Second
	synthMax       = 5
)

func (s synth) meta() *timeline.Meta {
	return &timeline.Meta{
		Format:      timeline.Format,
		Tool:        "retrylab test",
		Recorder:    "run",
		Scenario:    "synthetic-outage",
		Description: "A synthetic outage: 503 with Retry-After until 2s, then a quota.",
		Subject:     "synthetic",
		Summary:     "exponential backoff, full jitter, honours Retry-After (mostly)",
		Policy:      &timeline.Policy{Base: int64(synthBase), Cap: int64(synthCap), MaxAttempts: synthMax, Budget: int64(synthBudget), Jitter: "full"},
		Seed:        int64(s.seed),
		Start:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration:    int64(20 * time.Second),
		Phases: []timeline.Phase{
			{Name: "outage", Start: 0, End: int64(synthOutageEnd), Respond: "status 503", RetryAfter: "date phase-end"},
			{Name: "recovered", Start: int64(synthOutageEnd), Respond: "quota", RetryAfter: "delta limiter"},
		},
		Fleet: &timeline.Fleet{Clients: s.clients, Requests: s.requests, Start: "ramp 1s", Think: int64(50 * time.Millisecond), Method: "GET", Timeout: int64(30 * time.Second)},
		Quota: &timeline.Quota{Algorithm: "token-bucket", Rate: 100, Burst: 20, Key: "global"},
	}
}

type synthEvent struct {
	at  int64 // write order
	att *timeline.Attempt
	out *timeline.Outcome
}

// synthClient is one simulated client generating its logical requests one
// at a time, so a run of any size is generated in memory proportional to
// its clients.
type synthClient struct {
	c    int
	rng  *rand.Rand
	t    int64 // when the next logical request starts
	r    int   // next logical request
	evs  []synthEvent
	next int // index in evs
}

// request generates the events of the client's next logical request into
// evs; it returns false when the client is done.
func (s synth) request(cl *synthClient) bool {
	if cl.r >= s.requests {
		return false
	}
	c, rng := cl.c, cl.rng
	client := strconv.Itoa(c)
	key := client + "/" + strconv.Itoa(cl.r)
	cl.r++
	cl.evs, cl.next = cl.evs[:0], 0
	t := cl.t
	start := t
	var result string
	var status int
	n := 0
	for {
		n++
		a := &timeline.Attempt{Client: client, Key: key, Attempt: n, Method: "GET", Path: "/c/" + key, At: t}
		lat := int64(2*time.Millisecond) + rng.Int64N(int64(3*time.Millisecond))
		a.Done = t + lat
		var wait int64
		switch {
		case t < int64(synthOutageEnd):
			a.Status, a.Phase, a.RetryAfter = 503, "outage", "Fri, 02 Jan 2026 03:04:07 GMT"
			a.NotBefore, a.HasNotBefore = int64(synthOutageEnd), true
			wait = a.NotBefore - a.Done + rng.Int64N(int64(20*time.Millisecond))
			if c%7 == 0 && !s.wellBehaved {
				wait = int64(50 * time.Millisecond) // ignores Retry-After
			}
		default:
			a.Phase = "recovered"
			switch x := rng.IntN(100); {
			case x < 55:
				a.Status = 200
			case x < 70:
				a.Status, a.RetryAfter = 429, "1"
				a.NotBefore, a.HasNotBefore = a.Done+int64(time.Second), true
				wait = a.NotBefore - a.Done + rng.Int64N(int64(50*time.Millisecond))
				if c%7 == 0 && !s.wellBehaved {
					wait = rng.Int64N(int64(time.Second))
				}
			case x < 90:
				a.Status, a.RetryAfter = 429, "soon" // unusable: the client backs off
			case x < 95:
				a.Fault = timeline.FaultReset
			default:
				a.Status = 404
			}
			if !a.HasNotBefore {
				bound := min(int64(synthCap), int64(synthBase)<<(n-1))
				wait = rng.Int64N(bound + 1)
				if c%11 == 0 && !s.wellBehaved {
					wait = bound + bound/2
				}
			}
		}
		cl.evs = append(cl.evs, synthEvent{at: a.Done, att: a})
		t = a.Done
		switch {
		case a.Status == 200:
			result, status = timeline.ResultOK, 200
		case a.Status == 404:
			result, status = timeline.ResultNonRetryable, 404
		case n >= synthMax:
			result, status = timeline.ResultGaveUp, a.Status
		case a.Done+wait-start > int64(synthBudget):
			result, status = timeline.ResultBudget, a.Status
		default:
			t = a.Done + wait
			continue
		}
		break
	}
	o := &timeline.Outcome{Client: client, Key: key, Scheduled: start, Start: start, End: t + int64(time.Millisecond), Result: result, Status: status, Attempts: n}
	cl.evs = append(cl.evs, synthEvent{at: o.End, out: o})
	cl.t = o.End + int64(50*time.Millisecond)
	return true
}

// clientHeap orders clients by the write time of their next event.
type clientHeap []*synthClient

func (h clientHeap) Len() int { return len(h) }
func (h clientHeap) Less(i, j int) bool {
	a, b := h[i].evs[h[i].next].at, h[j].evs[h[j].next].at
	return a < b || a == b && h[i].c < h[j].c
}
func (h clientHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *clientHeap) Push(x any)   { *h = append(*h, x.(*synthClient)) }
func (h *clientHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// write writes the synthetic timeline to w, records in write order, and
// returns the number of attempts.
func (s synth) write(w io.Writer) (int, error) {
	stride := s.stride
	if stride == 0 {
		stride = time.Second / time.Duration(max(1, s.clients))
	}
	var h clientHeap
	for c := 0; c < s.clients; c++ {
		cl := &synthClient{c: c, rng: rand.New(rand.NewPCG(s.seed, uint64(c))), t: int64(time.Duration(c) * stride)}
		if s.request(cl) {
			h = append(h, cl)
		}
	}
	heap.Init(&h)
	enc := timeline.NewEncoder(w)
	if err := enc.EncodeMeta(s.meta()); err != nil {
		return 0, err
	}
	attempts := 0
	for len(h) > 0 {
		cl := h[0]
		e := cl.evs[cl.next]
		var err error
		if e.att != nil {
			attempts++
			err = enc.EncodeAttempt(e.att)
		} else {
			err = enc.EncodeOutcome(e.out)
		}
		if err != nil {
			return 0, err
		}
		cl.next++
		if cl.next < len(cl.evs) || s.request(cl) {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return attempts, enc.Flush()
}

// synthFile writes the synthetic timeline to a file in a temporary
// directory and returns its path.
func synthFile(t testing.TB, s synth) (string, int) {
	t.Helper()
	path := t.TempDir() + "/timeline.ndjson"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.write(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, n
}
