package reports

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/plot/cmpimg"

	"github.com/retrylab/retrylab/analyzer"
)

var update = flag.Bool("update", false, "rewrite the golden images in testdata/")

// goldenSynth is the synthetic run every golden image is drawn from.
var goldenSynth = synth{clients: 120, requests: 3, seed: 1}

// The report of the golden run, written once per test binary.
var (
	goldenOnce sync.Once
	goldenRep  *Report
	goldenErr  error
)

func goldenReport(t *testing.T) *Report {
	t.Helper()
	goldenOnce.Do(func() {
		dir, err := os.MkdirTemp("", "reports-golden-")
		if err != nil {
			goldenErr = err
			return
		}
		var buf bytes.Buffer
		if _, err := goldenSynth.write(&buf); err != nil {
			goldenErr = err
			return
		}
		goldenRep, goldenErr = WriteFrom(dir, &buf, testVerdict(), Options{DPI: goldenDPI})
	})
	if goldenErr != nil {
		t.Fatal(goldenErr)
	}
	return goldenRep
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if goldenRep != nil {
		os.RemoveAll(goldenRep.Dir)
	}
	if benchPath != "" {
		os.RemoveAll(filepath.Dir(benchPath))
	}
	os.Exit(code)
}

// testVerdict is a fixed verdict with every status, examples and a
// warning; its strings carry markup that must come out escaped.
func testVerdict() *analyzer.Verdict {
	return &analyzer.Verdict{
		Pass: false,
		Checks: []analyzer.CheckResult{
			{ID: analyzer.CheckRetryAfter, Status: analyzer.StatusFail, Figure: 348, Threshold: 0, Unit: "early retries", Samples: 644,
				Reason: "retries before not_before", Examples: []analyzer.Example{
					{Client: "7", Key: "7/0", Attempt: 2, At: 50_000_000, Prev: 4_000_000, Detail: "came 1.95s early <script>alert(1)</script>"},
				}},
			{ID: analyzer.CheckWaves, Status: analyzer.StatusPass, Figure: 1.013, Threshold: 2.5, Unit: "× full jitter", Samples: 197, Reason: "bunching of client-paced retries"},
			{ID: analyzer.CheckIdempotency, Status: analyzer.StatusSkip, Unit: "retries", Reason: "no POST requests"},
		},
		Warnings: []analyzer.Warning{{ID: analyzer.WarnServerSync, Message: "296 retries came back together at the outage's end", Remedy: "spread Retry-After"}},
		Figures:  analyzer.Figures{Scenario: "synthetic-outage", Subject: "synthetic", Attempts: 10, Requests: 5, Outcomes: 5, Results: map[string]int64{"ok": 4, "gave-up": 1}},
	}
}

// goldenDPI is the resolution of the golden images: half the default, a
// quarter of the pixels, so the suite stays quick under -race.
const goldenDPI = 72

// wantSize is the pixel size of each plot's PNG at goldenDPI.
var wantSize = map[string][2]int{
	PlotAttempts:   {576, 288},
	PlotRaster:     {576, 360},
	PlotRetryAfter: {576, 288},
	PlotBackoff:    {576, 288},
	PlotCompletion: {576, 288},
	PlotQuota:      {576, 288},
	PlotCapacity:   {576, 360},
	PlotCompare:    {864, 248}, // 12 × 3.45 in: 3 in of panels, the key under them
}

func TestPlotsGolden(t *testing.T) {
	rep := goldenReport(t)
	if len(rep.Plots) != 5 {
		t.Fatalf("report has %d plots; want 5", len(rep.Plots))
	}
	for _, p := range rep.Plots {
		t.Run(p.Name, func(t *testing.T) {
			if p.PNG == "" {
				t.Fatalf("plot %s not drawn: %s", p.Name, p.Note)
			}
			checkPlotFiles(t, rep.Dir, p)
		})
	}
}

func TestComparePlotGolden(t *testing.T) {
	dir := t.TempDir()
	c, err := Compare(dir, compareEntries(), CompareOptions{Scenario: "synthetic-outage", Report: Options{DPI: goldenDPI}})
	if err != nil {
		t.Fatal(err)
	}
	checkPlotFiles(t, dir, c.Plot)
}

// checkPlotFiles checks a drawn plot's PNG (decodes, has its size, matches
// its golden image) and SVG (parses, is small).
func checkPlotFiles(t *testing.T, dir string, p Plot) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, p.PNG))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("%s does not decode: %v", p.PNG, err)
	}
	if b, want := img.Bounds(), wantSize[p.Name]; b.Dx() != want[0] || b.Dy() != want[1] {
		t.Errorf("%s is %dx%d; want %dx%d", p.PNG, b.Dx(), b.Dy(), want[0], want[1])
	}
	checkSVG(t, filepath.Join(dir, p.SVG), 3<<20)

	golden := filepath.Join("testdata", p.Name+".golden.png")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	ok, err := cmpimg.EqualApprox("png", got, want, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		saved := filepath.Join(artifactDir(t), p.Name+".got.png")
		os.WriteFile(saved, got, 0o644)
		t.Errorf("%s differs from %s (got saved as %s; run go test -run Golden -update if the change is meant)", p.PNG, golden, saved)
	}
}

// checkSVG parses an SVG file as XML and checks its root and size.
func checkSVG(t *testing.T, path string, maxBytes int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxBytes {
		t.Errorf("%s is %d bytes; want at most %d", filepath.Base(path), fi.Size(), maxBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", filepath.Base(path), err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s root element = %q; want svg", filepath.Base(path), root)
	}
}

// artifactDir is where tests leave files for a human (screenshots, failed
// images): $RETRYLAB_ARTIFACTS when set, else a temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("RETRYLAB_ARTIFACTS"); d != "" {
		d = filepath.Join(d, "reports")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// compareEntries are fixed runs of three subjects (two seeds each).
func compareEntries() []CompareEntry {
	mk := func(subject string, seed int64, pass bool, herd, early float64, ok, attempts int64, p99 float64) CompareEntry {
		v := &analyzer.Verdict{Pass: pass, Figures: analyzer.Figures{Scenario: "synthetic-outage", Subject: subject,
			Attempts: attempts, Requests: 100, Outcomes: 100, Results: map[string]int64{"ok": ok, "gave-up": 100 - ok}}}
		st := func(fail bool) string {
			if fail {
				return analyzer.StatusFail
			}
			return analyzer.StatusPass
		}
		v.Checks = []analyzer.CheckResult{
			{ID: analyzer.CheckRetryAfter, Status: st(early > 0), Figure: early},
			{ID: analyzer.CheckWaves, Status: st(herd > 2.5), Figure: herd, Threshold: 2.5},
			{ID: analyzer.CheckAmplification, Status: st(float64(attempts)/100 > 3), Figure: float64(attempts) / 100, Threshold: 3},
			{ID: analyzer.CheckBudget, Status: analyzer.StatusSkip},
		}
		s := &Stats{Outcomes: 100, P99: durationOf(p99)}
		return CompareEntry{Subject: subject, Seed: seed, Verdict: v, Stats: s, Report: subject + "-" + strings.Repeat("s", int(seed)) + "/report.html"}
	}
	return []CompareEntry{
		mk("exp-no-jitter", 1, false, 6.1, 0, 80, 350, 4.2),
		mk("exp-no-jitter", 2, false, 5.7, 0, 82, 340, 4.0),
		mk("retrylab", 1, true, 1.0, 0, 99, 150, 2.1),
		mk("retrylab", 2, true, 1.1, 0, 98, 152, 2.3),
		mk("ignore-retry-after", 1, false, 1.2, 40, 90, 220, 1.5),
		mk("ignore-retry-after", 2, false, 1.3, 38, 91, 230, 1.4),
	}
}

func durationOf(seconds float64) time.Duration { return time.Duration(seconds * 1e9) }
