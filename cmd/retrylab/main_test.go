package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// syncBuffer is a bytes.Buffer safe for a command writing while a test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCmd runs the program in-process and returns its exit status and
// output, as main would produce them.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCmdCtx(t, context.Background(), args...)
}

func runCmdCtx(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	err := run(ctx, args, &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadInputExits2NamingThePlace(t *testing.T) {
	badScenario := writeFile(t, "bad.yaml", "name: x\nserver:\n  phases:\n    - respond: {status: 503}\n      retry_after: {form: dat}\n")
	badTimeline := writeFile(t, "t.ndjson", `{"type":"meta","format":1,"recorder":"serve","scenario":"x","seed":1,"start":"2026-11-30T23:00:00Z"}`+"\n"+`{"type":"attempt","client":"1","key":"1/0","attempt":1,"at":`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command given"},
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown flag", []string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{"remote addr", []string{"serve", "--addr", "0.0.0.0:0"}, "--addr 0.0.0.0:0 is not a loopback address"},
		{"negative duration", []string{"serve", "--duration", "-1s"}, "--duration must be >= 0"},
		{"bad duration", []string{"serve", "--duration", "soon"}, `invalid argument "soon" for "--duration"`},
		{"bad scenario file", []string{"serve", "--scenario", badScenario}, "bad.yaml:5:"},
		{"unknown scenario", []string{"serve", "--scenario", "no-such-scenario"}, "no-such-scenario"},
		{"truncated timeline", []string{"analyze", badTimeline}, "t.ndjson:2:"},
		{"missing timeline", []string{"analyze", filepath.Join(t.TempDir(), "nope.ndjson")}, "nope.ndjson"},
		{"analyze without file", []string{"analyze"}, "analyze takes one timeline file"},
		{"bad check", []string{"analyze", "--check", "nope", badTimeline}, `--check "nope"`},
		{"bad skip", []string{"analyze", "--skip", "waves,nope", badTimeline}, `--skip`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit status = %d; want %d (stderr %q)", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q; want it to contain %q", stderr, tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runCmd(t, "--help")
	if code != 0 || !strings.Contains(stdout, "serve") || !strings.Contains(stdout, "analyze") {
		t.Errorf("--help: exit %d, stdout %q; want 0 and the command list", code, stdout)
	}
	code, stdout, _ = runCmd(t, "help", "serve")
	if code != 0 || !strings.Contains(stdout, "--output") {
		t.Errorf("help serve: exit %d, stdout %q; want 0 and the serve flags", code, stdout)
	}
	code, stdout, _ = runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "retrylab ") {
		t.Errorf("version: exit %d, stdout %q", code, stdout)
	}
}

func TestExitCodes(t *testing.T) {
	var b bytes.Buffer
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errVerdictFailed, 1},
		{usagef("x"), 2},
		{errors.New("boom"), 3},
	} {
		if got := exitCode(tt.err, &b); got != tt.want {
			t.Errorf("exitCode(%v) = %d; want %d", tt.err, got, tt.want)
		}
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestAnalyzeGolden judges a small recorded timeline: client 2 retries
// 1.5 s early, client 3 retries a 404. stdout and stderr are compared with
// golden files separately, and every --json/--junit/--markdown file is
// written.
func TestAnalyzeGolden(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "analyze", "testdata/early.ndjson",
		"--json", filepath.Join(dir, "v.json"), "--junit", filepath.Join(dir, "j.xml"), "--markdown", filepath.Join(dir, "v.md"))
	if code != exitFailed {
		t.Errorf("exit status = %d; want %d (a failed verdict)", code, exitFailed)
	}
	golden(t, "analyze-early.stdout", stdout)
	golden(t, "analyze-early.stderr", stderr)
	for _, f := range []string{"v.json", "j.xml", "v.md"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v, %d bytes; want the verdict written", f, err, len(b))
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}
