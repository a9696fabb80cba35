// Package reports owns what a reviewer reads instead of a timeline: the plots
// of a run (PNG and SVG, drawn with gonum/plot), the self-contained HTML
// report around them, and the comparison of several subjects.
//
// Everything is computed in one streaming pass over the timeline with
// bounded memory: per-time-bin counters, an evenly sampled set of client
// rows, fixed-size random samples for the scatter plots and log-bucketed
// histograms for the completion times. A run of ten million attempts draws
// the same size of SVG as a run of ten thousand.
//
// Rendering is deterministic: the fonts are gonum's embedded Liberation
// fonts, samples use fixed seeds and nothing records the time of writing,
// so the same timeline gives the same files.
//
// Use:
//
//   - Write (a timeline file) or WriteFrom (a reader) writes report.html
//     and the plots beside it; give it the analyzer's verdict on the same
//     timeline, or nil.
//   - To read a timeline once for both the verdict and the report, Collect
//     it (or feed each record to a Collector: NewCollector, Add), then
//     take Collector.Verdict and call Collector.Write with it.
//
// A report never classifies retries itself: its collector runs an analyzer
// (with Options.Analyzer) and draws the facts the analyzer judges each
// retry on (analyzer.Retry), so its counts are the verdict's; the capacity
// plot draws the capacity checks' series and recovery instant
// (Analyzer.Load) the same way.
//   - Compare writes compare.html: several subjects' runs of one scenario,
//     ranked, with the key-figure plot.
//
// The report is self-contained: the PNGs are embedded as data URIs (the SVG
// and PNG files beside it are linked, never loaded), there is no script or
// font from the network, and the page reads on a phone and prints.
package reports

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// ReportFile is the name of the HTML report in its directory.
const ReportFile = "report.html"

// ErrEmpty is returned for a timeline without a single record.
var ErrEmpty = errors.New("reports: empty timeline")

// Options tune a report. The zero value is ready to use.
type Options struct {
	// Analyzer are the options of the analyzer whose facts the report
	// draws: which retries are paced, early or beyond the bound, with the
	// checks' tolerances (--check retry-after:tolerance=…). Give the
	// options the verdict was made with. Analyzer.Serial decodes on the
	// calling goroutine.
	Analyzer analyzer.Options
	// MaxClients is the most client rows the raster draws; beyond it the
	// clients are sampled evenly (0: 300).
	MaxClients int
	// Title replaces the report's title (default: "scenario · subject").
	Title string
	// DPI is the resolution of the PNGs (0: 144, twice screen density; a
	// plot is 8 inches wide). The SVGs do not depend on it.
	DPI int
}

func (o Options) withDefaults() Options {
	if o.DPI <= 0 {
		o.DPI = defaultPNGDPI
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 300
	}
	return o
}

// Report describes what Write wrote.
type Report struct {
	Dir  string // the directory written to
	HTML string // path of report.html
	// Plots are in report order, including the ones not drawn (see
	// Plot.Note); the capacity plot (PlotCapacity) is in it only when the
	// timeline's meta states a capacity model, the quota plot (PlotQuota)
	// only when it lists the published limits.
	Plots []Plot
	Stats Stats // the report's own figures
}

// Write reads the timeline at timelinePath in one pass and writes, in dir
// (created if needed), report.html and the plots beside it as NAME.png and
// NAME.svg (see the Plot* names). v is the analyzer's verdict on the same
// timeline (made with opts.Analyzer); nil leaves the verdict section out.
// Either way the report's retry figures come from an analyzer it runs on
// the same pass. Files of an earlier report in dir are overwritten.
func Write(dir, timelinePath string, v *analyzer.Verdict, opts Options) (*Report, error) {
	f, err := os.Open(timelinePath)
	if err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	defer f.Close()
	return WriteFrom(dir, f, v, opts)
}

// WriteFrom is Write for a timeline read from r.
func WriteFrom(dir string, r io.Reader, v *analyzer.Verdict, opts Options) (*Report, error) {
	c, err := Collect(r, opts)
	if err != nil {
		return nil, err
	}
	return c.Write(dir, v)
}

// Collect reads a whole timeline from r into a new Collector, in one pass
// that also feeds the collector's analyzer (Collector.Verdict). The first
// record should be the meta record; without it the plots that need the
// scenario say so. A malformed line is an error wrapping the
// *timeline.SyntaxError that names it; invalid opts.Analyzer an error
// from analyzer.Options.Validate.
func Collect(r io.Reader, opts Options) (*Collector, error) {
	if err := opts.Analyzer.Validate(); err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	var c *Collector
	err := analyzer.ReadTimeline(r, opts.Analyzer.Serial, func(meta *timeline.Meta) func(*timeline.Record) {
		c = NewCollector(meta, opts)
		return c.Add
	})
	switch {
	case errors.Is(err, analyzer.ErrNoRecords):
		return nil, ErrEmpty
	case err != nil:
		return nil, fmt.Errorf("reports: %w", err)
	}
	return c, nil
}

// Write draws what the collector holds into dir (created if needed):
// report.html and the plots beside it. v may be nil (no verdict section).
// The collector may keep collecting afterwards.
func (c *Collector) Write(dir string, v *analyzer.Verdict) (*Report, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	rep := &Report{Dir: dir, HTML: filepath.Join(dir, ReportFile), Stats: c.Stats()}
	for _, d := range c.plots() {
		if d.p != nil {
			if err := save(d.p, d.w, d.h, c.opts.DPI, dir, d.Name); err != nil {
				return nil, err
			}
			d.PNG, d.SVG = d.Name+".png", d.Name+".svg"
		} else {
			removeStale(dir, d.Name)
		}
		rep.Plots = append(rep.Plots, d.Plot)
	}
	page, err := c.page(rep, v)
	if err != nil {
		return nil, err
	}
	if err := writeHTML(rep.HTML, "report", page); err != nil {
		return nil, err
	}
	return rep, nil
}

// removeStale deletes the files of a plot an earlier report in the same
// directory drew and this one does not, so the directory never mixes runs.
func removeStale(dir, name string) {
	for _, ext := range []string{".png", ".svg"} {
		_ = os.Remove(filepath.Join(dir, name+ext))
	}
}
