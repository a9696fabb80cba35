package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareRanksAndJudgesTheFirstSubject runs two subjects on a scenario
// that answers half the requests 404: retry-4xx fails non-retryable. The
// exit status follows the first-named subject only.
func TestCompareRanksAndJudgesTheFirstSubject(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	for _, tt := range []struct {
		subjects string
		code     int
	}{
		{"retrylab,retry-4xx", exitOK},
		{"retry-4xx,retrylab", exitFailed},
	} {
		out := t.TempDir()
		code, stdout, stderr := runCmd(t, "compare", "testdata/mix404.yaml", "--subjects", tt.subjects, "--out", out, "--quiet", "--no-report")
		if code != tt.code {
			t.Errorf("compare --subjects %s: exit %d; want %d\n%s%s", tt.subjects, code, tt.code, stdout, stderr)
		}
		rank := stdout[strings.Index(stdout, "RANK"):]
		if strings.Index(rank, "retrylab") > strings.Index(rank, "retry-4xx") || !strings.Contains(rank, "non-retryable") {
			t.Errorf("compare --subjects %s: ranking\n%s\nwant retrylab first and retry-4xx failing non-retryable", tt.subjects, rank)
		}
		html, _ := filepath.Glob(filepath.Join(out, "compare-mix404-*", "compare.html"))
		if len(html) != 1 {
			t.Fatalf("compare.html: %v; want one", html)
		}
		if b, err := os.ReadFile(html[0]); err != nil || !strings.Contains(string(b), "retry-4xx") {
			t.Errorf("compare.html: %v; want it to name the subjects", err)
		}
	}
	if code, _, stderr := runCmd(t, "compare", "testdata/mix404.yaml", "--subjects", "retrylab,nope"); code != exitUsage || !strings.Contains(stderr, `--subjects "nope"`) {
		t.Errorf("unknown subject: exit %d, %q; want 2 naming --subjects", code, stderr)
	}
}
