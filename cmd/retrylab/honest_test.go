package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/runner"
)

// Flags that would silently mean "the scenario's value" when given as 0
// are refused, naming the flag.
func TestRunRefusesZeroes(t *testing.T) {
	for _, flag := range []string{"--clients", "--requests", "--duration"} {
		out := t.TempDir()
		val := "0"
		code, _, stderr := runCmd(t, "run", "outage-delta", "--quiet", "--out", out, flag, val)
		if code != exitUsage || !strings.Contains(stderr, flag+" must be") {
			t.Errorf("run %s 0: exit %d, stderr %q; want %d naming %s", flag, code, stderr, exitUsage, flag)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("run %s 0 created %d entries in --out; want none", flag, len(ents))
		}
	}
}

// Output paths that cannot be written are found before the run starts:
// exit 2 naming the flag, and no run directory.
func TestUnwritableOutputsFoundBeforeRun(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tt := range []struct {
		flag string
		args []string
	}{
		{"--json", []string{"--out", out, "--json", filepath.Join(blocker, "v.json")}},
		{"--junit", []string{"--out", out, "--junit", filepath.Join(blocker, "j.xml")}},
		{"--markdown", []string{"--out", out, "--markdown", dir}},
		{"--out", []string{"--out", filepath.Join(blocker, "out")}},
	} {
		start := time.Now()
		args := append([]string{"run", "testdata/tiny-outage.yaml", "--quiet"}, tt.args...)
		code, _, stderr := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, tt.flag+" ") {
			t.Errorf("%s unwritable: exit %d, stderr %q; want %d naming %s", tt.flag, code, stderr, exitUsage, tt.flag)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s unwritable: took %v; the run started", tt.flag, el)
		}
		if m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-*")); len(m) != 0 {
			t.Errorf("%s unwritable: run directories %v; want none", tt.flag, m)
		}
	}
	code, _, stderr := runCmd(t, "analyze", "testdata/early.ndjson", "--json", filepath.Join(blocker, "v.json"))
	if code != exitUsage || !strings.Contains(stderr, "--json") {
		t.Errorf("analyze --json unwritable: exit %d, stderr %q; want %d naming --json", code, stderr, exitUsage)
	}
}

func TestAnalyzeDirectoryIsBadInput(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "analyze", dir)
	if code != exitUsage || !strings.Contains(stderr, "is a directory") {
		t.Errorf("analyze DIR: exit %d, stderr %q; want %d, is a directory", code, stderr, exitUsage)
	}
}

// An exec subject that cannot start: every outcome is the plumbing's, and
// the user is told so on stderr and in the summary.
func TestRunExecPlumbingSaid(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runCmd(t, "run", "outage-delta", "--subject", "exec:/nonexistent/retrylab-client",
		"--clients", "3", "--requests", "1", "--quiet", "--no-report", "--out", out)
	if code == exitUsage {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "the subject's plumbing failed for 3 of 3 logical requests: exec /nonexistent/retrylab-client: could not start") {
		t.Errorf("stderr %q; want the plumbing failure said", stderr)
	}
	if !strings.Contains(stdout, "harness: 3 logical requests failed in the subject's plumbing") {
		t.Errorf("summary lacks the harness fact:\n%s", stdout)
	}
	// The verdict: never PASS on a run that never happened.
	if code != exitError || !strings.Contains(stdout, "retrylab verdict: INCONCLUSIVE") ||
		!strings.Contains(stdout, "3 logical requests failed in the harness or the subject's plumbing") {
		t.Errorf("exit %d; want 3 with an INCONCLUSIVE verdict naming the plumbing:\n%s", code, stdout)
	}
}

// compare never ranks a subject whose runs never happened as PASS, and
// exits 3 when the first-named subject is INCONCLUSIVE.
func TestCompareExecPlumbingInconclusive(t *testing.T) {
	code, stdout, stderr := runCmd(t, "compare", "outage-delta", "--subjects", "exec:/nonexistent/retrylab-client",
		"--clients", "2", "--requests", "1", "--quiet", "--no-report", "--out", t.TempDir())
	if code != exitError || !strings.Contains(stderr, "verdict INCONCLUSIVE") {
		t.Errorf("exit %d, stderr %q; want 3 for an INCONCLUSIVE first subject", code, stderr)
	}
	if strings.Contains(stdout, "PASS") || !strings.Contains(stdout, "INCONCLUSIVE") || !strings.Contains(stdout, "  ? 2 logical requests failed in the harness") {
		t.Errorf("compare output:\n%s\nwant INCONCLUSIVE and no PASS", stdout)
	}
}

// A timeline that cannot be written (here /dev/full: every write fails
// with ENOSPC) stops the run at once; exit 3 names the file.
func TestRunWriteErrorExits3(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	var named string
	var outb, errb syncBuffer
	e := &env{stdout: &outb, stderr: &errb, createTimeline: func(path string) (*os.File, error) {
		named = path
		return os.OpenFile("/dev/full", os.O_WRONLY, 0)
	}}
	out := t.TempDir()
	start := time.Now()
	// tiny-outage runs 20 s unless stopped.
	err := runEnv(context.Background(), e, []string{"run", "testdata/tiny-outage.yaml", "--quiet", "--out", out})
	code := exitCode(err, &errb)
	stdout, stderr := outb.String(), errb.String()
	if code != exitError || named == "" || !strings.Contains(stderr, named) || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("exit %d, stderr %q; want %d naming %s and the error", code, stderr, exitError, named)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the run went on for %v after its timeline failed", el)
	}
	if !strings.Contains(stdout, "the timeline could not be written") {
		t.Errorf("summary lacks why the run stopped:\n%s", stdout)
	}
}

// A SIGTERM cancels the context with a cause naming it, which the run's
// end record carries.
func TestNotifySignalsNamesTheSignal(t *testing.T) {
	ctx, stop := notifySignals(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Skip(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	in, ok := context.Cause(ctx).(*runner.Interrupt)
	if !ok || in.Signal != "SIGTERM" {
		t.Errorf("cause = %v; want *runner.Interrupt{SIGTERM}", context.Cause(ctx))
	}
}

// Runs started at once with the same --out never share a directory.
func TestRunDirsUnique(t *testing.T) {
	out := t.TempDir()
	const n = 3
	type result struct {
		code   int
		stderr string
	}
	results := make(chan result, n)
	for range n {
		go func() {
			code, _, errOut := runCmd(t, "run", "testdata/tiny-outage.yaml", "--quiet", "--no-report", "--out", out, "--clients", "1", "--duration", "200ms")
			results <- result{code, errOut}
		}()
	}
	for range n {
		// Capped at 200 ms with requests in flight, each run is
		// INCONCLUSIVE (exit 3); any other exit 2 or 3 is the harness's.
		if r := <-results; r.code == exitUsage || (r.code == exitError && !strings.Contains(r.stderr, "verdict INCONCLUSIVE")) {
			t.Errorf("a run exited %d: %s", r.code, r.stderr)
		}
	}
	m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-*", "timeline.ndjson"))
	if len(m) != n {
		t.Errorf("%d timelines %v; want %d in distinct directories", len(m), m, n)
	}
}
