package reports

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrylab/retrylab/analyzer"
)

// CompareFile is the name of the comparison report in its directory.
const CompareFile = "compare.html"

// ErrNoEntries is returned by Compare without a single entry.
var ErrNoEntries = errors.New("reports: nothing to compare")

// A CompareEntry is one run of one subject on the compared scenario.
// Entries with the same Subject are runs of that subject (one per seed);
// their figures are averaged and the subject passes only if every run does.
type CompareEntry struct {
	Subject string // required
	Seed    int64
	// Verdict is the analyzer's verdict on the run (required).
	Verdict *analyzer.Verdict
	// Stats are the run's report figures (Report.Stats). When nil and
	// Timeline is set, Compare reads the timeline to compute them; when
	// both are missing, the p99 completion is not shown and the other
	// figures come from the verdict alone.
	Stats    *Stats
	Timeline string
	// Report is a link to the run's own report, relative to the
	// comparison's directory ("" for none).
	Report string
}

// CompareOptions tune a comparison. The zero value is ready to use.
type CompareOptions struct {
	// Title of the comparison (default: "comparison on SCENARIO").
	Title string
	// Scenario names the compared scenario (default: the verdicts'
	// Figures.Scenario).
	Scenario string
	// Report tunes the reading of timelines and the PNG resolution (see
	// Options).
	Report Options
}

// The key figures of a comparison, in plot order (analyzer.KeyFigures).
const (
	FigureHerd          = analyzer.FigureHerd          // the waves check's figure: bunching relative to full jitter
	FigureEarly         = analyzer.FigureEarly         // early retries (the retry-after check's figure)
	FigureAmplification = analyzer.FigureAmplification // attempts per logical request
	FigureSuccess       = analyzer.FigureSuccess       // share of logical requests that succeeded, %
	FigureP99           = analyzer.FigureP99           // p99 completion time of logical requests, s
)

// keyFigure describes one panel of the comparison plot.
type keyFigure struct {
	id, title, unit, check string // check: the analyzer check that judges it ("" the whole verdict)
	lowerBetter            bool
}

// keyFigures are analyzer.KeyFigures with their titles and units.
var keyFigures = func() []keyFigure {
	text := map[string][2]string{
		FigureHerd:          {"herd statistic", "× full jitter"},
		FigureEarly:         {"early retries", "retries"},
		FigureAmplification: {"amplification", "attempts/request"},
		FigureSuccess:       {"success rate", "%"},
		FigureP99:           {"p99 completion", "s"},
	}
	var kfs []keyFigure
	for _, k := range analyzer.KeyFigures() {
		kfs = append(kfs, keyFigure{k.ID, text[k.ID][0], text[k.ID][1], k.Check, k.LowerBetter})
	}
	return kfs
}()

// Ranked is one subject's line in a comparison, averaged over its runs
// (see analyzer.Ranked), with links to its runs' reports.
type Ranked struct {
	analyzer.Ranked
	Reports []string // links to the runs' reports, in entry order
}

// Comparison describes what Compare wrote.
type Comparison struct {
	HTML     string   // path of compare.html
	Plot     Plot     // the comparison plot (compare.png, compare.svg)
	Scenario string   // the compared scenario
	Ranking  []Ranked // best first
	// Subjects holds the same lines as Ranking, in the order the subjects
	// first appear in the entries (the CLI judges the first-named one).
	Subjects []Ranked
	// Runs are the entries as ranked (analyzer.Rank), in entry order: what
	// analyzer.WriteRankingJSON and its kin write with the ranking.
	Runs []analyzer.RankRun
}

// AnalyzerRanking is the ranking as the analyzer's encoders take it.
func (c *Comparison) AnalyzerRanking() []analyzer.Ranked {
	out := make([]analyzer.Ranked, len(c.Ranking))
	for i, r := range c.Ranking {
		out[i] = r.Ranked
	}
	return out
}

// Compare writes, in dir (created if needed), compare.html and the
// comparison plot beside it (compare.png, compare.svg): the subjects side by
// side on the key figures with pass/fail marked, and a table ranking them.
//
// The ranking is analyzer.Rank's: subjects whose every run passed first,
// then those that failed (fewer failed checks first), then the
// inconclusive ones; among equals higher success rate, lower
// amplification, lower p99 completion, and name.
func Compare(dir string, entries []CompareEntry, opts CompareOptions) (*Comparison, error) {
	if len(entries) == 0 {
		return nil, ErrNoEntries
	}
	for i, e := range entries {
		if e.Subject == "" {
			return nil, fmt.Errorf("reports: compare entry %d has no subject", i)
		}
		if e.Verdict == nil {
			return nil, fmt.Errorf("reports: compare entry %d (%s) has no verdict", i, e.Subject)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	stats := make([]*Stats, len(entries))
	for i, e := range entries {
		stats[i] = e.Stats
		if stats[i] == nil && e.Timeline != "" {
			f, err := os.Open(e.Timeline)
			if err != nil {
				return nil, fmt.Errorf("reports: %w", err)
			}
			c, err := Collect(f, opts.Report)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("reports: %s: %w", e.Timeline, err)
			}
			s := c.Stats()
			stats[i] = &s
		}
	}
	ranking, subjects, runs := rankBoth(entries, stats)
	scenario := opts.Scenario
	if scenario == "" {
		scenario = entries[0].Verdict.Figures.Scenario
	}
	cmpr := &Comparison{HTML: filepath.Join(dir, CompareFile), Scenario: scenario, Ranking: ranking, Subjects: subjects, Runs: runs}

	title := opts.Title
	if title == "" {
		title = "comparison on " + orDash(scenario)
	}
	d := comparePlot(ranking, title)
	if err := save(d.p, d.w, d.h, opts.Report.withDefaults().DPI, dir, d.Name); err != nil {
		return nil, err
	}
	d.PNG, d.SVG = d.Name+".png", d.Name+".svg"
	cmpr.Plot = d.Plot
	page, err := comparePage(dir, title, scenario, cmpr, entries)
	if err != nil {
		return nil, err
	}
	if err := writeHTML(cmpr.HTML, "compare", page); err != nil {
		return nil, err
	}
	return cmpr, nil
}

// rankBoth ranks the entries' subjects (analyzer.Rank) on their verdicts
// and key figures, with the links to their reports, best first; the same
// lines in the order the subjects first appear in the entries; and the
// runs ranked.
func rankBoth(entries []CompareEntry, stats []*Stats) (ranking, subjects []Ranked, runs []analyzer.RankRun) {
	runs = make([]analyzer.RankRun, len(entries))
	reports := map[string][]string{}
	for i, e := range entries {
		runs[i] = analyzer.RankRun{Subject: e.Subject, Seed: e.Seed, Verdict: e.Verdict, Figures: map[string]float64{}}
		for _, kf := range keyFigures {
			runs[i].Figures[kf.id] = entryFigure(kf.id, e.Verdict, stats[i])
		}
		if e.Report != "" {
			reports[e.Subject] = append(reports[e.Subject], e.Report)
		}
	}
	r, s := analyzer.Rank(runs)
	wrap := func(rs []analyzer.Ranked) []Ranked {
		out := make([]Ranked, len(rs))
		for i, x := range rs {
			out[i] = Ranked{Ranked: x, Reports: reports[x.Subject]}
		}
		return out
	}
	return wrap(r), wrap(s), runs
}

// entryFigure is one key figure of one run, NaN when unknown.
func entryFigure(id string, v *analyzer.Verdict, s *Stats) float64 {
	checkFigure := func(check string) float64 {
		if ch := v.Check(check); ch != nil && ch.Status != analyzer.StatusSkip {
			return ch.Figure
		}
		return math.NaN()
	}
	f := v.Figures
	switch id {
	case FigureHerd:
		return checkFigure(analyzer.CheckWaves)
	case FigureEarly:
		if x := checkFigure(analyzer.CheckRetryAfter); !math.IsNaN(x) {
			return x
		}
		if s != nil {
			return float64(s.EarlyRetries)
		}
	case FigureAmplification:
		if f.Requests > 0 {
			return float64(f.Attempts) / float64(f.Requests)
		}
		if s != nil {
			return s.Amplification
		}
	case FigureSuccess:
		if f.Outcomes > 0 {
			return 100 * float64(f.Results["ok"]) / float64(f.Outcomes)
		}
		if s != nil && s.Outcomes > 0 {
			return 100 * s.SuccessRate
		}
	case FigureP99:
		if s != nil && s.Outcomes > 0 {
			return s.P99.Seconds()
		}
	}
	return math.NaN()
}

// comparePageData is what the compare template reads.
type comparePageData struct {
	Title    string
	Scenario string
	Plot     plotView
	Figures  []fact // key figures: title, unit
	Rows     []compareRow
	Runs     []compareRun
}

type compareRow struct {
	Rank    int
	Subject string
	Pass    bool
	Verdict string // pass, fail or inconclusive
	Runs    int
	Failed  string
	Cells   []compareCell
	Reports []string
}

// compareCell is a key figure in the ranking table: its value, the status
// shown (shownStatus) and why, when that is not the check's.
type compareCell struct{ Value, Status, Note string }

type compareRun struct {
	Subject, Seed, Status, Failed, Report string
}

// figureText prints key figure id's value x (NaN: unknown) by the
// formatter of its kind, in the ranking table and beside the plot's bars.
func figureText(id string, x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case id == FigureSuccess:
		return fmtPct(x)
	case id == FigureP99:
		return fmtDur(time.Duration(x * 1e9))
	}
	return fmtNum(x)
}

// compareCells are r's key figures as the ranking table shows them, each by
// the formatter of its kind.
func compareCells(r Ranked) []compareCell {
	var cells []compareCell
	for _, kf := range keyFigures {
		cell := compareCell{Value: figureText(kf.id, r.Figures[kf.id]), Status: shownStatus(r, kf)}
		if cell.Status == statusMoot {
			cell.Note = "the " + kf.check + " check passed, but no logical request succeeded"
		}
		cells = append(cells, cell)
	}
	return cells
}

func comparePage(dir, title, scenario string, c *Comparison, entries []CompareEntry) (*comparePageData, error) {
	pd := &comparePageData{Title: title, Scenario: scenario}
	for _, kf := range keyFigures {
		pd.Figures = append(pd.Figures, fact{kf.title, kf.unit})
	}
	src, w, h, err := pngDataURI(filepath.Join(dir, c.Plot.PNG))
	if err != nil {
		return nil, err
	}
	pd.Plot = plotView{Plot: c.Plot, Src: src, PixWidth: w, PixHeight: h}
	for _, r := range c.Ranking {
		row := compareRow{Rank: r.Rank, Subject: r.Subject, Pass: r.Pass, Verdict: r.Verdict, Runs: r.Runs, Failed: strings.Join(r.Failed, ", "), Reports: r.Reports,
			Cells: compareCells(r)}
		pd.Rows = append(pd.Rows, row)
	}
	for _, e := range entries {
		st := analyzer.VerdictPass
		switch {
		case e.Verdict.Status == analyzer.VerdictInconclusive:
			st = analyzer.VerdictInconclusive
		case !e.Verdict.Pass:
			st = analyzer.VerdictFail
		}
		pd.Runs = append(pd.Runs, compareRun{Subject: e.Subject, Seed: fmt.Sprint(e.Seed), Status: st, Failed: strings.Join(e.Verdict.Failed(), ", "), Report: e.Report})
	}
	return pd, nil
}
