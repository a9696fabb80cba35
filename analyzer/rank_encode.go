package analyzer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The encoders of a comparison: its ranking (Rank) with each run's
// verdict, as JSON, JUnit XML and Markdown, as `retrylab compare --json,
// --junit, --markdown` write them.

type rankingDoc struct {
	Scenario string       `json:"scenario"`
	Ranking  []rankingRow `json:"ranking"`
}

type rankingRow struct {
	Rank    int                 `json:"rank"`
	Subject string              `json:"subject"`
	Verdict string              `json:"verdict"` // pass, fail or inconclusive, over the subject's runs
	Pass    bool                `json:"pass"`
	Failed  []string            `json:"failed"`
	Figures map[string]*float64 `json:"figures"` // by key figure id; null: unknown
	Status  map[string]string   `json:"status"`  // by key figure id: the status of the check that judges it
	Runs    []rankingRun        `json:"runs"`
}

type rankingRun struct {
	Seed    int64    `json:"seed"`
	Verdict *Verdict `json:"verdict"`
}

// runsOf returns the runs of subject, in order.
func runsOf(runs []RankRun, subject string) []RankRun {
	var out []RankRun
	for _, r := range runs {
		if r.Subject == subject {
			out = append(out, r)
		}
	}
	return out
}

// WriteRankingJSON writes a comparison as one indented JSON object: the
// scenario and the ranking, best first, each subject with its verdict over
// its runs, failed checks, key figures (null when unknown), the status of
// the check that judges each figure, and every run's seed and verdict (as
// WriteJSON writes it).
func WriteRankingJSON(w io.Writer, scenario string, ranking []Ranked, runs []RankRun) error {
	doc := rankingDoc{Scenario: scenario, Ranking: []rankingRow{}}
	for _, r := range ranking {
		row := rankingRow{Rank: r.Rank, Subject: r.Subject, Verdict: r.Verdict, Pass: r.Pass, Failed: r.Failed,
			Figures: map[string]*float64{}, Status: r.Status, Runs: []rankingRun{}}
		if row.Failed == nil {
			row.Failed = []string{}
		}
		for id, x := range r.Figures {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				row.Figures[id] = &x
			} else {
				row.Figures[id] = nil
			}
		}
		for _, run := range runsOf(runs, r.Subject) {
			row.Runs = append(row.Runs, rankingRun{Seed: run.Seed, Verdict: run.Verdict})
		}
		doc.Ranking = append(doc.Ranking, row)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("analyzer: encoding JSON: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("analyzer: writing JSON: %w", err)
	}
	return nil
}

// WriteRankingJUnit writes a comparison as JUnit XML: one testsuite per
// run of each subject, in ranking order (named "retrylab SCENARIO
// (SUBJECT) seed N", with its rank among the properties), each holding the
// testcases WriteJUnit writes for that run's verdict, classname
// "retrylab.SCENARIO.SUBJECT".
func WriteRankingJUnit(w io.Writer, scenario string, ranking []Ranked, runs []RankRun) error {
	if scenario == "" {
		scenario = "timeline"
	}
	doc := junitSuites{Name: "retrylab compare " + scenario}
	for _, r := range ranking {
		for _, run := range runsOf(runs, r.Subject) {
			suite := junitSuiteOf(run.Verdict)
			suite.Name = fmt.Sprintf("retrylab %s (%s) seed %d", scenario, r.Subject, run.Seed)
			props := []junitProperty{{"subject", r.Subject}, {"seed", strconv.FormatInt(run.Seed, 10)}, {"rank", strconv.Itoa(r.Rank)}}
			for _, p := range suite.Properties {
				if p.Name != "subject" && p.Name != "seed" {
					props = append(props, p)
				}
			}
			suite.Properties = props
			for i := range suite.Cases {
				suite.Cases[i].Classname = "retrylab." + scenario + "." + r.Subject
			}
			doc.Tests += suite.Tests
			doc.Failures += suite.Failures
			doc.Errors += suite.Errors
			doc.Skipped += suite.Skipped
			doc.Suites = append(doc.Suites, suite)
		}
	}
	return writeJUnit(w, doc)
}

// rankFigureText formats key figure id's value x for the Markdown table.
func rankFigureText(id string, x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	switch id {
	case FigureSuccess:
		return FormatPercent(x)
	case FigureP99:
		return FormatDuration(time.Duration(x * 1e9))
	}
	return FormatNumber(x)
}

// rankFigureHeads are the Markdown table's headings of the key figures.
var rankFigureHeads = map[string]string{
	FigureHerd:          "herd (× full jitter)",
	FigureEarly:         "early retries",
	FigureAmplification: "attempts/request",
	FigureSuccess:       "success",
	FigureP99:           "p99 completion",
}

func verdictIcon(verdict string) string {
	switch verdict {
	case VerdictPass:
		return "✅"
	case VerdictInconclusive:
		return "⚠️"
	}
	return "❌"
}

// WriteRankingMarkdown writes a comparison as GitHub-flavoured Markdown:
// a heading, the ranking as a table (rank, subject, verdict, runs, failed
// checks, key figures), and a table of every run's verdict.
func WriteRankingMarkdown(w io.Writer, scenario string, ranking []Ranked, runs []RankRun) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "### retrylab comparison on %s\n\n", mdEscape(orDashText(scenario)))
	kfs := KeyFigures()
	bw.WriteString("| rank | subject | verdict | runs | failed checks |")
	for _, kf := range kfs {
		bw.WriteString(" " + rankFigureHeads[kf.ID] + " |")
	}
	bw.WriteString("\n|---:|---|---|---:|---|" + strings.Repeat("---:|", len(kfs)) + "\n")
	for _, r := range ranking {
		fmt.Fprintf(bw, "| %d | `%s` | %s %s | %d | %s |", r.Rank, mdEscape(r.Subject), verdictIcon(r.Verdict), strings.ToUpper(r.Verdict), r.Runs, failedText(r.Failed))
		for _, kf := range kfs {
			bw.WriteString(" " + rankFigureText(kf.ID, r.Figures[kf.ID]) + " |")
		}
		bw.WriteString("\n")
	}
	bw.WriteString("\n| subject | seed | verdict | failed checks |\n|---|---:|---|---|\n")
	for _, r := range ranking {
		for _, run := range runsOf(runs, r.Subject) {
			v := run.Verdict
			fmt.Fprintf(bw, "| `%s` | %d | %s %s | %s |\n", mdEscape(r.Subject), run.Seed, verdictIcon(strings.ToLower(v.Word())), v.Word(), failedText(v.Failed()))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("analyzer: writing Markdown: %w", err)
	}
	return nil
}

func failedText(ids []string) string {
	if len(ids) == 0 {
		return "—"
	}
	return "`" + strings.Join(ids, "`, `") + "`"
}

func orDashText(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
