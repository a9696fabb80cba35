package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
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

// TestCompareWritesComparison: --json, --junit and --markdown write the
// comparison (the ranking with every run's verdict), and an output path
// that cannot be written is refused before any run.
func TestCompareWritesComparison(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCmd(t, "compare", "testdata/mix404.yaml", "--subjects", "retrylab", "--out", dir, "--json", dir); code != exitUsage || !strings.Contains(stderr, "--json") {
		t.Errorf("--json DIR: exit %d, %q; want 2 naming --json", code, stderr)
	}
	if runs, _ := filepath.Glob(filepath.Join(dir, "compare-*")); len(runs) != 0 {
		t.Errorf("refused compare left %v; want no run", runs)
	}
	if testing.Short() {
		t.Skip("real time")
	}
	js, ju, md := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.xml"), filepath.Join(dir, "c.md")
	code, stdout, stderr := runCmd(t, "compare", "testdata/mix404.yaml", "--subjects", "retry-4xx,retrylab", "--seeds", "2", "--clients", "4",
		"--out", dir, "--quiet", "--no-report", "--json", js, "--junit", ju, "--markdown", md)
	if code != exitFailed {
		t.Fatalf("compare: exit %d; want 1 (retry-4xx fails)\n%s%s", code, stdout, stderr)
	}
	var doc struct {
		Scenario string
		Ranking  []struct {
			Rank    int
			Subject string
			Verdict string
			Failed  []string
			Runs    []struct {
				Seed    int64
				Verdict struct{ Verdict string }
			}
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, b)
	}
	if doc.Scenario != "mix404" || len(doc.Ranking) != 2 || doc.Ranking[0].Subject != "retrylab" || doc.Ranking[1].Subject != "retry-4xx" ||
		doc.Ranking[1].Verdict != "fail" || !slices.Contains(doc.Ranking[1].Failed, "non-retryable") ||
		len(doc.Ranking[1].Runs) != 2 || doc.Ranking[1].Runs[1].Seed != 2 || doc.Ranking[1].Runs[0].Verdict.Verdict != "fail" {
		t.Errorf("--json: %+v; want retrylab first, retry-4xx failing non-retryable on seeds 1 and 2", doc)
	}
	var suites struct {
		Suites []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	if b, err = os.ReadFile(ju); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, &suites); err != nil {
		t.Fatalf("--junit: %v\n%s", err, b)
	}
	if len(suites.Suites) != 4 || suites.Suites[0].Name != "retrylab mix404 (retrylab) seed 1" || suites.Suites[3].Name != "retrylab mix404 (retry-4xx) seed 2" {
		t.Errorf("--junit testsuites %+v; want one per run, best subject first", suites.Suites)
	}
	if b, err = os.ReadFile(md); err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "| 1 | `retrylab` |") || !strings.Contains(s, "| 2 | `retry-4xx` | ❌ FAIL | 2 | `non-retryable`") {
		t.Errorf("--markdown:\n%s\nwant retrylab ranked 1, retry-4xx 2 failing non-retryable", s)
	}
}
