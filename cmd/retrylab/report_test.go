package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// earlyRow reads the report's "of which early" figure.
func earlyRow(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`of which early</th><td class="num">([^<]*)<`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s/report.html has no \"of which early\" row", dir)
	}
	return string(m[1])
}

// TestReportFollowsCheckTolerance: the report counts early retries as the
// verdict judges them, with --check retry-after:tolerance=… (the fixture's
// one early retry is 1.5s early).
func TestReportFollowsCheckTolerance(t *testing.T) {
	for _, tt := range []struct {
		args      []string
		early     string
		judgement string
	}{
		{nil, "1 (25.0%)", "✗ retry-after"},
		{[]string{"--check", "retry-after:tolerance=2"}, "0 (0.0%)", "✓ retry-after"},
	} {
		out := t.TempDir()
		code, stdout, stderr := runCmd(t, append([]string{"report", "testdata/early.ndjson", "--out", out}, tt.args...)...)
		if code != 0 || !strings.Contains(stdout, "report: ") {
			t.Fatalf("report %v: exit %d, stdout %q, stderr %q; want 0", tt.args, code, stdout, stderr)
		}
		if got := earlyRow(t, filepath.Join(out, "early")); got != tt.early { // --out is a parent
			t.Errorf("report %v: of which early %q; want %q", tt.args, got, tt.early)
		}
		// The analyzer with the same flags judges the same retries.
		_, text, _ := runCmd(t, append([]string{"analyze", "testdata/early.ndjson"}, tt.args...)...)
		if !strings.Contains(text, tt.judgement) {
			t.Errorf("analyze %v:\n%s\nwant %q", tt.args, text, tt.judgement)
		}
	}
}

// TestReportBadInput: report refuses what analyze refuses, naming the file.
func TestReportBadInput(t *testing.T) {
	empty := writeFile(t, "empty.ndjson", "")
	truncated := writeFile(t, "t.ndjson", `{"type":"meta","format":1,"recorder":"serve","scenario":"x","seed":1,"start":"2026-11-30T23:00:00Z"}`+"\n"+`{"type":"attempt","client":"1","key":"1/0","attempt":1,"at":`)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{empty}, "empty.ndjson: analyzer: empty timeline"},
		{[]string{truncated}, "t.ndjson:2:"},
		{[]string{t.TempDir()}, "is a directory"},
		{[]string{filepath.Join(t.TempDir(), "nope.ndjson")}, "nope.ndjson"},
		{[]string{"--check", "retry-after:nope=1", "testdata/early.ndjson"}, "--check"},
	} {
		code, _, stderr := runCmd(t, append([]string{"report", "--out", t.TempDir()}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("report %v: exit %d, stderr %q; want %d naming %q", tt.args, code, stderr, exitUsage, tt.want)
		}
	}
}
