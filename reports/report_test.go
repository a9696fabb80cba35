package reports

import (
	"bytes"
	"encoding/base64"
	"errors"
	stdhtml "html"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// externalRef finds attributes and CSS that would make a browser fetch
// something: absolute or protocol-relative URLs in src, href, srcset,
// action, poster, data, and CSS url(...) or @import.
var externalRef = regexp.MustCompile(`(?i)(?:\b(?:src|href|srcset|action|poster|data|formaction)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//)|(?:url\(\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//)|@import`)

func externalRefs(html string) []string {
	return externalRef.FindAllString(html, -1)
}

func TestExternalRefs(t *testing.T) {
	tests := []struct {
		html string
		want int
	}{
		{`<img src="data:image/png;base64,AAAA">`, 0},
		{`<a href="compare.svg">SVG</a>`, 0},
		{`<svg xmlns="http://www.w3.org/2000/svg">`, 0},
		{`<img src="http://example.com/x.png">`, 1},
		{`<img src='https://example.com/x.png'>`, 1},
		{`<script src=//cdn.example.com/x.js></script>`, 1},
		{`<link rel="stylesheet" href="https://fonts.example.net/a.css">`, 1},
		{`<style>@import "x.css";</style>`, 1},
		{`<style>body{background:url(https://example.com/bg.png)}</style>`, 1},
	}
	for _, tt := range tests {
		if got := externalRefs(tt.html); len(got) != tt.want {
			t.Errorf("externalRefs(%q) = %q; want %d", tt.html, got, tt.want)
		}
	}
}

func readReport(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testDPI draws tiny PNGs for tests that do not look at them.
const testDPI = 8

var imgSrc = regexp.MustCompile(`<img [^>]*src="([^"]*)"`)

func TestReportHTML(t *testing.T) {
	rep := goldenReport(t)
	html := readReport(t, rep.HTML)
	for _, want := range []string{
		`<meta name="viewport"`, `@media print`, `@media (max-width`,
		`id="verdict-table"`, `id="check-retry-after"`, `id="check-waves"`, `id="check-idempotency"`,
		`<span class="badge fail">fail</span>`, `<span class="badge pass">pass</span>`, `<span class="badge skip">skip</span>`,
		`348 early retries`, `2.5 × full jitter`, `no POST requests`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, // evidence is escaped
		`id="warning-server-induced-synchronization"`, `spread Retry-After`,
		`synthetic-outage`, `A synthetic outage`, `<td>outage</td>`, `<td>recovered</td>`, `end of run`,
		`exponential backoff, full jitter`, `<dt>base</dt><dd>100ms</dd>`, `<dt>budget</dt><dd>6s</dd>`,
		`id="figures-table"`, `logical requests`, `completion p99`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(html, "<script>alert(1)") {
		t.Errorf("report.html carries unescaped markup from the verdict")
	}
	if refs := externalRefs(html); len(refs) > 0 {
		t.Errorf("report.html refers to the network: %q", refs)
	}
	srcs := imgSrc.FindAllStringSubmatch(html, -1)
	if len(srcs) != len(rep.Plots) {
		t.Errorf("report.html has %d images; want %d", len(srcs), len(rep.Plots))
	}
	for _, m := range srcs {
		data, ok := strings.CutPrefix(stdhtml.UnescapeString(m[1]), "data:image/png;base64,")
		if !ok {
			t.Errorf("image src %.40q is not an embedded PNG", m[1])
			continue
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Errorf("image data does not decode: %v", err)
			continue
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("embedded image is not a PNG: %v", err)
		}
	}
}

func TestReportWithoutVerdict(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (synth{clients: 10, requests: 1, seed: 3}).write(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	opts := Options{Title: "custom <title>", DPI: testDPI}
	rep, err := WriteFrom(t.TempDir(), bytes.NewReader(data), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Written twice, the report is the same, byte for byte: no
	// timestamps, fixed samples.
	rep2, err := WriteFrom(t.TempDir(), bytes.NewReader(data), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReportFile, "attempts.svg", "raster.svg", "backoff.svg"} {
		a, _ := os.ReadFile(filepath.Join(rep.Dir, name))
		b, _ := os.ReadFile(filepath.Join(rep2.Dir, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("two reports of the same timeline differ in %s (%d and %d bytes)", name, len(a), len(b))
		}
	}
	html := readReport(t, rep.HTML)
	if !strings.Contains(html, "Not analyzed") || strings.Contains(html, `id="verdict-table"`) {
		t.Errorf("report without a verdict: want the not-analyzed note and no verdict table")
	}
	if !strings.Contains(html, "<h1>custom &lt;title&gt;</h1>") {
		t.Errorf("report without a verdict: the custom title is missing or unescaped")
	}
}

// serveTimeline is a server-only recording: no outcomes, no subject, no
// policy, clients named by IP.
func serveTimeline() *bytes.Buffer {
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve", Scenario: "outage-date"})
	for i, a := range []timeline.Record{
		withNB(att("127.0.0.1", "GET /x", 1, 0, ms, 503), 1000*ms),
		att("127.0.0.1", "GET /x", 2, 1001*ms, 1002*ms, 200),
		att("127.0.0.2", "GET /y", 1, 5*ms, 6*ms, 429),
		att("127.0.0.2", "GET /y", 2, 100*ms, 101*ms, 200),
	} {
		_ = i
		enc.EncodeAttempt(&a.Attempt)
	}
	enc.Flush()
	return &buf
}

func TestReportServeRecording(t *testing.T) {
	dir := t.TempDir()
	// An earlier run report in the same directory leaves a completion plot.
	var run bytes.Buffer
	if _, err := (synth{clients: 10, requests: 1, seed: 3}).write(&run); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFrom(dir, &run, nil, Options{DPI: testDPI}); err != nil {
		t.Fatal(err)
	}
	rep, err := WriteFrom(dir, serveTimeline(), nil, Options{DPI: testDPI})
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[string]bool{}
	for _, p := range rep.Plots {
		drawn[p.Name] = p.PNG != ""
	}
	want := map[string]bool{PlotAttempts: true, PlotRaster: true, PlotRetryAfter: true, PlotBackoff: true, PlotCompletion: false}
	for name, w := range want {
		if drawn[name] != w {
			t.Errorf("serve recording: plot %s drawn = %v; want %v", name, drawn[name], w)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "completion.png")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier report's completion.png is still there (err %v)", err)
	}
	html := readReport(t, rep.HTML)
	for _, want := range []string{"serve recording", "No subject recorded: the clients ran outside the harness", "states no retry policy", "outcomes</th><td class=\"num\">none recorded"} {
		if !strings.Contains(html, want) {
			t.Errorf("serve report lacks %q", want)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	if _, err := Write(t.TempDir(), filepath.Join(t.TempDir(), "missing.ndjson"), nil, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Write(missing file) error = %v; want os.ErrNotExist", err)
	}
	if _, err := WriteFrom(t.TempDir(), strings.NewReader(""), nil, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("WriteFrom(empty) error = %v; want ErrEmpty", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := WriteFrom(filepath.Join(file, "sub"), serveTimeline(), nil, Options{}); err == nil {
		t.Errorf("WriteFrom(dir under a file) succeeded; want an error")
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	c, err := Compare(dir, compareEntries(), CompareOptions{Scenario: "synthetic-outage", Report: Options{DPI: testDPI}})
	if err != nil {
		t.Fatal(err)
	}
	var order, input []string
	for _, r := range c.Ranking {
		order = append(order, r.Subject)
	}
	for _, r := range c.Subjects {
		input = append(input, r.Subject)
	}
	// retrylab passes; ignore-retry-after fails one check, exp-no-jitter two.
	if want := []string{"retrylab", "ignore-retry-after", "exp-no-jitter"}; !slices.Equal(order, want) {
		t.Errorf("Ranking = %v; want %v", order, want)
	}
	if want := []string{"exp-no-jitter", "retrylab", "ignore-retry-after"}; !slices.Equal(input, want) {
		t.Errorf("Subjects = %v; want %v (entry order)", input, want)
	}
	first := c.Subjects[0]
	if first.Pass || first.Rank != 3 || !slices.Equal(first.Failed, []string{analyzer.CheckWaves, analyzer.CheckAmplification}) {
		t.Errorf("Subjects[0] = pass %v rank %d failed %v; want false 3 [waves amplification]", first.Pass, first.Rank, first.Failed)
	}
	best := c.Ranking[0]
	figs := []struct {
		id   string
		want float64
	}{{FigureHerd, 1.05}, {FigureEarly, 0}, {FigureAmplification, 1.51}, {FigureSuccess, 98.5}, {FigureP99, 2.2}}
	for _, f := range figs {
		if got := best.Figures[f.id]; math.Abs(got-f.want) > 1e-9 {
			t.Errorf("retrylab figure %s = %v; want %v (mean of two runs)", f.id, got, f.want)
		}
	}
	// No check judges the success rate: its status is skip, whatever the
	// verdict (it used to be the verdict's, drawn as a red FAIL bar).
	if best.Status[FigureP99] != analyzer.StatusSkip || c.Ranking[2].Status[FigureHerd] != analyzer.StatusFail || best.Status[FigureSuccess] != analyzer.StatusSkip ||
		c.Ranking[2].Status[FigureSuccess] != analyzer.StatusSkip {
		t.Errorf("statuses: retrylab p99 %s, exp-no-jitter herd %s, retrylab success %s; want skip, fail, skip",
			best.Status[FigureP99], c.Ranking[2].Status[FigureHerd], best.Status[FigureSuccess])
	}
	html := readReport(t, c.HTML)
	for _, want := range []string{`id="ranking-table"`, `id="runs-table"`, `<strong>retrylab</strong>`, `98.5%`, `2.2s`, `href="retrylab-s/report.html"`, `<code>waves, amplification</code>`} {
		if !strings.Contains(html, want) {
			t.Errorf("compare.html lacks %q", want)
		}
	}
	if refs := externalRefs(html); len(refs) > 0 {
		t.Errorf("compare.html refers to the network: %q", refs)
	}
	if i, j := strings.Index(html, "<strong>retrylab</strong>"), strings.Index(html, "<strong>exp-no-jitter</strong>"); i < 0 || j < i {
		t.Errorf("compare.html does not list retrylab before exp-no-jitter")
	}
}

func TestCompareFromTimelines(t *testing.T) {
	// Without Stats, Compare reads the timelines for the p99 completion.
	path, _ := synthFile(t, synth{clients: 20, requests: 1, seed: 5})
	v := testVerdict()
	c, err := Compare(t.TempDir(), []CompareEntry{{Subject: "a", Verdict: v, Timeline: path}, {Subject: "b", Verdict: v}}, CompareOptions{Report: Options{DPI: testDPI}})
	if err != nil {
		t.Fatal(err)
	}
	if p99 := c.Subjects[0].Figures[FigureP99]; math.IsNaN(p99) || p99 <= 0 {
		t.Errorf("p99 from the timeline = %v; want > 0", p99)
	}
	if p99 := c.Subjects[1].Figures[FigureP99]; !math.IsNaN(p99) {
		t.Errorf("p99 without stats or timeline = %v; want NaN", p99)
	}
	if got := c.Subjects[1].Figures[FigureSuccess]; got != 80 {
		t.Errorf("success rate from the verdict's figures = %v; want 80", got)
	}
}

func TestCompareErrors(t *testing.T) {
	tests := []struct {
		name    string
		entries []CompareEntry
	}{
		{"none", nil},
		{"no subject", []CompareEntry{{Verdict: testVerdict()}}},
		{"no verdict", []CompareEntry{{Subject: "a"}}},
		{"missing timeline", []CompareEntry{{Subject: "a", Verdict: testVerdict(), Timeline: filepath.Join(t.TempDir(), "nope")}}},
	}
	for _, tt := range tests {
		if _, err := Compare(t.TempDir(), tt.entries, CompareOptions{Report: Options{DPI: testDPI}}); err == nil {
			t.Errorf("Compare(%s) succeeded; want an error", tt.name)
		}
	}
	if _, err := Compare(t.TempDir(), nil, CompareOptions{}); !errors.Is(err, ErrNoEntries) {
		t.Errorf("Compare(nil) error = %v; want ErrNoEntries", err)
	}
}

// TestReportInconclusiveBanner: an INCONCLUSIVE verdict gets a badge and a
// banner listing every reason at the top of the page, above the scenario.
func TestReportInconclusiveBanner(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (synth{clients: 5, requests: 1, seed: 1}).write(&buf); err != nil {
		t.Fatal(err)
	}
	v := testVerdict()
	v.Pass, v.Status = false, analyzer.VerdictInconclusive
	for i := range v.Checks {
		if v.Checks[i].Status == analyzer.StatusFail {
			v.Checks[i].Status = analyzer.StatusPass
		}
	}
	v.Inconclusive = []string{"the run was interrupted by interrupt at 4.000s", "3 of 300 scheduled logical requests have an outcome"}
	rep, err := WriteFrom(t.TempDir(), &buf, v, Options{DPI: testDPI})
	if err != nil {
		t.Fatal(err)
	}
	html := readReport(t, rep.HTML)
	banner := strings.Index(html, `id="fidelity"`)
	scenario := strings.Index(html, `id="scenario"`)
	if banner < 0 || scenario < 0 || banner > scenario {
		t.Fatalf("banner at %d, scenario at %d; want a banner before the scenario", banner, scenario)
	}
	for _, want := range append([]string{`<span class="badge inconclusive">inconclusive</span>`, "Inconclusive: this run cannot be vouched for."}, v.Inconclusive...) {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(html, `<span class="badge pass">pass</span></p>`) || strings.Contains(html, `badge fail">fail</span></p>`) {
		t.Error("the verdict line of an inconclusive run says pass or fail")
	}
}

// TestCompareRanksInconclusiveLast: a subject whose runs could not be
// judged is never ranked as passing: PASS first, then FAIL, then
// INCONCLUSIVE, and compare.html says which.
func TestCompareRanksInconclusiveLast(t *testing.T) {
	verdict := func(status string) *analyzer.Verdict {
		v := testVerdict()
		v.Status, v.Pass, v.Inconclusive = status, status == analyzer.VerdictPass, nil
		for i := range v.Checks {
			if v.Checks[i].Status == analyzer.StatusFail && status != analyzer.VerdictFail {
				v.Checks[i].Status = analyzer.StatusPass
			}
		}
		if status == analyzer.VerdictInconclusive {
			v.Inconclusive = []string{"the timeline has no end record"}
		}
		return v
	}
	entries := []CompareEntry{
		{Subject: "unjudged", Seed: 1, Verdict: verdict(analyzer.VerdictInconclusive)},
		{Subject: "broken", Seed: 1, Verdict: verdict(analyzer.VerdictFail)},
		{Subject: "good", Seed: 1, Verdict: verdict(analyzer.VerdictPass)},
		{Subject: "flaky", Seed: 1, Verdict: verdict(analyzer.VerdictPass)},
		{Subject: "flaky", Seed: 2, Verdict: verdict(analyzer.VerdictInconclusive)},
	}
	c, err := Compare(t.TempDir(), entries, CompareOptions{Report: Options{DPI: testDPI}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range c.Ranking {
		got = append(got, r.Subject+":"+r.Verdict)
		if r.Verdict != analyzer.VerdictPass && r.Pass {
			t.Errorf("%s: Pass with verdict %s", r.Subject, r.Verdict)
		}
	}
	// Within a verdict, the figures decide (equal here); sort that tail.
	slices.Sort(got[2:])
	want := []string{"good:pass", "broken:fail", "flaky:inconclusive", "unjudged:inconclusive"}
	if !slices.Equal(got, want) {
		t.Errorf("ranking = %v; want %v", got, want)
	}
	html := readReport(t, c.HTML)
	if !strings.Contains(html, `<span class="badge inconclusive">inconclusive</span>`) {
		t.Error("compare.html does not mark the inconclusive subjects")
	}
}
