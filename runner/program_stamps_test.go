package runner

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// fakeTimed plays clients (each with its base URL) as a client with a
// budget per request does, all at once: spec is "SPEND,GAP,THINK,LONG".
// Each request is attempted every GAP until it succeeds or another GAP
// would take it past SPEND since its start ("fail … budget"); request
// LONG (-1: none) is attempted twice, 4×SPEND apart; the client thinks
// THINK between its requests. Lines name /c/K/r/i.
func fakeTimed(spec string, clients []int, baseOf func(int) string, n int) int {
	var spend, gap, think time.Duration
	long := -1
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "timed: want SPEND,GAP,THINK,LONG")
		return 2
	}
	spend, _ = time.ParseDuration(parts[0])
	gap, _ = time.ParseDuration(parts[1])
	think, _ = time.ParseDuration(parts[2])
	long, _ = strconv.Atoi(parts[3])
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range clients {
		wg.Go(func() {
			for i := range n {
				if i > 0 {
					time.Sleep(think) // a real client process: outside any synctest bubble
				}
				limit, wait := spend, gap
				if i == long { // one wait of 4×SPEND: over budget in two attempts
					limit, wait = 5*spend, 4*spend
				}
				start := time.Now()
				line := fmt.Sprintf("fail /c/%d/r/%d budget", id, i)
				for {
					resp, err := hc.Get(fmt.Sprintf("%s/r/%d", baseOf(id), i))
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode < 300 {
							line = fmt.Sprintf("ok /c/%d/r/%d", id, i)
							break
						}
					}
					if time.Since(start)+wait > limit {
						break
					}
					time.Sleep(wait) // a real client process: outside any synctest bubble
				}
				mu.Lock()
				fmt.Println(line)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// Each outcome of an exec program ends when its own result line was
// read, not when the process exited: r/0's line printed at once and
// r/1's 300ms later get distinct ends. The stub saw no attempt of either,
// so each starts at its client's previous line (r/0 at time zero).
func TestRunExecEndsPerLine(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 1, requests: 2, timeout: 5s}
`)
	prog := subjects.Program{Path: "sh", Args: []string{"-c", `echo ready; echo "ok r/0"; sleep 0.3; echo "ok r/1"`}}
	outs, _, _ := runExec(t, sc, RunOptions{Subject: prog})
	slices.SortFunc(outs, func(a, b timeline.Outcome) int { return strings.Compare(a.Key, b.Key) })
	if len(outs) != 2 || outs[0].Key != "0/0" || outs[1].Key != "0/1" {
		t.Fatalf("outcomes %+v; want 0/0 and 0/1", outs)
	}
	r0, r1 := outs[0], outs[1]
	// The reader reads r/1 at least 300ms after r/0 was written; only a
	// reader over 200ms late for r/0 would bring the two within 100ms.
	if r1.End-r0.End < int64(100*time.Millisecond) {
		t.Errorf("r/0 ends at %v, r/1 at %v; want r/1 about 300ms later", time.Duration(r0.End), time.Duration(r1.End))
	}
	if r0.Start != 0 || r1.Start != r0.End || r0.Scheduled != r0.Start || r1.Scheduled != r1.Start {
		t.Errorf("r/0 %+v, r/1 %+v; want r/0 starting at 0, r/1 at r/0's end (no attempts), each scheduled at its start", r0, r1)
	}
}

// timedScenario: 4 clients in that many processes, 3 requests each, on
// the server's phases; budget and give-up judged.
func timedScenario(t *testing.T, phases string, processes int) string {
	t.Helper()
	return fmt.Sprintf(`
duration: 20s
server: {phases: %s}
fleet: {clients: 4, processes: %d, requests: 3, timeout: 5s}
expect: {checks: [budget, give-up]}
`, phases, processes)
}

// analyzeWith judges a timeline with extra check parameters.
func analyzeWith(t *testing.T, tl []byte, specs ...string) *analyzer.Verdict {
	t.Helper()
	var opts analyzer.Options
	for _, s := range specs {
		c, err := analyzer.ParseCheckSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		opts.Checks = append(opts.Checks, c)
	}
	v, err := analyzer.Analyze(bytes.NewReader(tl), opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// runTimed runs the fake timed client with spec on sc and returns the
// timeline and its outcomes.
func runTimed(t *testing.T, src, spec string) ([]byte, []timeline.Outcome) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Run(t.Context(), mustParse(t, src), RunOptions{Subject: fakeProgram(t, "timed:"+spec), Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	_, _, outs := decodeAll(t, buf.Bytes())
	if int64(len(outs)) != sum.Planned || sum.Harness != 0 {
		t.Fatalf("Summary %+v; want %d outcomes, none harness", sum, sum.Planned)
	}
	return buf.Bytes(), outs
}

// The budget case, scaled down: a budget of 500ms per request
// (tolerance 100ms), 3 requests, the server down; each request gives up
// after about 400ms, so budget PASSes (stamped with the process's start
// and exit, they lasted 1.2s: FAIL). A request that waits 1.6s between
// its two attempts still FAILs (in two attempts, so that the host's
// noise, which widens the tolerance per attempt, cannot hide it). Both with one process per client and with two clients per
// process.
func TestRunExecBudgetPerRequest(t *testing.T) {
	down := `[{respond: {status: 503}, retry_after: {form: none}}]`
	const budget = "budget:budget=500ms,tolerance=100ms"
	for _, procs := range []int{4, 2} {
		t.Run(fmt.Sprintf("processes=%d", procs), func(t *testing.T) {
			tl, outs := runTimed(t, timedScenario(t, down, procs), "400ms,200ms,0s,-1")
			for _, o := range outs {
				if d := o.End - o.Start; o.Result != timeline.ResultBudget || d <= 0 || d > int64(time.Second) {
					t.Errorf("outcome %+v lasted %v; want budget, within about 400ms (its process ran 1.2s or more)", o, time.Duration(d))
				}
			}
			if c := analyzeWith(t, tl, budget).Check(analyzer.CheckBudget); c == nil || c.Status != analyzer.StatusPass {
				t.Errorf("budget %+v; want pass", c)
			}
			// Each line follows its request's last answer at once: the
			// reader's lag is measured, and far below a request's span.
			if _, end := decodeEnd(t, tl); end.Noise == nil || end.Noise.ReaderP99 <= 0 ||
				end.Noise.ReaderP90 > end.Noise.ReaderP99 || end.Noise.ReaderP99 >= int64(time.Second) {
				t.Errorf("end.Noise = %+v; want reader_p90 <= reader_p99, within (0, 1s)", end.Noise)
			}
			tl, _ = runTimed(t, timedScenario(t, down, procs), "400ms,200ms,0s,1")
			c := analyzeWith(t, tl, budget).Check(analyzer.CheckBudget)
			if c == nil || c.Status != analyzer.StatusFail || len(c.Examples) == 0 || !strings.HasSuffix(c.Examples[0].Key, "/1") {
				t.Errorf("budget %+v; want fail, on r/1 (1.6s)", c)
			}
		})
	}
}

// The think-time case, scaled down: the server serves for 1s,
// then answers 503 to the end; each client's requests follow each other
// 600ms apart, so r/2 starts after the server stopped serving and gives
// up: not lost to impatience (stamped from the process's start, it was
// "served from 0s": FAIL).
func TestRunExecGiveUpAfterThink(t *testing.T) {
	phases := `[{name: up, for: 1s, respond: ok}, {name: down, respond: {status: 503}, retry_after: {form: none}}]`
	tl, outs := runTimed(t, timedScenario(t, phases, 4), "300ms,100ms,600ms,-1")
	failed := 0
	for _, o := range outs {
		if o.Result != timeline.ResultOK {
			failed++
			if o.Start < int64(time.Second) {
				t.Logf("outcome %+v started before the server stopped serving (a slow host)", o)
			}
		}
	}
	if failed == 0 {
		t.Fatalf("outcomes %+v; want r/2 to fail", outs)
	}
	c := analyzeWith(t, tl, "give-up:within=500ms").Check(analyzer.CheckGiveUp)
	if c == nil || c.Status != analyzer.StatusPass {
		t.Errorf("give-up %+v; want pass", c)
	}
}

// requestStamps keeps, per logical request of the fleet, the earliest
// arrival and the latest attempt's answer, from keys the stub derived
// from the path ("K/N") or from X-Client-Id and X-Retrylab-Request
// ("K req:N"); other keys, and ids outside the fleet or not written as
// the fleet writes them, are not the fleet's requests.
func TestRequestStamps(t *testing.T) {
	s := newRequestStamps(3, 2)
	for _, a := range []timeline.Attempt{
		{Key: "1/0", At: 50, Done: 60, Status: 503},
		{Key: "1/0", At: 10, Done: 20, Status: 503}, // recorded late: the earliest still wins
		{Key: "1/0", At: 90, Fault: timeline.FaultHang, Done: 300},
		{Key: "2 req:1", At: 5, Done: 7, Status: 200},
		{Key: "0/1", At: 40, Done: 45, Fault: timeline.FaultReset},
		{Key: "0/1", At: 30, Done: 33, Status: 429}, // earlier, recorded after: the latest stays
		{Key: "3/0", At: 1, Status: 200},            // no client 3
		{Key: "0/2", At: 1, Status: 200},            // no request 2
		{Key: "01/0", At: 1, Status: 200},           // not the fleet's spelling
		{Key: "+2/0", At: 1, Status: 200},
		{Key: "2 GET /v1/x", At: 1, Status: 200},
	} {
		s.add(&a)
	}
	tests := []struct {
		client, seq int
		want        seenRequest
		key         string
	}{
		{1, 0, seenRequest{first: 10, hasFirst: true}, "1/0"}, // its latest attempt hung: no answer
		{2, 1, seenRequest{first: 5, hasFirst: true, answered: 7, hasAnswered: true, byHeader: true}, "2 req:1"},
		{0, 1, seenRequest{first: 30, hasFirst: true, answered: 45, hasAnswered: true}, "0/1"},
		{0, 0, seenRequest{}, "0/0"},
		{2, 0, seenRequest{}, "2/0"},
		{5, 0, seenRequest{}, "5/0"}, // no such client
	}
	for _, tt := range tests {
		got := make([]seenRequest, 2)
		s.fill([]int{tt.client}, got)
		if got[tt.seq] != tt.want || got[tt.seq].key(tt.client, tt.seq) != tt.key {
			t.Errorf("fill(%d)[%d] = %+v, key %q; want %+v, %q", tt.client, tt.seq, got[tt.seq], got[tt.seq].key(tt.client, tt.seq), tt.want, tt.key)
		}
	}
	// A path-keyed attempt of the same request makes the path's key its key.
	s.add(&timeline.Attempt{Key: "2/1", At: 8, Done: 9, Status: 200})
	got := make([]seenRequest, 4)
	s.fill([]int{0, 2}, got)
	if got[3].byHeader || got[3].key(2, 1) != "2/1" || got[1].first != 30 {
		t.Errorf("after a path-keyed attempt, fill([0 2]) = %+v; want 2/1 keyed by its path, client 0's beside it", got)
	}
	var none *requestStamps // an exec run without a stub's records
	none.fill([]int{0}, got[:2])
	if got[0] != (seenRequest{}) {
		t.Errorf("nil fill = %+v; want nothing seen", got[0])
	}
}

// FuzzRequestStampsIndex: keys come from what clients send (paths,
// headers). No key panics, and a key taken for a request of the fleet is
// that request's key as the stub writes it.
func FuzzRequestStampsIndex(f *testing.F) {
	for _, k := range []string{"0/0", "17/3", "2 req:1", "3 GET /x", "", "/", " req:", "1/", "-1/0", "999999999/0", "9999999999/0"} {
		f.Add(k)
	}
	s := newRequestStamps(1000, 10)
	f.Fuzz(func(t *testing.T, key string) {
		i, byHeader, ok := s.index(key)
		if !ok {
			return
		}
		c, q := i/s.requests, i%s.requests
		want := strconv.Itoa(c) + "/" + strconv.Itoa(q)
		if byHeader {
			want = strconv.Itoa(c) + " req:" + strconv.Itoa(q)
		}
		if key != want {
			t.Errorf("index(%q) = client %d, request %d (byHeader %v): its key is %q", key, c, q, byHeader, want)
		}
		s.add(&timeline.Attempt{Key: key, At: 1, Status: 200})
	})
}
