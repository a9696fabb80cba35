package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeJudgesACurlLoop is the "client in another language" path: a
// shell loop of curl requests, with curl's own --retry, runs against
// `retrylab serve`, and `retrylab analyze` judges the recording. curl
// honours both Retry-After forms, so it passes retry-after.
func TestServeJudgesACurlLoop(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed; .ci/run installs it")
		}
		t.Skip("curl is not installed")
	}
	if testing.Short() {
		t.Skip("runs about 5 s of real time")
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "curl.ndjson")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--scenario", "testdata/curl.yaml", "--addr", "127.0.0.1:0", "--record", record, "--duration", "2m"}, &stdout, &stderr)
	}()
	base := waitForURL(t, &stdout, done)

	loop := `for i in 0 1 2; do curl -sS --retry 5 --retry-max-time 30 --max-time 30 "$BASE/c/1/r/$i" >/dev/null || exit 1; done`
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", loop)
	cmd.Env = append(os.Environ(), "BASE="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("curl loop: %v\n%s", err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}

	code, out, errOut := runCmd(t, "analyze", record, "--json", filepath.Join(dir, "v.json"))
	if code != exitOK {
		t.Fatalf("analyze exit %d; want 0\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"PASS", "3 requests", "✓ retry-after", "↷ non-retryable"} {
		if !strings.Contains(out, want) {
			t.Errorf("verdict lacks %q:\n%s", want, out)
		}
	}
	// How many retries curl makes depends on where in the 1.5 s phases its
	// first request lands, but the first logical request always meets at
	// least one 503 of each form before the service is up.
	var v struct {
		Figures struct{ Retries int } `json:"figures"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "v.json"))
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil || v.Figures.Retries < 2 {
		t.Errorf("verdict JSON: %v, %d retries; want at least 2", err, v.Figures.Retries)
	}
}
