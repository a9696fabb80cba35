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
//   - To read a timeline once for both the analyzer and the report, feed
//     each record to an analyzer.Analyzer and to a Collector (NewCollector,
//     Add), then call Collector.Write with the verdict.
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
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// ReportFile is the name of the HTML report in its directory.
const ReportFile = "report.html"

// ErrEmpty is returned for a timeline without a single record.
var ErrEmpty = errors.New("reports: empty timeline")

// Options tune a report. The zero value is ready to use.
type Options struct {
	// Tolerance is the measurement tolerance under which a retry that
	// arrives before not_before still counts as on time (0: 5ms, the
	// analyzer's default for the retry-after check).
	Tolerance time.Duration
	// BoundTolerance is how far past the stated policy's bound a backoff
	// delay may be before it is drawn as beyond it (0: 25ms, the
	// analyzer's default for the jitter-bounds check).
	BoundTolerance time.Duration
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
	if o.Tolerance <= 0 {
		o.Tolerance = 5 * time.Millisecond
	}
	if o.BoundTolerance <= 0 {
		o.BoundTolerance = 25 * time.Millisecond
	}
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
	Dir   string // the directory written to
	HTML  string // path of report.html
	Plots []Plot // in report order, including the ones not drawn (see Plot.Note)
	Stats Stats  // the report's own figures
}

// Write reads the timeline at timelinePath in one pass and writes, in dir
// (created if needed), report.html and the plots beside it as NAME.png and
// NAME.svg (see the Plot* names). v is the analyzer's verdict on the same
// timeline; nil leaves the verdict section out. Files of an earlier report
// in dir are overwritten.
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

// Collect reads a whole timeline from r into a new Collector. The first
// record should be the meta record; without it the plots that need the
// scenario say so. A malformed line is an error wrapping the
// *timeline.SyntaxError that names it.
func Collect(r io.Reader, opts Options) (*Collector, error) {
	dec := timeline.NewDecoder(r)
	rec := new(timeline.Record)
	if err := dec.Decode(rec); err != nil {
		if err == io.EOF {
			return nil, ErrEmpty
		}
		return nil, fmt.Errorf("reports: %w", err)
	}
	var c *Collector
	if rec.Type == timeline.TypeMeta {
		c = NewCollector(rec.Meta, opts)
	} else {
		c = NewCollector(nil, opts)
		c.Add(rec)
	}
	for {
		err := dec.Decode(rec)
		if err == io.EOF {
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reports: %w", err)
		}
		c.Add(rec)
	}
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
