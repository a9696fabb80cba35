package runner

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// fakeMulti is fakeClient for a process playing several clients (list is
// $RETRYLAB_CLIENTS). Modes:
//
//	ok            every client at once, each requesting r/0 … r/N-1 in
//	              turn, naming its lines /c/K/r/i or the URL in turn; with
//	              fleet.api_keys, a client whose key is not "key-K" fails
//	slow-ready:D  sleep first-client×D, print "ready", then behave as ok
//	slow:D        sleep first-client×D, then behave as ok (no ready line)
//	first-exit:S  play the first client only, then exit with status S
//	skip-last     play every client but the last, exit 0
//	first-hang    play the first client only, then sleep
//	bare          print "ok r/0" (names no client), then behave as ok
//	timed:SPEC    every client at once as fakeTimed
//	header-only:HOW  every client at once as fakeHeaderOnly
//
// With $RETRYLAB_FAKE_DIR set it writes its list there, one file per
// process, so that a test sees how many processes ran.
func fakeMulti(mode, list string) int {
	ids, err := subjects.ParseClients(list, 1<<20)
	if err != nil || len(ids) == 0 {
		fmt.Fprintln(os.Stderr, "RETRYLAB_CLIENTS:", err)
		return 2
	}
	if dir := os.Getenv("RETRYLAB_FAKE_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(ids[0])), []byte(list), 0o644)
	}
	var keys []string
	if k, ok := os.LookupEnv("RETRYLAB_API_KEYS"); ok {
		keys = strings.Split(k, ",")
	}
	prefix := os.Getenv("RETRYLAB_BASE_URL_PREFIX")
	n, _ := strconv.Atoi(os.Getenv("RETRYLAB_REQUESTS"))
	if spec, ok := strings.CutPrefix(mode, "timed:"); ok {
		return fakeTimed(spec, ids, func(id int) string { return prefix + strconv.Itoa(id) }, n)
	}
	if how, ok := strings.CutPrefix(mode, "header-only:"); ok {
		keyOf := func(j int) string {
			if j < len(keys) {
				return keys[j]
			}
			return ""
		}
		return fakeHeaderOnly(how, ids, func(id int) string { return prefix + strconv.Itoa(id) }, keyOf, n)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	var mu sync.Mutex
	play := func(j int) {
		id := ids[j]
		base := prefix + strconv.Itoa(id)
		for i := range n {
			path := [2]string{fmt.Sprintf("/c/%d/r/%d", id, i), fmt.Sprintf("%s/r/%d", base, i)}[(id+i)%2]
			line := "ok " + path
			resp, err := hc.Get(fmt.Sprintf("%s/r/%d", base, i))
			switch {
			case err != nil:
				line = "fail " + path + " error " + err.Error()
			case keys != nil && (j >= len(keys) || keys[j] != "key-"+strconv.Itoa(id)):
				line = "fail " + path + " error wrong key"
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					line = "fail " + path + " error status " + resp.Status
				}
			}
			mu.Lock()
			fmt.Println(line)
			mu.Unlock()
		}
	}
	playAll := func(js []int) {
		var wg sync.WaitGroup
		for _, j := range js {
			wg.Go(func() { play(j) })
		}
		wg.Wait()
	}
	all := make([]int, len(ids))
	for j := range all {
		all[j] = j
	}
	for _, p := range []string{"slow-ready:", "slow:"} {
		if d, ok := strings.CutPrefix(mode, p); ok {
			dd, _ := time.ParseDuration(d)
			time.Sleep(time.Duration(ids[0]) * dd) // a real client process: outside any synctest bubble
			if p == "slow-ready:" {
				fmt.Println(subjects.ReadyLine)
			}
			mode = "ok"
		}
	}
	if s, ok := strings.CutPrefix(mode, "first-exit:"); ok {
		play(0)
		fmt.Fprintln(os.Stderr, "boom")
		code, _ := strconv.Atoi(s)
		return code
	}
	switch mode {
	case "ok":
		playAll(all)
	case "bare":
		fmt.Println("ok r/0")
		playAll(all)
	case "skip-last":
		playAll(all[:len(all)-1])
	case "first-hang":
		play(0)
		time.Sleep(time.Minute) // a real client process that hangs (no synctest bubble); the watchdog kills it
	}
	return 0
}

// fakeMultiProgram is fakeProgram writing each process's client list to
// a directory it returns.
func fakeMultiProgram(t *testing.T, mode string) (subjects.Program, string) {
	t.Helper()
	prog := fakeProgram(t, mode)
	dir := t.TempDir()
	prog.Env = append(prog.Env, "RETRYLAB_FAKE_DIR="+dir)
	return prog, dir
}

// processLists reads the client lists the processes of a fakeMulti run
// wrote, sorted.
func processLists(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lists []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, string(b))
	}
	slices.Sort(lists)
	return lists
}

// shape is an outcome without its times: what must not depend on how the
// clients are grouped into processes.
type shape struct {
	Client, Key, Result, Error string
	Harness                    bool
}

func shapes(outs []timeline.Outcome) []shape {
	var s []shape
	for _, o := range outs {
		s = append(s, shape{o.Client, o.Key, o.Result, o.Error, o.Harness})
	}
	slices.SortFunc(s, func(a, b shape) int { return strings.Compare(a.Key, b.Key) })
	return s
}

const multiScenario = `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 6, requests: 2, timeout: 5s, api_keys: [{prefix: key-}]}
expect: {allow_unexercised: true}
`

// Two processes playing three clients each (client i in process i mod 2,
// told its clients, their URL prefix and their API keys) give the same
// outcomes as one process per client, and the run passes.
func TestRunExecMultiClient(t *testing.T) {
	single := mustParse(t, multiScenario)
	outs1, end1, v1 := runExec(t, single, RunOptions{Subject: fakeProgram(t, "forms")})
	multi := mustParse(t, multiScenario)
	multi.Fleet.Processes = 2
	prog, dir := fakeMultiProgram(t, "ok")
	outs2, end2, v2 := runExec(t, multi, RunOptions{Subject: prog})
	if got, want := processLists(t, dir), []string{"0,2,4", "1,3,5"}; !slices.Equal(got, want) {
		t.Errorf("the processes played %q; want %q", got, want)
	}
	s1, s2 := shapes(outs1), shapes(outs2)
	if len(s2) != 12 || !slices.Equal(s1, s2) {
		t.Errorf("outcomes with 2 processes:\n%+v\nwith one process per client:\n%+v\nwant the same 12", s2, s1)
	}
	for _, o := range s2 {
		if o.Result != timeline.ResultOK || o.Harness || o.Error != "" {
			t.Errorf("outcome %+v; want ok, not harness", o)
		}
	}
	if len(end2.Errors) != 0 || v2.Status != analyzer.VerdictPass || end2.FleetReady == 0 {
		t.Errorf("2 processes: end.Errors %q, FleetReady %d, verdict %s (%v); want none, known, PASS", end2.Errors, end2.FleetReady, v2.Status, v2.Inconclusive)
	}
	if v1.Status != v2.Status || len(end1.Errors) != 0 {
		t.Errorf("verdicts %s (one per client) and %s (2 processes), end.Errors %q; want the same, none", v1.Status, v2.Status, end1.Errors)
	}
}

// One process playing three clients exits 3 after printing the first
// client's lines: every outcome of the process is harness and names the
// exit status; the first client's keep their printed result, the others'
// say which request had no line.
func TestRunExecMultiExitStatus(t *testing.T) {
	sc := mustParse(t, multiScenario)
	sc.Fleet.Clients, sc.Fleet.Processes = 3, 1
	prog := fakeProgram(t, "first-exit:3")
	outs, end, v := runExec(t, sc, RunOptions{Subject: prog})
	head := "exec " + prog.Path + " (process 0 of 1, 3 clients): the program exited with status 3 after printing 2 of its 6 result lines"
	for _, o := range outs {
		want, result := head+"; stderr: boom", timeline.ResultOK
		if o.Client != "0" {
			want, result = head+"; no result line for /c/"+o.Client+"/r/"+strings.TrimPrefix(o.Key, o.Client+"/")+"; stderr: boom", timeline.ResultError
		}
		if o.Result != result || !o.Harness || o.Error != want {
			t.Errorf("outcome %+v; want %s, harness, error %q", o, result, want)
		}
	}
	if want := []string{"subject plumbing: " + head + "; stderr: boom"}; !slices.Equal(end.Errors, want) {
		t.Errorf("end.Errors = %q; want %q", end.Errors, want)
	}
	if v.Status != analyzer.VerdictInconclusive {
		t.Errorf("verdict %s; want INCONCLUSIVE", v.Status)
	}
}

// A process that exits 0 without the lines of one of its clients: only
// that client's requests are harness, each naming its missing line.
func TestRunExecMultiMissingClient(t *testing.T) {
	sc := mustParse(t, multiScenario)
	sc.Fleet.Clients, sc.Fleet.Processes = 3, 1
	prog := fakeProgram(t, "skip-last")
	outs, end, _ := runExec(t, sc, RunOptions{Subject: prog})
	head := "exec " + prog.Path + " (process 0 of 1, 3 clients): the program exited with status 0 without printing a result line for this client"
	for _, o := range outs {
		switch o.Client {
		case "2":
			want := head + "; no result line for /c/2/r/" + strings.TrimPrefix(o.Key, "2/")
			if o.Result != timeline.ResultError || !o.Harness || o.Error != want {
				t.Errorf("outcome %+v; want error, harness, %q", o, want)
			}
		default:
			if o.Result != timeline.ResultOK || o.Harness || o.Error != "" {
				t.Errorf("outcome %+v; want ok, not harness", o)
			}
		}
	}
	if want := []string{"subject plumbing: " + head}; !slices.Equal(end.Errors, want) {
		t.Errorf("end.Errors = %q; want %q", end.Errors, want)
	}
}

// A process playing several clients that prints a bare "ok r/0" broke the
// protocol: the line names no client. Every outcome of it says so.
func TestRunExecMultiBareLine(t *testing.T) {
	sc := mustParse(t, multiScenario)
	sc.Fleet.Processes = 2
	outs, end, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "bare")})
	const want = `: the program broke the line protocol: stdout line 1: "ok r/0": PATH names no client: this process plays several clients (RETRYLAB_CLIENTS), so a result line must name one: /c/{client}/r/N or the request's URL`
	for _, o := range outs {
		if !o.Harness || !strings.Contains(o.Error, want) {
			t.Errorf("outcome %+v; want harness, error containing %q", o, want)
		}
	}
	if len(end.Errors) != 2 || v.Status != analyzer.VerdictInconclusive { // one per process: the texts name it
		t.Errorf("end.Errors = %q, verdict %s; want the protocol break of each process, INCONCLUSIVE", end.Errors, v.Status)
	}
}

// The watchdog kills a process that finished its first client and hung
// on the others: the first client's outcomes stand, the others are hung
// (the process had made requests: the library hangs), not harness.
func TestRunExecMultiHung(t *testing.T) {
	sc := mustParse(t, multiScenario)
	sc.Fleet.Clients, sc.Fleet.Processes, sc.Fleet.Requests, sc.Fleet.Timeout = 2, 1, 1, time.Second
	outs, end, _ := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "first-hang")})
	const want = ": the program printed no result line for /c/1/r/0 within the fleet watchdog (1 request × fleet.timeout 1s = 1s after the start barrier); the process had made a request, so its library is taken to have hung"
	for _, o := range outs {
		ok := o.Client == "0" && o.Result == timeline.ResultOK && !o.Harness ||
			o.Client == "1" && o.Result == timeline.ResultHung && !o.Harness && strings.HasSuffix(o.Error, want)
		if !ok {
			t.Errorf("outcome %+v; want client 0 ok, client 1 hung with %q, neither harness", o, want)
		}
	}
	if len(end.Errors) != 0 {
		t.Errorf("end.Errors = %q; want none", end.Errors)
	}
}

// The start barrier counts processes: three processes of two clients
// each, process p ready only after p × 250ms (with or without a ready
// line), all send their first requests at time zero.
func TestRunExecMultiBarrier(t *testing.T) {
	for _, mode := range []string{"slow-ready:250ms", "slow:250ms"} {
		t.Run(mode, func(t *testing.T) {
			sc := mustParse(t, multiScenario)
			sc.Fleet.Processes, sc.Fleet.Requests = 3, 1
			prog, dir := fakeMultiProgram(t, mode)
			var buf bytes.Buffer
			sum, err := Run(t.Context(), sc, RunOptions{Subject: prog, Timeline: &buf})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(processLists(t, dir)); got != 3 {
				t.Errorf("%d processes ran; want 3", got)
			}
			if sum.Results[timeline.ResultOK] != 6 || sum.Harness != 0 {
				t.Errorf("Summary = %+v; want 6 ok", sum)
			}
			checkBarrierHeld(t, buf.Bytes()) // else process 2's requests arrive at 500ms or later
		})
	}
}
