package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/timeline"
)

// execClientEnv, when set, makes the test binary an exec subject
// (TestMain): it sends each of its requests until it is answered below
// 500 or it has made that many attempts, waiting 100-200 ms between them
// (so no retry is instant), and prints a result line for each.
const execClientEnv = "RETRYLAB_TEST_EXEC_CLIENT"

func execClient(attempts string) int {
	max, _ := strconv.Atoi(attempts)
	base := os.Getenv("RETRYLAB_BASE_URL")
	n, _ := strconv.Atoi(os.Getenv("RETRYLAB_REQUESTS"))
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	for i := range n {
		ok := false
		for a := 1; a <= max && !ok; a++ {
			if a > 1 {
				time.Sleep(100*time.Millisecond + rand.N(100*time.Millisecond)) // a real process, outside any bubble
			}
			resp, err := hc.Get(fmt.Sprintf("%s/r/%d", base, i))
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode < 500
		}
		if ok {
			fmt.Printf("ok r/%d\n", i)
		} else {
			fmt.Printf("fail r/%d gave-up after %d attempts\n", i, max)
		}
	}
	return 0
}

// downScenario: the server answers 503 without Retry-After to the end.
const downScenario = `name: down
duration: 20s
server:
  phases:
    - {name: down, respond: {status: 503}, retry_after: {form: none}}
fleet: {clients: 3, requests: 1, timeout: 10s}
`

// runExecPolicy runs an exec client making 6 attempts a request against
// downScenario plus extra (a subject block), with args, and returns its
// stdout, the timeline's meta and the verdict.
func runExecPolicy(t *testing.T, extra string, args ...string) (string, *timeline.Meta, *analyzer.Verdict) {
	t.Helper()
	self, err := os.Executable()
	if err != nil || strings.ContainsAny(self, " \t") {
		t.Skipf("the test binary %q cannot be an exec: subject", self)
	}
	t.Setenv(execClientEnv, "6")
	out := t.TempDir()
	file := writeFile(t, "down.yaml", downScenario+extra)
	vj := filepath.Join(out, "v.json")
	code, stdout, stderr := runCmd(t, append([]string{"run", file, "--subject", "exec:" + self, "--quiet", "--no-report",
		"--out", out, "--json", vj}, args...)...)
	if code == exitUsage {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	tl, _ := filepath.Glob(filepath.Join(out, "*", "timeline.ndjson"))
	if len(tl) != 1 {
		t.Fatalf("timelines %v; want one\nstdout:\n%s\nstderr:\n%s", tl, stdout, stderr)
	}
	f, err := os.Open(tl[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rec timeline.Record
	if err := timeline.NewDecoder(f).Decode(&rec); err != nil || rec.Meta == nil {
		t.Fatalf("first record %+v, %v; want meta", rec, err)
	}
	b, err := os.ReadFile(vj)
	if err != nil {
		t.Fatal(err)
	}
	var v analyzer.Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return stdout, rec.Meta, &v
}

// TestRunExecStatedPolicy: an exec subject's stated policy, from --policy
// or from the scenario's subject.policy, lands in the timeline's meta as
// a Go subject's does, and attempts and amplification judge against it:
// 6 attempts a request PASS both under max_attempts=8, where without a
// stated policy attempts skips and amplification FAILs against its
// default 5; the summary says which.
func TestRunExecStatedPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an exec fleet for about 3 s of real time")
	}
	want := &timeline.Policy{MaxAttempts: 8, Budget: int64(6 * time.Second), Base: int64(200 * time.Millisecond), Cap: int64(4 * time.Second), Jitter: "full"}
	judged := func(t *testing.T, how string, v *analyzer.Verdict) {
		t.Helper()
		for _, id := range []string{analyzer.CheckAttempts, analyzer.CheckAmplification} {
			c := v.Check(id)
			if c == nil || c.Status != analyzer.StatusPass || c.Threshold != 8 {
				t.Errorf("%s: %s = %+v; want pass against the stated 8", how, id, c)
			}
		}
	}
	t.Run("flag", func(t *testing.T) {
		stdout, meta, v := runExecPolicy(t, "", "--policy", "max_attempts=8,budget=6s,base=200ms,cap=4s,jitter=full")
		if fmt.Sprint(meta.Policy) != fmt.Sprint(want) {
			t.Errorf("meta.Policy = %+v; want %+v", meta.Policy, want)
		}
		if !strings.Contains(string(meta.Source), `"max_attempts":8`) {
			t.Errorf("meta.Source %s; want the stated policy in the scenario it records", meta.Source)
		}
		if !strings.Contains(stdout, "  policy: stated base=200ms,cap=4s,max_attempts=8,budget=6s,jitter=full (") {
			t.Errorf("summary lacks the stated policy:\n%s", stdout)
		}
		judged(t, "--policy", v)
	})
	t.Run("scenario", func(t *testing.T) {
		_, meta, v := runExecPolicy(t, "subject: {policy: {max_attempts: 8, budget: 6s, base: 200ms, cap: 4s, jitter: full}}\n")
		if fmt.Sprint(meta.Policy) != fmt.Sprint(want) {
			t.Errorf("meta.Policy = %+v; want %+v", meta.Policy, want)
		}
		judged(t, "subject.policy", v)
	})
	t.Run("none", func(t *testing.T) {
		stdout, meta, v := runExecPolicy(t, "")
		if meta.Policy != nil {
			t.Errorf("meta.Policy = %+v; want none", meta.Policy)
		}
		if !strings.Contains(stdout, "  policy: none stated: attempts skips without a threshold") {
			t.Errorf("summary does not say no policy is stated:\n%s", stdout)
		}
		if c := v.Check(analyzer.CheckAttempts); c == nil || c.Status != analyzer.StatusSkip {
			t.Errorf("attempts = %+v; want skip", c)
		}
		if c := v.Check(analyzer.CheckAmplification); c == nil || c.Status != analyzer.StatusFail || c.Threshold != 5 {
			t.Errorf("amplification = %+v; want fail against the default 5", c)
		}
	})
}

// TestRunPolicyFlagErrors: a bad --policy is bad input (exit 2) naming
// the flag and the item, before anything runs.
func TestRunPolicyFlagErrors(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"max_attempts=8,budget=6x", `--policy: item 2 "budget=6x": budget: bad duration "6x"`},
		{"tries=3", `--policy: item 1 "tries=3": unknown key "tries"`},
		{"", "--policy: empty"},
	} {
		for _, cmd := range []string{"run", "compare"} {
			args := []string{cmd, "outage-delta", "--policy", tt.arg, "--out", t.TempDir()}
			if cmd == "compare" {
				args = append(args, "--subjects", "retrylab")
			}
			code, stdout, stderr := runCmd(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("%s --policy %q: exit %d, stderr %q, stdout %q; want %d, %q", cmd, tt.arg, code, stderr, stdout, exitUsage, tt.want)
			}
		}
	}
}

// TestVerdictFileToStdout: "-" as --json, --junit or --markdown writes
// that file to stdout, alone (the text verdict then goes to stderr), and
// creates no file named "-"; two files on stdout are refused naming both.
func TestVerdictFileToStdout(t *testing.T) {
	early, err := filepath.Abs("testdata/early.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, tt := range []struct {
		flag  string
		valid func(string) bool
	}{
		{"--json", func(s string) bool {
			var v analyzer.Verdict
			return json.Unmarshal([]byte(s), &v) == nil && v.Status != ""
		}},
		{"--junit", func(s string) bool { return strings.HasPrefix(s, "<?xml") && strings.Contains(s, "<testsuite") }},
		{"--markdown", func(s string) bool {
			return strings.Contains(s, "| `retry-after` |") && !strings.Contains(s, "✗ retry-after...")
		}},
	} {
		code, stdout, stderr := runCmd(t, "analyze", early, tt.flag, "-")
		if code != exitFailed || !tt.valid(stdout) {
			t.Errorf("analyze %s -: exit %d, stdout:\n%s\nwant %d and the file alone", tt.flag, code, stdout, exitFailed)
		}
		if !strings.Contains(stderr, "retrylab verdict: FAIL") {
			t.Errorf("analyze %s -: stderr %q; want the text verdict there", tt.flag, stderr)
		}
		if _, err := os.Stat("-"); err == nil {
			t.Errorf("analyze %s -: created a file named -", tt.flag)
		}
	}
	code, stdout, stderr := runCmd(t, "analyze", early, "--json", "-", "--markdown", "-")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--json and --markdown: only one verdict file can be written to stdout (-)") {
		t.Errorf("--json - --markdown -: exit %d, stdout %q, stderr %q; want %d naming both", code, stdout, stderr, exitUsage)
	}
}

// TestSummarySaysWhyGaveUp: a summary with gave-up outcomes says how many
// the retry budget shed and what the give-up check judges; one without
// says nothing of it.
func TestSummarySaysWhyGaveUp(t *testing.T) {
	for _, tt := range []struct {
		results      map[string]int64
		shed         int64
		want, reject []string
	}{
		{map[string]int64{"gave-up": 4072, "ok": 9428}, 4072,
			[]string{"gave-up 4072, all shed by the subject's retry budget (it refused their retries", "give-up fails only requests given up although the server was serving within their budget"}, nil},
		{map[string]int64{"gave-up": 10, "ok": 5}, 4,
			[]string{"gave-up 10, 4 of them shed by the subject's retry budget", "give-up fails only"}, nil},
		{map[string]int64{"gave-up": 3}, 0,
			[]string{"  gave-up 3; give-up fails only"}, []string{"shed"}},
		{map[string]int64{"ok": 3}, 0, nil, []string{"give-up"}},
	} {
		var b strings.Builder
		printSummary(&b, &runner.Summary{Scenario: "s", Subject: "retrylab", Results: tt.results, Shed: tt.shed}, "")
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("results %v, shed %d: summary lacks %q:\n%s", tt.results, tt.shed, w, b.String())
			}
		}
		for _, r := range tt.reject {
			if strings.Contains(b.String(), r) {
				t.Errorf("results %v, shed %d: summary says %q:\n%s", tt.results, tt.shed, r, b.String())
			}
		}
	}
}
