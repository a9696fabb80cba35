package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/runner"
)

// TestRunInterruptedKeepsEverything interrupts a run as SIGINT would: the
// summary (saying which signal, what was in flight), the verdict, the
// --json file and the report of what ran are still written, and the
// timeline ends with an end record naming the signal. (A --json path that
// cannot be written is now refused before the run: see
// TestUnwritableOutputsFoundBeforeRun.)
func TestRunInterruptedKeepsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "testdata/tiny-outage.yaml", "--out", out, "--quiet",
			"--json", filepath.Join(out, "v.json")}, &stdout, &stderr)
	}()

	// Interrupt once the stub has recorded the first attempts.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for started := false; !started; {
		select {
		case <-tick.C:
			m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-retrylab-*", "timeline.ndjson"))
			if len(m) == 1 {
				b, _ := os.ReadFile(m[0])
				started = strings.Count(string(b), `"type":"attempt"`) >= 5
			}
		case err := <-done:
			t.Fatalf("run ended before the interrupt: %v\n%s", err, stdout.String())
		case <-deadline:
			t.Fatal("no attempts recorded within 30 s")
		}
	}
	cancel(&runner.Interrupt{Signal: "SIGINT"})
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after the interrupt")
	}
	// An interrupted run is INCONCLUSIVE (exit 3), never a PASS.
	if code := exitCode(err, &stderr); code != exitError || !errors.Is(err, errVerdictInconclusive) {
		t.Errorf("exit status %d (%v); want 3 for an INCONCLUSIVE verdict", code, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "v.json")); err != nil || !strings.Contains(string(b), `"verdict": "inconclusive"`) || strings.Contains(string(b), `"pass": true`) {
		t.Errorf("v.json of the interrupted run says:\n%s (%v); want inconclusive, never pass", b, err)
	}
	for _, want := range []string{"interrupted by SIGINT", "retrylab verdict: INCONCLUSIVE", "the run was interrupted by SIGINT", "harness: 5 logical requests in flight when the run stopped (canceled), 0 never started", "retrylab verdict:", "report: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-retrylab-*", "report.html")); len(m) != 1 {
		t.Errorf("report.html of the interrupted run: %v; want one", m)
	}
	if _, err := os.Stat(filepath.Join(out, "v.json")); err != nil {
		t.Errorf("--json file of the interrupted run: %v", err)
	}
	m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-retrylab-*", "timeline.ndjson"))
	if len(m) == 1 {
		b, _ := os.ReadFile(m[0])
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last := lines[len(lines)-1]
		if !strings.Contains(last, `"type":"end"`) || !strings.Contains(last, `"reason":"interrupted"`) || !strings.Contains(last, `"signal":"SIGINT"`) || !strings.Contains(last, `"in_flight":5`) {
			t.Errorf("last timeline line %s; want the end record: interrupted by SIGINT, 5 in flight", last)
		}
	}
}
