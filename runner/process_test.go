package runner

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// tinyBudget is the reference client with a retry budget of two retries
// (10 tokens, 5 a retry) and nothing else to stop it early: against a
// server that stays down, every call retries until its instance's budget
// refuses. It records the Params of every instance it makes.
type tinyBudget struct {
	mu   sync.Mutex
	made []subjects.Params
}

func (*tinyBudget) Name() string { return "tiny-budget" }

func (s *tinyBudget) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	s.mu.Lock()
	s.made = append(s.made, p)
	s.mu.Unlock()
	tr := client.New(next, client.Config{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond, MaxAttempts: 20,
		Budget: 5 * time.Second, RetryBudget: client.RetryBudget{Capacity: 10, RetryCost: 5}, Rand: p.Rand})
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		return tr.RoundTrip(req.WithContext(ctx))
	}
}

const downForGood = `
name: down
duration: 20s
server:
  phases:
    - {name: down, respond: {status: 503}}
fleet: {clients: 6, requests: 1, start: ramp 50ms, timeout: 10s}
expect: {allow_unexercised: true}
`

// TestProcessesShareOneInstance: with fleet.processes 2 the subject is
// made twice, once per process (named by its first client, its index and
// its clients' count), and the clients of a process share its retry
// budget: two retries for the whole process, where one instance per
// client makes two per client. A shard makes only the instances of its
// clients' processes. The meta record says how many processes there were.
func TestProcessesShareOneInstance(t *testing.T) {
	run := func(t *testing.T, procs int, shard timeline.Shard) (*tinyBudget, decoded) {
		s := &tinyBudget{}
		var buf bytes.Buffer
		synctest.Test(t, func(t *testing.T) {
			sc := mustParse(t, downForGood)
			if _, err := Run(context.Background(), sc, RunOptions{Subject: s, Virtual: true, Seed: 3, Timeline: &buf,
				Processes: procs, Shard: shard, Stagger: time.Microsecond}); err != nil {
				t.Fatal(err)
			}
		})
		return s, decode(t, buf.Bytes())
	}
	retriesBy := func(d decoded) map[string]int {
		m := map[string]int{}
		for _, a := range d.atts {
			if a.Attempt > 1 {
				m[a.Client]++
			}
		}
		return m
	}

	own, d := run(t, 0, timeline.Shard{})
	if len(own.made) != 6 || d.meta.Fleet.Processes != 0 {
		t.Errorf("no processes: %d instances, meta processes %d; want 6 and 0", len(own.made), d.meta.Fleet.Processes)
	}
	for c, n := range retriesBy(d) {
		if n != 2 {
			t.Errorf("no processes: client %s made %d retries; want the 2 its own budget allows", c, n)
		}
	}
	if got := len(d.atts); got != 6+6*2 {
		t.Errorf("no processes: %d attempts; want 18", got)
	}

	shared, d := run(t, 2, timeline.Shard{})
	want := []subjects.Params{{Client: 0, Process: 0, Clients: 3}, {Client: 1, Process: 1, Clients: 3}}
	var got []subjects.Params
	for _, p := range shared.made {
		if p.Rand == nil {
			t.Errorf("process %d's instance has no Rand", p.Process)
		}
		got = append(got, subjects.Params{Client: p.Client, Process: p.Process, Clients: p.Clients})
	}
	slices.SortFunc(got, func(a, b subjects.Params) int { return a.Process - b.Process })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("processes 2: instances %+v; want %+v", got, want)
	}
	if d.meta.Fleet.Processes != 2 {
		t.Errorf("processes 2: meta.fleet.processes %d; want 2", d.meta.Fleet.Processes)
	}
	perProcess := map[int]int{}
	for c, n := range retriesBy(d) {
		var id int
		fmt.Sscan(c, &id)
		perProcess[id%2] += n
	}
	if perProcess[0] != 2 || perProcess[1] != 2 || len(d.atts) != 6+2*2 {
		t.Errorf("processes 2: retries per process %v, %d attempts; want 2 each (one budget per process), 10 attempts", perProcess, len(d.atts))
	}
	gaveUp := 0
	for _, o := range d.outs {
		if o.Result == timeline.ResultGaveUp {
			gaveUp++
		}
	}
	if gaveUp != 6 {
		t.Errorf("processes 2: %d of 6 calls gave up; want every one, refused by its process's budget", gaveUp)
	}

	sharded, d := run(t, 2, timeline.Shard{Index: 1, Count: 2})
	if len(sharded.made) != 1 || sharded.made[0].Process != 1 || sharded.made[0].Clients != 3 || d.meta.Fleet.Processes != 2 {
		t.Errorf("shard 1/2 of processes 2: instances %+v, meta processes %d; want process 1's alone (3 clients), 2", sharded.made, d.meta.Fleet.Processes)
	}
	if n := len(d.outs); n != 3 {
		t.Errorf("shard 1/2: %d outcomes; want 3", n)
	}
}

// TestRequestRand: a logical request's source depends on the seed, the
// client and the request, and on nothing else.
func TestRequestRand(t *testing.T) {
	first := func(seed int64, id, seq int) uint64 { return requestRand(seed, id, seq).Uint64() }
	if first(1, 2, 3) != first(1, 2, 3) {
		t.Errorf("one request, two sources: different draws")
	}
	seen := map[uint64]string{}
	for _, k := range [][3]int{{1, 2, 3}, {2, 2, 3}, {1, 3, 3}, {1, 2, 4}, {1, 3, 2}, {1, 0, 0}, {1, 0, 1}, {1, 1, 0}} {
		v := first(int64(k[0]), k[1], k[2])
		if o, dup := seen[v]; dup {
			t.Errorf("seed/client/request %v draws as %s", k, o)
		}
		seen[v] = fmt.Sprint(k)
	}
}

// instantNext answers every request at once.
type instantNext struct{}

func (instantNext) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

// TestInTurnOrdersOneInstant: answers that arrive at one virtual instant
// are handed over one a nanosecond, in the order of their paths, however
// the goroutines run; an answer of a later instant waits for its turn
// behind them.
func TestInTurnOrdersOneInstant(t *testing.T) {
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			tr := &inTurn{next: instantNext{}}
			start := time.Now()
			var mu sync.Mutex
			var order []string
			var at []time.Duration
			var wg sync.WaitGroup
			call := func(path string) {
				req, _ := http.NewRequest(http.MethodGet, "http://stub"+path, nil)
				if _, err := tr.RoundTrip(req); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, path)
				at = append(at, time.Since(start))
				mu.Unlock()
			}
			for _, p := range []string{"/c/3/r/0", "/c/1/r/0", "/c/10/r/0", "/c/2/r/5", "/c/2/r/1"} {
				wg.Go(func() { call(p) })
			}
			wg.Go(func() {
				time.Sleep(time.Nanosecond) // arrives at the first one's turn
				call("/c/0/r/0")
			})
			wg.Wait()
			want := []string{"/c/1/r/0", "/c/10/r/0", "/c/2/r/1", "/c/2/r/5", "/c/3/r/0", "/c/0/r/0"}
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Errorf("answers handed over in the order %v; want %v", order, want)
			}
			if fmt.Sprint(at) != fmt.Sprint([]time.Duration{1, 2, 3, 4, 5, 6}) {
				t.Errorf("answers handed over at %v; want one a nanosecond from 1ns", at)
			}
		})
	}
}
