package reports

import (
	"image/color"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/retrylab/retrylab/analyzer"
)

// TestCompareColours: the comparison plot shows inconclusive in its own
// colour (neither pass nor fail), never colours the success rate by the
// verdict, ends the success axis at 100 %, explains an all-n/a panel, and
// draws a key to its colours.
func TestCompareColours(t *testing.T) {
	colours := map[string]color.Color{}
	for _, v := range []string{analyzer.VerdictPass, analyzer.VerdictFail, analyzer.VerdictInconclusive} {
		colours[v] = verdictColor(v)
	}
	if sameColor(colours["inconclusive"], colours["pass"]) || sameColor(colours["inconclusive"], colours["fail"]) || sameColor(colours["pass"], colours["fail"]) {
		t.Errorf("verdict colours not distinct: %v", colours)
	}

	// retrylab: 100 % success, waves skipped in every run, and a verdict
	// that fails on another check.
	es := compareEntries()
	for i := range es {
		v := *es[i].Verdict
		v.Checks = slices.Clone(v.Checks)
		for j := range v.Checks {
			if v.Checks[j].ID == analyzer.CheckWaves {
				v.Checks[j].Status = analyzer.StatusSkip
			}
		}
		if es[i].Subject == "retrylab" {
			v.Status, v.Pass = analyzer.VerdictFail, false
			v.Figures.Results = map[string]int64{"ok": 100}
		}
		if es[i].Subject == "ignore-retry-after" {
			v.Status, v.Pass = analyzer.VerdictInconclusive, false
			for j := range v.Checks {
				if v.Checks[j].Status == analyzer.StatusFail {
					v.Checks[j].Status = analyzer.StatusPass
				}
			}
		}
		es[i].Verdict = &v
	}
	ranking := rankSubjects(es, make([]*Stats, len(es)))
	d := comparePlot(ranking, "t")
	tl := d.p.(*tiled)
	for i, kf := range keyFigures {
		p, hb := tl.plots[0][i], tl.bars[i]
		switch kf.id {
		case FigureSuccess:
			if p.X.Min != 0 || p.X.Max != 100 {
				t.Errorf("success axis [%v, %v]; want [0, 100]", p.X.Min, p.X.Max)
			}
			for _, b := range hb.bars {
				if sameColor(b.fill, colorWarn) || sameColor(b.fill, colorPass) || b.status == analyzer.StatusFail {
					t.Errorf("success bar %v drawn as pass or fail (status %s): no check judges it", b.value, b.status)
				}
			}
		case FigureHerd:
			if note := strings.Join(hb.note, " "); !strings.Contains(note, "not measured") || !strings.Contains(note, "waves check was skipped") {
				t.Errorf("herd panel note = %q; want it to say the waves check was skipped", note)
			}
		}
	}
	verdicts := map[string]string{}
	for _, r := range ranking {
		verdicts[r.Subject] = r.Verdict
	}
	if verdicts["retrylab"] != analyzer.VerdictFail || verdicts["ignore-retry-after"] != analyzer.VerdictInconclusive {
		t.Fatalf("verdicts %v", verdicts)
	}

	// Drawn: the badge of the inconclusive subject adds amber to the image
	// (the key has one amber swatch either way).
	amber := func(rs []Ranked) int {
		img := vgimg.NewWith(vgimg.UseWH(12*vg.Inch, 4*vg.Inch), vgimg.UseDPI(72))
		comparePlot(rs, "t").p.Draw(draw.New(img))
		n := 0
		b := img.Image().Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if sameColor(img.Image().At(x, y), colorInconclusive) {
					n++
				}
			}
		}
		return n
	}
	with := amber(ranking)
	judged := slices.Clone(ranking)
	for i := range judged {
		if judged[i].Verdict == analyzer.VerdictInconclusive {
			judged[i].Verdict = analyzer.VerdictFail
		}
	}
	without := amber(judged)
	if without == 0 {
		t.Errorf("no amber in the key of the comparison plot")
	}
	if with <= without+20 {
		t.Errorf("amber pixels: %d with an inconclusive subject, %d without; want its badge drawn in amber", with, without)
	}
}

func sameColor(a, b color.Color) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}

// rankSubjects is the ranking Compare draws, best first.
func rankSubjects(entries []CompareEntry, stats []*Stats) []Ranked {
	ranking, _, _ := rankBoth(entries, stats)
	return ranking
}

// TestCompareNoGreenWhenNoneSucceeded: a subject none of whose logical
// requests succeeded gets no green (no pass) in the comparison, neither
// bar nor table cell, though its checks passed and its p99 completion is
// the lowest; a subject that succeeded keeps its green.
func TestCompareNoGreenWhenNoneSucceeded(t *testing.T) {
	var es []CompareEntry
	for _, e := range compareEntries() {
		v := *e.Verdict
		v.Checks = slices.Clone(v.Checks)
		for j := range v.Checks {
			if v.Checks[j].ID == analyzer.CheckBudget {
				v.Checks[j].Status = analyzer.StatusPass
			}
		}
		e.Verdict = &v
		es = append(es, e)
		if e.Subject != "retrylab" {
			continue
		}
		// fail-fast: every check passes, every request fails at once.
		f := e
		fv := *e.Verdict
		fv.Figures.Subject, fv.Figures.Attempts = "fail-fast", 100
		fv.Figures.Results = map[string]int64{"gave-up": 100}
		fv.Checks = slices.Clone(fv.Checks)
		for j := range fv.Checks {
			fv.Checks[j].Status = analyzer.StatusPass
		}
		f.Subject, f.Verdict, f.Report = "fail-fast", &fv, ""
		f.Stats = &Stats{Outcomes: 100, P99: durationOf(0.05)}
		es = append(es, f)
	}
	stats := make([]*Stats, len(es))
	for i, e := range es {
		stats[i] = e.Stats
	}
	ranking := rankSubjects(es, stats)
	row := map[string]Ranked{}
	for _, r := range ranking {
		row[r.Subject] = r
	}
	ff, ok := row["fail-fast"]
	if !ok || ff.Figures[FigureSuccess] != 0 || ff.Status[FigureP99] != analyzer.StatusPass || ff.Verdict != analyzer.VerdictPass {
		t.Fatalf("fail-fast = %+v; want 0%% success, its budget check passed", ff)
	}
	if !(ff.Figures[FigureP99] < row["retrylab"].Figures[FigureP99]) {
		t.Fatalf("fail-fast's p99 %v not the lowest (retrylab %v)", ff.Figures[FigureP99], row["retrylab"].Figures[FigureP99])
	}

	// The plot: no green bar for fail-fast; retrylab's p99 bar is green.
	tl := comparePlot(ranking, "t").p.(*tiled)
	for i, kf := range keyFigures {
		for j, b := range tl.bars[i].bars {
			switch ranking[j].Subject {
			case "fail-fast":
				if sameColor(b.fill, colorPass) || b.status == analyzer.StatusPass {
					t.Errorf("fail-fast's %s bar is drawn as a pass (status %s): none of its requests succeeded", kf.id, b.status)
				}
			case "retrylab":
				if kf.id == FigureP99 && !sameColor(b.fill, colorPass) {
					t.Errorf("retrylab's p99 bar is not green (status %s): its budget check passed and its requests succeeded", b.status)
				}
			}
		}
	}

	// The table: fail-fast's cells are moot, with a note saying why.
	for i, c := range compareCells(ff) {
		if c.Status == analyzer.StatusPass {
			t.Errorf("fail-fast's %s cell shows a pass", keyFigures[i].id)
		}
		if keyFigures[i].id == FigureP99 && (c.Status != statusMoot || !strings.Contains(c.Note, "no logical request succeeded")) {
			t.Errorf("fail-fast's p99 cell = %+v; want moot, with a note saying no request succeeded", c)
		}
	}
	if c := compareCells(row["retrylab"]); c[len(c)-1].Status != analyzer.StatusPass {
		t.Errorf("retrylab's p99 cell = %+v; want pass", c[len(c)-1])
	}

	// The page: fail-fast's row has no green cell.
	c, err := Compare(t.TempDir(), es, CompareOptions{Report: Options{DPI: testDPI}})
	if err != nil {
		t.Fatal(err)
	}
	html := readReport(t, c.HTML)
	i := strings.Index(html, "<strong>fail-fast</strong>")
	if i < 0 {
		t.Fatal("compare.html lacks fail-fast")
	}
	tr := html[i:]
	tr = tr[:strings.Index(tr, "</tr>")]
	if strings.Contains(tr, "cell-pass") || !strings.Contains(tr, "cell-moot") {
		t.Errorf("fail-fast's row in compare.html shows a pass, or no moot cell:\n%s", tr)
	}
	if !strings.Contains(html, `class="cell-pass"`) {
		t.Errorf("compare.html has no green cell at all; want retrylab's")
	}
}
