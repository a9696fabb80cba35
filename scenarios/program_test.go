package scenarios

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// TestMain lets the test binary play an exec subject: with
// RETRYLAB_FAKE_CLIENT set it is a tiny client program (no curl needed).
func TestMain(m *testing.M) {
	if mode := os.Getenv("RETRYLAB_FAKE_CLIENT"); mode != "" {
		os.Exit(fakeClient(mode))
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
func fakeClient(mode string) int {
	base := os.Getenv("RETRYLAB_BASE_URL")
	client, _ := strconv.Atoi(os.Getenv("RETRYLAB_CLIENT"))
	n, _ := strconv.Atoi(os.Getenv("RETRYLAB_REQUESTS"))
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
	switch mode {
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
	return 0
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

// The plumbing of an exec subject fails in four ways; each outcome says
// what happened, is marked Harness, and the end record carries it.
func TestRunExecPlumbing(t *testing.T) {
	tests := []struct {
		name    string
		prog    subjects.Program
		result  string
		harness bool
		want    string
	}{
		{"nonexistent", subjects.Program{Path: "/nonexistent/retrylab-client"}, timeline.ResultError, true, "could not start: "},
		{"hello and exit 3", fakeProgram(t, "hello"), timeline.ResultError, true, `broke the line protocol: "hello"`},
		{"no result lines", fakeProgram(t, "silent"), timeline.ResultError, true, "printed no result line for r/"},
		{"prints and sends nothing, hangs", fakeProgram(t, "hang"), timeline.ResultHung, true, "printed nothing and sent no request"},
		{"sends, then hangs", fakeProgram(t, "send-hang"), timeline.ResultHung, false, "no result line within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := mustParse(t, execScenario)
			if tt.name == "sends, then hangs" || tt.name == "prints and sends nothing, hangs" {
				sc.Fleet.Requests, sc.Fleet.Timeout = 1, time.Second // the watchdog: 1 × 1s
			}
			var buf bytes.Buffer
			sum, err := Run(t.Context(), sc, RunOptions{Subject: tt.prog, Timeline: &buf, ReadyTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, _, outs := decodeAll(t, buf.Bytes())
			if int64(len(outs)) != sum.Planned {
				t.Fatalf("%d outcomes; want %d", len(outs), sum.Planned)
			}
			for _, o := range outs {
				if o.Result != tt.result || o.Harness != tt.harness || !strings.Contains(o.Error, tt.want) {
					t.Errorf("outcome %+v; want result %s, harness %v, error containing %q", o, tt.result, tt.harness, tt.want)
				}
			}
			_, end := decodeEnd(t, buf.Bytes())
			if tt.harness && (len(end.Errors) == 0 || !strings.Contains(strings.Join(end.Errors, "\n"), tt.want)) {
				t.Errorf("end.Errors = %q; want the plumbing failure", end.Errors)
			}
			if !tt.harness && len(end.Errors) != 0 {
				t.Errorf("end.Errors = %q; want none", end.Errors)
			}
		})
	}
	t.Run("exit status", func(t *testing.T) {
		sc := mustParse(t, execScenario)
		var buf bytes.Buffer
		prog := subjects.Program{Path: "sh", Args: []string{"-c", `echo "ok /r/0"; echo boom >&2; exit 3`}}
		if _, err := Run(t.Context(), sc, RunOptions{Subject: prog, Timeline: &buf}); err != nil {
			t.Fatal(err)
		}
		_, _, outs := decodeAll(t, buf.Bytes())
		var ok, exit int
		for _, o := range outs {
			switch {
			case o.Result == timeline.ResultOK && !o.Harness:
				ok++
			case o.Harness && strings.Contains(o.Error, "exited with status 3; stderr: boom"):
				exit++
			default:
				t.Errorf("outcome %+v", o)
			}
		}
		if ok != 3 || exit != 3 {
			t.Errorf("%d ok and %d exit-status outcomes; want 3 and 3 (r/0 printed, r/1 not)", ok, exit)
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
			_, atts, _ := decodeAll(t, buf.Bytes())
			for _, a := range atts {
				// Without the barrier client 2's request would arrive at
				// 500ms or later.
				if a.At < 0 || a.At > int64(300*time.Millisecond) {
					t.Errorf("attempt %s arrived at %v; want within 300ms of time zero", a.Key, time.Duration(a.At))
				}
			}
			_, end := decodeEnd(t, buf.Bytes())
			if end.FleetReady != 1 || len(end.Errors) != 0 {
				t.Errorf("end = %+v; want FleetReady 1 (ready at time zero), no errors", end)
			}
		})
	}
}

// A process that is never ready holds the barrier only ReadyTimeout; the
// end record says so.
func TestRunExecBarrierTimeout(t *testing.T) {
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: ok}]}
fleet: {clients: 1, requests: 1, timeout: 500ms}
`)
	var buf bytes.Buffer
	start := time.Now()
	if _, err := Run(t.Context(), sc, RunOptions{Subject: fakeProgram(t, "hang"), Timeline: &buf, ReadyTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("run took %v; want about 300ms + 500ms", el)
	}
	_, end := decodeEnd(t, buf.Bytes())
	if end.FleetReady != 0 || len(end.Errors) == 0 || !strings.Contains(end.Errors[0], "1 of 1 exec processes were not ready after 300ms") {
		t.Errorf("end = %+v; want FleetReady unknown and the barrier timeout in Errors", end)
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
