package analyzer

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"strings"
	"testing"
)

// rankedRuns: "good" passes two seeds, "bad" fails one of its two seeds,
// "unsure" is inconclusive, with no p99 known anywhere.
func rankedRuns() ([]Ranked, []RankRun) {
	nan := math.NaN()
	mk := func(status string, checks ...[2]string) *Verdict {
		v := rankVerdict(status, checks...)
		v.Figures.Scenario = "outage"
		if status == VerdictInconclusive {
			v.Inconclusive = []string{"the fleet started late"}
		}
		return v
	}
	runs := []RankRun{
		{"bad", 1, mk(VerdictPass, [2]string{CheckWaves, StatusPass}), figs(100, 1.2, nan)},
		{"good", 1, mk(VerdictPass, [2]string{CheckWaves, StatusPass}), figs(100, 1.1, nan)},
		{"unsure", 1, mk(VerdictInconclusive, [2]string{CheckWaves, StatusSkip}), figs(100, 1, nan)},
		{"bad", 2, mk(VerdictFail, [2]string{CheckWaves, StatusFail}), figs(90, 3, nan)},
		{"good", 2, mk(VerdictPass, [2]string{CheckWaves, StatusPass}), figs(100, 1.3, nan)},
	}
	ranking, _ := Rank(runs)
	return ranking, runs
}

func TestWriteRankingJSON(t *testing.T) {
	ranking, runs := rankedRuns()
	var buf bytes.Buffer
	if err := WriteRankingJSON(&buf, "outage", ranking, runs); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenario string
		Ranking  []struct {
			Rank    int
			Subject string
			Verdict string
			Pass    bool
			Failed  []string
			Figures map[string]*float64
			Status  map[string]string
			Runs    []struct {
				Seed    int64
				Verdict struct {
					Verdict string
					Pass    bool
				}
			}
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if doc.Scenario != "outage" || len(doc.Ranking) != 3 {
		t.Fatalf("scenario %q, %d subjects; want outage, 3:\n%s", doc.Scenario, len(doc.Ranking), buf.String())
	}
	var order []string
	for _, r := range doc.Ranking {
		order = append(order, r.Subject+":"+r.Verdict)
	}
	if got := strings.Join(order, " "); got != "good:pass bad:fail unsure:inconclusive" {
		t.Errorf("ranking %s; want good:pass bad:fail unsure:inconclusive", got)
	}
	good, bad := doc.Ranking[0], doc.Ranking[1]
	if good.Rank != 1 || !good.Pass || good.Figures[FigureAmplification] == nil || math.Abs(*good.Figures[FigureAmplification]-1.2) > 1e-9 {
		t.Errorf("good: %+v; want rank 1, pass, amplification 1.2 (the mean)", good)
	}
	if p99, ok := good.Figures[FigureP99]; !ok || p99 != nil {
		t.Errorf("good's p99 %v (present %v); want null: unknown", p99, ok)
	}
	if len(bad.Runs) != 2 || bad.Runs[0].Seed != 1 || bad.Runs[0].Verdict.Verdict != VerdictPass ||
		bad.Runs[1].Seed != 2 || bad.Runs[1].Verdict.Verdict != VerdictFail || len(bad.Failed) != 1 || bad.Status[FigureHerd] != StatusFail {
		t.Errorf("bad: %+v; want seed 1 pass, seed 2 fail, waves failed", bad)
	}
	if !strings.Contains(buf.String(), `"failed": []`) {
		t.Errorf("a subject without failures should list none as [], not null:\n%s", buf.String())
	}
}

func TestWriteRankingJUnit(t *testing.T) {
	ranking, runs := rankedRuns()
	var buf bytes.Buffer
	if err := WriteRankingJUnit(&buf, "outage", ranking, runs); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	want := []string{"retrylab outage (good) seed 1", "retrylab outage (good) seed 2", "retrylab outage (bad) seed 1",
		"retrylab outage (bad) seed 2", "retrylab outage (unsure) seed 1"}
	if len(doc.Suites) != len(want) {
		t.Fatalf("%d testsuites; want one per run, %d:\n%s", len(doc.Suites), len(want), buf.String())
	}
	var tests, failures, errs, skipped int
	for i, s := range doc.Suites {
		if s.Name != want[i] {
			t.Errorf("testsuite %d is %q; want %q", i, s.Name, want[i])
		}
		tests, failures, errs, skipped = tests+s.Tests, failures+s.Failures, errs+s.Errors, skipped+s.Skipped
		for _, c := range s.Cases {
			if !strings.HasPrefix(c.Classname, "retrylab.outage.") {
				t.Errorf("%s: testcase classname %q; want retrylab.outage.SUBJECT", s.Name, c.Classname)
			}
		}
	}
	if doc.Tests != tests || doc.Failures != 1 || doc.Failures != failures || doc.Errors != 1 || doc.Errors != errs || doc.Skipped != skipped {
		t.Errorf("totals tests %d failures %d errors %d skipped %d; want the suites' sums %d %d %d %d (1 failure, 1 error)",
			doc.Tests, doc.Failures, doc.Errors, doc.Skipped, tests, failures, errs, skipped)
	}
	if f := doc.Suites[3].Cases[0].Failure; f == nil || f.Type != CheckWaves {
		t.Errorf("bad seed 2's waves testcase has failure %+v; want a waves failure", f)
	}
	if e := doc.Suites[4].Cases[0]; e.Name != "run-fidelity" || e.Error == nil {
		t.Errorf("unsure's first testcase %+v; want the run-fidelity error", e)
	}
}

func TestWriteRankingMarkdown(t *testing.T) {
	ranking, runs := rankedRuns()
	var buf bytes.Buffer
	if err := WriteRankingMarkdown(&buf, "outage", ranking, runs); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"### retrylab comparison on outage",
		"| 1 | `good` | ✅ PASS | 2 | — | n/a | n/a | 1.2 | 100.0% | n/a |",
		"| 2 | `bad` | ❌ FAIL | 2 | `waves` | n/a | n/a | 2.1 | 95.0% | n/a |",
		"| 3 | `unsure` | ⚠️ INCONCLUSIVE | 1 | — |",
		"| `bad` | 2 | ❌ FAIL | `waves` |",
		"| `unsure` | 1 | ⚠️ INCONCLUSIVE | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "`good`") > strings.Index(md, "`bad`") {
		t.Errorf("Markdown ranking not best first:\n%s", md)
	}
}
