package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --processes: a value that is not a count of at least 1 is bad usage
// naming the flag (exit 2, no run directory); a good one groups the
// clients, and the timeline's meta record says into how many processes.
func TestRunProcessesFlag(t *testing.T) {
	for _, val := range []string{"0", "-1", "two", "10000001"} {
		out := t.TempDir()
		code, _, stderr := runCmd(t, "run", "outage-delta", "--quiet", "--out", out, "--processes", val)
		if code != exitUsage || !strings.Contains(stderr, "--processes") {
			t.Errorf("run --processes %s: exit %d, stderr %q; want %d naming --processes", val, code, stderr, exitUsage)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("run --processes %s created %d entries in --out; want none", val, len(ents))
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "short.yaml")
	if err := os.WriteFile(file, []byte(`name: short
duration: 1s
server:
  phases:
    - {name: down, for: 100ms, respond: {status: 503}}
    - {name: up, respond: ok}
fleet: {clients: 4, requests: 2, timeout: 900ms}
subject: {name: retrylab, policy: {base: 20ms, cap: 50ms, budget: 800ms}}
expect: {allow_unexercised: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCmd(t, "run", file, "--processes", "2", "--quiet", "--no-report", "--out", out)
	if code == exitUsage {
		t.Fatalf("run --processes 2: exit %d: %s", code, stderr)
	}
	tls, _ := filepath.Glob(filepath.Join(out, "short-*", "timeline.ndjson"))
	if len(tls) != 1 {
		t.Fatalf("run --processes 2: timelines %v; want one (stdout %s)", tls, stdout)
	}
	b, err := os.ReadFile(tls[0])
	if err != nil {
		t.Fatal(err)
	}
	meta, _, _ := strings.Cut(string(b), "\n")
	if !strings.Contains(meta, `"processes":2`) {
		t.Errorf("meta record %s; want fleet processes 2", meta)
	}
}
