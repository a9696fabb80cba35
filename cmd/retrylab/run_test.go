package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunInterruptedKeepsEverything interrupts a run as SIGINT would: the
// summary, the verdict and the report of what ran are still written, and a
// verdict file that cannot be written does not cost the report.
func TestRunInterruptedKeepsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	out := t.TempDir()
	blocker := filepath.Join(out, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "testdata/tiny-outage.yaml", "--out", out, "--quiet",
			"--json", filepath.Join(blocker, "v.json")}, &stdout, &stderr)
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
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after the interrupt")
	}
	var ue *usageError
	if code := exitCode(err, &stderr); code != exitError || errors.As(err, &ue) {
		t.Errorf("exit status %d (%v); want %d: the --json file could not be written", code, err, exitError)
	}
	for _, want := range []string{"interrupted", "retrylab verdict:", "report: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "tiny-outage-retrylab-*", "report.html")); len(m) != 1 {
		t.Errorf("report.html of the interrupted run: %v; want one", m)
	}
	if !strings.Contains(stderr.String(), "--json") {
		t.Errorf("stderr %q; want the --json error named", stderr.String())
	}
}
