package runner

import (
	"bytes"

	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// TestMain lets the test binary play an exec subject: with
// RETRYLAB_FAKE_CLIENT set it is a tiny client program (no curl needed);
// with noise.ProbeArg first it is a noise probe (probeCommand).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == noise.ProbeArg {
		os.Exit(noise.ProbeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	if mode := os.Getenv("RETRYLAB_FAKE_CLIENT"); mode != "" {
		os.Exit(fakeClient(mode))
	}
	if d := os.Getenv(hogEnv); d != "" {
		os.Exit(hog(d))
	}
	os.Exit(m.Run())
}

// fakeClient modes:
//
//	ok           request r/0 … r/N-1 once each, print a result line for each
//	hello        print "hello", exit 3
//	silent       request every r/i, print nothing, exit 0
//	hang         print nothing, send nothing, sleep (the watchdog kills it)
//	send-hang    request r/0, then sleep without printing
//	slow:D       sleep client×D, then behave as ok (an old program: no ready line)
//	slow-ready:D sleep client×D, print "ready", then behave as ok
//	ok-exit:S    behave as ok, then exit with status S
//	forms        behave as ok, naming request i in the form (client+i)%4
//	             of r/i, /r/i, $RETRYLAB_BASE_URL/r/i, /c/{client}/r/i
//	lie          request every r/i once and print "ok" whatever the answer
//	timed:SPEC   a client with a budget per request (see fakeTimed)
//	header-only:HOW  a client that cannot vary its path (see fakeHeaderOnly)
//	retrylab     request every r/i through our own client package with
//	             the policy in $RETRYLAB_FAKE_POLICY (base,cap,budget), one
//	             after the other, print a result line for each
func fakeClient(mode string) int {
	if list, ok := os.LookupEnv("RETRYLAB_CLIENTS"); ok {
		return fakeMulti(mode, list)
	}
	base := os.Getenv("RETRYLAB_BASE_URL")
	client, _ := strconv.Atoi(os.Getenv("RETRYLAB_CLIENT"))
	n, _ := strconv.Atoi(os.Getenv("RETRYLAB_REQUESTS"))
	if spec, ok := strings.CutPrefix(mode, "timed:"); ok {
		return fakeTimed(spec, []int{client}, func(int) string { return base }, n)
	}
	if how, ok := strings.CutPrefix(mode, "header-only:"); ok {
		return fakeHeaderOnly(how, []int{client}, func(int) string { return base }, func(int) string { return os.Getenv("RETRYLAB_API_KEY") }, n)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	get := func(i int) bool {
		resp, err := hc.Get(fmt.Sprintf("%s/r/%d", base, i))
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode < 300
	}
	if d, ok := strings.CutPrefix(mode, "slow-ready:"); ok {
		dd, _ := time.ParseDuration(d)
		time.Sleep(time.Duration(client) * dd) // a real client process: outside any synctest bubble
		fmt.Println(subjects.ReadyLine)
		mode = "ok"
	}
	if d, ok := strings.CutPrefix(mode, "slow:"); ok {
		dd, _ := time.ParseDuration(d)
		time.Sleep(time.Duration(client) * dd) // a real client process: outside any synctest bubble
		mode = "ok"
	}
	exit := 0
	if s, ok := strings.CutPrefix(mode, "ok-exit:"); ok {
		exit, _ = strconv.Atoi(s)
		mode = "ok"
	}
	switch mode {
	case "lie":
		for i := range n {
			get(i)
			fmt.Printf("ok /r/%d\n", i) // whatever the answer was
		}
	case "retrylab":
		return fakeRetrylab(base, client, n)
	case "forms":
		for i := range n {
			path := [4]string{
				fmt.Sprintf("r/%d", i),
				fmt.Sprintf("/r/%d", i),
				fmt.Sprintf("%s/r/%d", base, i),
				fmt.Sprintf("/c/%d/r/%d", client, i),
			}[(client+i)%4]
			if get(i) {
				fmt.Println("ok", path)
			} else {
				fmt.Println("fail", path, "error")
			}
		}
	case "ok":
		for i := range n {
			if get(i) {
				fmt.Printf("ok /r/%d\n", i)
			} else {
				fmt.Printf("fail /r/%d error\n", i)
			}
		}
	case "hello":
		fmt.Println("hello")
		return 3
	case "silent":
		for i := range n {
			get(i)
		}
	case "hang":
		time.Sleep(time.Minute) // a real client process that hangs (no synctest bubble); the watchdog kills it
	case "send-hang":
		get(0)
		time.Sleep(time.Minute) // a real client process that hangs (no synctest bubble); the watchdog kills it
	}
	return exit
}

func fakeProgram(t *testing.T, mode string) subjects.Program {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	return subjects.Program{Path: exe, Env: []string{"RETRYLAB_FAKE_CLIENT=" + mode}}
}

const execScenario = `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 3, requests: 2, timeout: 2s}
`

// The plumbing of an exec subject fails in several ways; each outcome
// says what happened and what was expected, is marked Harness, and the end
// record carries it. A program that sent a request and then hung is the
// library hanging: hung, not Harness.
func TestRunExecPlumbing(t *testing.T) {
	tests := []struct {
		name    string
		prog    subjects.Program
		result  string
		harness bool
		want    string // in every outcome's error
		wantEnd string // in the end record's errors ("": none)
	}{
		{"nonexistent", subjects.Program{Path: "/nonexistent/retrylab-client"}, timeline.ResultError, true,
			"exec /nonexistent/retrylab-client: could not start the program: ", "could not start the program: "},
		{"hello and exit 3", fakeProgram(t, "hello"), timeline.ResultError, true,
			`: the program broke the line protocol: stdout line 1: "hello": want "ok PATH" or "fail PATH REASON", where PATH is /r/N, r/N or the request's URL; no result line for /r/`,
			`the program broke the line protocol: stdout line 1: "hello": want "ok PATH"`},
		{"no result lines", fakeProgram(t, "silent"), timeline.ResultError, true,
			": the program exited with status 0 without printing a result line; no result line for /r/",
			": the program exited with status 0 without printing a result line"},
		{"prints and sends nothing, hangs", fakeProgram(t, "hang"), timeline.ResultHung, true,
			": the program printed no result line for /r/0 within the fleet watchdog (1 request × fleet.timeout 1s = 1s after the start barrier) and made no request at all",
			": the program printed no result line within the fleet watchdog (1 request × fleet.timeout 1s = 1s after the start barrier) and made no request at all; it was not ready at the start barrier either (timeout 500ms)"},
		{"sends, then hangs", fakeProgram(t, "send-hang"), timeline.ResultHung, false,
			": the program printed no result line for /r/0 within the fleet watchdog (1 request × fleet.timeout 1s = 1s after the start barrier); it had made a request, so its library is taken to have hung", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := mustParse(t, execScenario)
			if tt.result == timeline.ResultHung {
				sc.Fleet.Requests, sc.Fleet.Timeout = 1, time.Second // the watchdog: 1 × 1s
			}
			opts := RunOptions{Subject: tt.prog}
			if tt.name == "prints and sends nothing, hangs" {
				opts.ReadyTimeout = 500 * time.Millisecond // it is never ready
			}
			outs, end, v := runExec(t, sc, opts)
			for _, o := range outs {
				if o.Result != tt.result || o.Harness != tt.harness || !strings.Contains(o.Error, tt.want) {
					t.Errorf("outcome %+v; want result %s, harness %v, error containing %q", o, tt.result, tt.harness, tt.want)
				}
			}
			errs := strings.Join(end.Errors, "\n")
			if tt.wantEnd != "" && !strings.Contains(errs, "subject plumbing: exec ") || !strings.Contains(errs, tt.wantEnd) {
				t.Errorf("end.Errors = %q; want the plumbing failure %q", end.Errors, tt.wantEnd)
			}
			if tt.wantEnd == "" && len(end.Errors) != 0 {
				t.Errorf("end.Errors = %q; want none", end.Errors)
			}
			// A harness failure never passes. Hung harness outcomes are
			// still judged by the analyzer's budget check (FAIL), so only
			// the others are asserted INCONCLUSIVE here.
			if tt.harness && (v.Status == analyzer.VerdictPass ||
				tt.result != timeline.ResultHung && v.Status != analyzer.VerdictInconclusive) {
				t.Errorf("verdict %s (failed %v); want INCONCLUSIVE", v.Status, v.Failed())
			}
		})
	}
	t.Run("exit status", func(t *testing.T) {
		sc := mustParse(t, execScenario)
		prog := subjects.Program{Path: "sh", Args: []string{"-c", `echo "ok /r/0"; echo boom >&2; exit 3`}}
		outs, end, _ := runExec(t, sc, RunOptions{Subject: prog})
		var ok, missing int
		for _, o := range outs {
			switch {
			case o.Result == timeline.ResultOK && o.Harness &&
				o.Error == "exec sh: the program exited with status 3 after printing 1 of its 2 result lines; stderr: boom":
				ok++
			case o.Result == timeline.ResultError && o.Harness &&
				o.Error == "exec sh: the program exited with status 3 after printing 1 of its 2 result lines; no result line for /r/1; stderr: boom":
				missing++
			default:
				t.Errorf("outcome %+v", o)
			}
		}
		if ok != 3 || missing != 3 {
			t.Errorf("%d ok and %d missing outcomes, all harness; want 3 and 3 (r/0 printed, r/1 not)", ok, missing)
		}
		if want := []string{"subject plumbing: exec sh: the program exited with status 3 after printing 1 of its 2 result lines; stderr: boom"}; !reflect.DeepEqual(end.Errors, want) {
			t.Errorf("end.Errors = %q; want %q", end.Errors, want)
		}
	})
	t.Run("fail line, then a signal", func(t *testing.T) {
		sc := mustParse(t, execScenario)
		sc.Fleet.Clients, sc.Fleet.Requests = 1, 1
		prog := subjects.Program{Path: "sh", Args: []string{"-c", `echo "fail r/0 gave-up after 3"; kill -TERM $$`}}
		outs, _, _ := runExec(t, sc, RunOptions{Subject: prog})
		want := "exec sh: the program was ended by a signal (signal: terminated) after printing all its result lines; its line's reason: gave-up after 3"
		if len(outs) != 1 || outs[0].Result != timeline.ResultGaveUp || !outs[0].Harness || outs[0].Error != want {
			t.Errorf("outcomes %+v; want one gave-up, harness, error %q", outs, want)
		}
	})
	t.Run("duplicate line", func(t *testing.T) {
		sc := mustParse(t, execScenario)
		sc.Fleet.Clients = 1
		prog := subjects.Program{Path: "sh", Args: []string{"-c", `echo "ok r/0"; echo "ok /r/1"; echo "ok r/1"`}}
		outs, _, _ := runExec(t, sc, RunOptions{Subject: prog})
		want := `exec sh: the program broke the line protocol: stdout line 3: "ok r/1": a second result line for /r/1 (the first was line 2): want one per request`
		for _, o := range outs {
			if o.Result != timeline.ResultOK || !o.Harness || o.Error != want {
				t.Errorf("outcome %+v; want ok (as printed), harness, error %q", o, want)
			}
		}
	})
}

// The start barrier: processes that take client × 250ms to start (with or
// without a ready line) all send their first request at time zero, not
// when they happen to be up; FleetReady says the fleet was ready then.
func TestRunExecBarrier(t *testing.T) {
	for _, mode := range []string{"slow-ready:250ms", "slow:250ms"} {
		t.Run(mode, func(t *testing.T) {
			sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 3, requests: 1, timeout: 5s}
`)
			var buf bytes.Buffer
			sum, err := Run(t.Context(), sc, RunOptions{Subject: fakeProgram(t, mode), Timeline: &buf})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Results[timeline.ResultOK] != 3 {
				t.Fatalf("Summary = %+v; want 3 ok", sum)
			}
			checkBarrierHeld(t, buf.Bytes()) // else client 2's request arrives at 500ms or later
		})
	}
}

// A process that is never ready holds the barrier only ReadyTimeout; the
// end record says so, and its outcomes name the barrier and its timeout.
func TestRunExecBarrierTimeout(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 1, requests: 1, timeout: 500ms}
`)
	start := time.Now()
	outs, end, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "hang"), ReadyTimeout: 300 * time.Millisecond})
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("run took %v; want about 300ms + 500ms", el)
	}
	const barrier = `start barrier: 1 of 1 exec processes were not ready (no "ready" line, no request, not exited) within its 300ms timeout; it opened without them`
	if end.FleetReady != 0 || len(end.Errors) == 0 || end.Errors[0] != barrier {
		t.Errorf("end = %+v; want FleetReady unknown and the barrier timeout in Errors", end)
	}
	want := ": the program printed no result line for /r/0 within the fleet watchdog (1 request × fleet.timeout 500ms = 500ms after the start barrier) and made no request at all; it was not ready at the start barrier either (timeout 300ms)"
	if len(outs) != 1 || outs[0].Result != timeline.ResultHung || !outs[0].Harness || !strings.HasSuffix(outs[0].Error, want) {
		t.Errorf("outcomes %+v; want one hung, harness, error ending %q", outs, want)
	}
	if v.Status == analyzer.VerdictPass { // FAIL today: the analyzer's budget check judges hung harness outcomes
		t.Errorf("verdict %s; want not PASS", v.Status)
	}
}

// A process that gets ready only after the barrier timed out plays the
// scenario late: its results are kept, but marked Harness, naming the
// barrier; the processes that were ready are untouched.
func TestRunExecBarrierLate(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 2, requests: 1, timeout: 5s}
`)
	// Client 1 sleeps 4s before its ready line; the barrier waits 2s (a
	// race-enabled test binary can take most of a second to start).
	outs, end, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "slow-ready:4s"), ReadyTimeout: 2 * time.Second})
	const late = ": the program was not ready at the start barrier, which opened without it after its 2s timeout: its requests ran late against the scenario"
	for _, o := range outs {
		switch o.Client {
		case "0":
			if o.Result != timeline.ResultOK || o.Harness || o.Error != "" {
				t.Errorf("client 0's outcome %+v; want ok, not harness", o)
			}
		default:
			if o.Result != timeline.ResultOK || !o.Harness || !strings.HasSuffix(o.Error, late) {
				t.Errorf("client 1's outcome %+v; want ok (as printed), harness, error ending %q", o, late)
			}
		}
	}
	if len(end.Errors) != 2 || !strings.HasPrefix(end.Errors[0], "start barrier: 1 of 2 exec processes were not ready") ||
		!strings.HasSuffix(end.Errors[1], late) || end.FleetReady < int64(time.Second) {
		t.Errorf("end = %+v; want the barrier and the late process in Errors, FleetReady about 2s", end)
	}
	if v.Status != analyzer.VerdictInconclusive {
		t.Errorf("verdict %s; want INCONCLUSIVE", v.Status)
	}
}

// An exec fleet cut short by the duration cap: the processes are killed,
// their missing requests are canceled (in flight), not hung, not harness.
func TestRunExecCapped(t *testing.T) {
	sc := mustParse(t, `
duration: 500ms
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 2, requests: 2, timeout: 1m}
`)
	var buf bytes.Buffer
	sum, err := Run(t.Context(), sc, RunOptions{Subject: fakeProgram(t, "send-hang"), Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Results[timeline.ResultCanceled] != 4 || sum.Harness != 0 {
		t.Errorf("Summary = %+v; want 4 canceled, none harness", sum)
	}
	_, end := decodeEnd(t, buf.Bytes())
	if end.Reason != timeline.EndDuration || end.InFlight != 4 || end.Unstarted != 0 {
		t.Errorf("end = %+v; want duration, 4 in flight", end)
	}
}

// runExec runs sc with prog and returns the outcomes, the end record and
// the analyzer's verdict on the timeline.
func runExec(t *testing.T, sc *scenarios.Scenario, opts RunOptions) ([]timeline.Outcome, *timeline.End, *analyzer.Verdict) {
	t.Helper()
	var buf bytes.Buffer
	opts.Timeline = &buf
	sum, err := Run(t.Context(), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, _, outs := decodeAll(t, buf.Bytes())
	if int64(len(outs)) != sum.Planned {
		t.Fatalf("%d outcomes; want %d", len(outs), sum.Planned)
	}
	_, end := decodeEnd(t, buf.Bytes())
	v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), analyzer.Options{})
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	return outs, end, v
}

// A program that prints every result line and then exits non-zero broke
// the contract: every outcome of the process keeps its printed result
// but is marked Harness, with an error naming the status, and the run is
// INCONCLUSIVE, not PASS.
func TestRunExecExitStatusAfterAllLines(t *testing.T) {
	sc := mustParse(t, execScenario)
	outs, end, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "ok-exit:3")})
	const want = "the program exited with status 3 after printing all its result lines"
	for _, o := range outs {
		if o.Result != timeline.ResultOK || !o.Harness || !strings.Contains(o.Error, want) {
			t.Errorf("outcome %+v; want result ok (as printed), harness, error containing %q", o, want)
		}
	}
	if !strings.Contains(strings.Join(end.Errors, "\n"), want) {
		t.Errorf("end.Errors = %q; want the exit status", end.Errors)
	}
	if v.Status != analyzer.VerdictInconclusive {
		t.Errorf("verdict %s (%v); want INCONCLUSIVE", v.Status, v.Inconclusive)
	}
}

// Result lines may name the request as r/N, /r/N, the request's URL or
// /c/{client}/r/N: all are the library's results, and the run passes.
func TestRunExecLineForms(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 4, requests: 2, timeout: 5s}
expect: {allow_unexercised: true}
`)
	outs, end, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "forms")})
	for _, o := range outs {
		if o.Result != timeline.ResultOK || o.Harness || o.Error != "" {
			t.Errorf("outcome %+v; want ok, not harness", o)
		}
	}
	if len(end.Errors) != 0 || v.Status != analyzer.VerdictPass {
		t.Errorf("end.Errors %q, verdict %s (%v); want none, PASS", end.Errors, v.Status, v.Inconclusive)
	}
}

// A Program given its own Timeout is killed at it, and the hung outcomes
// name that bound, not the fleet watchdog; without one, the program's
// deadline comes after the barrier's wait and the watchdog.
func TestRunExecOwnTimeout(t *testing.T) {
	sc := mustParse(t, execScenario)
	sc.Fleet.Clients, sc.Fleet.Requests, sc.Fleet.Timeout = 1, 1, 10*time.Second
	prog := fakeProgram(t, "send-hang")
	prog.Timeout = 2 * time.Second // time for a race-enabled binary to start and send
	outs, _, _ := runExec(t, sc, RunOptions{Subject: prog})
	want := ": the program printed no result line for /r/0 within the exec program's own timeout (2s after it started); it had made a request, so its library is taken to have hung"
	if len(outs) != 1 || outs[0].Result != timeline.ResultHung || outs[0].Harness || !strings.HasSuffix(outs[0].Error, want) {
		t.Errorf("outcomes %+v; want one hung, not harness, error ending %q", outs, want)
	}
	// 10 requests × 1 minute: past subjects.DefaultProgramTimeout.
	if got, want := programTimeout(0, DefaultReadyTimeout, 10*time.Minute), 12*time.Minute; got != want {
		t.Errorf("programTimeout(0, 1m, 10m) = %v; want %v", got, want)
	}
	if got := programTimeout(time.Second, DefaultReadyTimeout, 10*time.Minute); got != time.Second {
		t.Errorf("programTimeout(1s, ...) = %v; want the program's own 1s", got)
	}
}

// TestRunExecReportedOKIsAClaim: a program that prints ok after a 503 (a
// caller that checks nothing) lost its requests; the analyzer checks the
// claim against the stub's records and give-up fails.
func TestRunExecReportedOKIsAClaim(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{for: 5s, respond: {status: 503}}, {respond: ok}]}
fleet: {clients: 3, requests: 2, timeout: 5s}
subject: {policy: {budget: 10s}}
`)
	_, _, v := runExec(t, sc, RunOptions{Subject: fakeProgram(t, "lie")})
	c := v.Check(analyzer.CheckGiveUp)
	if v.Status != analyzer.VerdictFail || c == nil || c.Status != analyzer.StatusFail || !strings.Contains(c.Examples[0].Detail, "reported ok, the server never answered 2xx (1 attempt recorded)") {
		t.Errorf("verdict %s, give-up %+v; want FAIL: the stub answered 503 to every request the program reported ok", v.Status, c)
	}
}

// checkBarrierHeld: every attempt of the timeline arrived within 300ms of
// time zero (the start barrier held the fleet until all were ready), and
// the end says the fleet was ready at time zero, without errors.
func checkBarrierHeld(t *testing.T, tl []byte) {
	t.Helper()
	_, atts, _ := decodeAll(t, tl)
	for _, a := range atts {
		if a.At < 0 || a.At > int64(300*time.Millisecond) {
			t.Errorf("attempt %s arrived at %v; want within 300ms of time zero", a.Key, time.Duration(a.At))
		}
	}
	_, end := decodeEnd(t, tl)
	if end.FleetReady != 1 || len(end.Errors) != 0 {
		t.Errorf("end = %+v; want FleetReady 1 (ready at time zero), no errors", end)
	}
}

// A gRPC program's first call (HTTP/2 with prior knowledge, its identity
// in x-retrylab-path) makes its client ready at the exec gate, as an
// HTTP/1 request's path does; a head cut short is not read yet.
func TestClientOfHeadH2(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/retrylab.v1.Stub/Call"}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"x-retrylab-path", "/c/7/r/0"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	b := buf.Bytes()
	if id, ok := clientOfHead(b, 10, nil); !ok || id != 7 {
		t.Errorf("clientOfHead(h2 head of client 7) = %d, %v; want 7, true", id, ok)
	}
	if _, whole := h2Head(b[:len(b)-3]); whole {
		t.Errorf("h2Head(cut short) whole; want not yet")
	}
	if _, ok := clientOfHead(b, 5, nil); ok {
		t.Errorf("clientOfHead(client 7 of a fleet of 5) ok; want false")
	}
}
