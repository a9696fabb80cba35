package reports

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"

	"github.com/retrylab/retrylab/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours. Outcome classes follow a traffic-light scheme; warnings are the
// same red everywhere.
var (
	classColors = [numClasses]color.Color{
		rgb(0x2c, 0xa0, 0x2c), // 2xx: green
		rgb(0xff, 0x7f, 0x0e), // 429: orange
		rgb(0xd6, 0x27, 0x28), // 503: red
		rgb(0x94, 0x67, 0xbd), // other: purple
		rgb(0x33, 0x33, 0x33), // fault: near black
	}
	colorOK      = rgb(0x1f, 0x77, 0xb4) // blue: within bounds, on time
	colorWarn    = rgb(0xd6, 0x27, 0x28) // red: early, beyond bound, fail
	colorPass    = rgb(0x2c, 0xa0, 0x2c)
	colorSkip    = rgb(0x99, 0x99, 0x99)
	colorRef     = rgb(0x55, 0x55, 0x55) // reference lines
	colorPhaseA  = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0x14}
	colorPhaseB  = color.NRGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0x14}
	resultColors = map[string]color.Color{
		"ok":            rgb(0x2c, 0xa0, 0x2c),
		"gave-up":       rgb(0xff, 0x7f, 0x0e),
		"budget":        rgb(0x94, 0x67, 0xbd),
		"non-retryable": rgb(0x8c, 0x56, 0x4b),
		"error":         rgb(0xd6, 0x27, 0x28),
		"hung":          rgb(0x00, 0x00, 0x00),
		"canceled":      rgb(0x7f, 0x7f, 0x7f),
	}
)

func rgb(r, g, b uint8) color.Color { return color.NRGBA{R: r, G: g, B: b, A: 0xff} }

// Plot sizes and the default PNG resolution: 2× screen density, so the
// images stay sharp on high-density screens and in print.
const (
	plotWidth     = 8 * vg.Inch
	plotHeight    = 4 * vg.Inch
	defaultPNGDPI = 144
)

// newPlot returns a plot with the report's fonts (Liberation Sans, embedded
// in gonum: no system font is used, so rendering is the same everywhere).
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := styledPlot(title, xLabel, yLabel)
	p.Add(plotter.NewGrid())
	return p
}

// styledPlot is newPlot without the grid.
func styledPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	sans := func(s *text.Style, size vg.Length) {
		s.Font.Variant = "Sans"
		s.Font.Size = size
	}
	sans(&p.Title.TextStyle, 13)
	sans(&p.X.Label.TextStyle, 11)
	sans(&p.Y.Label.TextStyle, 11)
	sans(&p.X.Tick.Label, 9)
	sans(&p.Y.Tick.Label, 9)
	sans(&p.Legend.TextStyle, 9)
	p.Title.Padding = 6
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = 14
	p.Legend.Padding = 1.5
	return p
}

// newPanel is newPlot with vertical grid lines only (for bar charts).
func newPanel(title, xLabel string) *plot.Plot {
	p := styledPlot(title, xLabel, "")
	g := plotter.NewGrid()
	g.Horizontal.Color = nil
	p.Add(g)
	return p
}

// save writes p as name.png (at dpi) and name.svg in dir.
func save(p interface{ Draw(draw.Canvas) }, w, h vg.Length, dpi int, dir, name string) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	p.Draw(draw.New(img))
	if err := writeFile(filepath.Join(dir, name+".png"), vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(w, h)
	p.Draw(draw.New(svg))
	return writeFile(filepath.Join(dir, name+".svg"), svg)
}

// writeFile writes what w writes to path through a temporary file renamed
// into place, so a failed write never leaves half a plot behind.
func writeFile(path string, w io.WriterTo) error {
	if err := atomicfile.WriteTo(path, w); err != nil {
		return fmt.Errorf("reports: writing %s: %w", path, err)
	}
	return nil
}

// swatch is a legend thumbnail: a filled box.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// dots draws many points as small squares in one path per plotter, so an
// SVG holds a few tens of bytes per point.
type dots struct {
	xys   plotter.XYs
	color color.Color
	size  vg.Length // half the side
	diam  bool      // diamonds instead of squares
}

func (d *dots) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	var path vg.Path
	for _, xy := range d.xys {
		pt := vg.Point{X: trX(xy.X), Y: trY(xy.Y)}
		if !c.Contains(pt) {
			continue
		}
		s := d.size
		if d.diam {
			path.Move(vg.Point{X: pt.X - s, Y: pt.Y})
			path.Line(vg.Point{X: pt.X, Y: pt.Y - s})
			path.Line(vg.Point{X: pt.X + s, Y: pt.Y})
			path.Line(vg.Point{X: pt.X, Y: pt.Y + s})
		} else {
			path.Move(vg.Point{X: pt.X - s, Y: pt.Y - s})
			path.Line(vg.Point{X: pt.X + s, Y: pt.Y - s})
			path.Line(vg.Point{X: pt.X + s, Y: pt.Y + s})
			path.Line(vg.Point{X: pt.X - s, Y: pt.Y + s})
		}
		path.Close()
	}
	if len(path) > 0 {
		c.SetColor(d.color)
		c.Fill(path)
	}
}

func (d *dots) DataRange() (xmin, xmax, ymin, ymax float64) {
	if len(d.xys) == 0 {
		return math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	}
	return plotter.XYRange(d.xys)
}

func (d *dots) Thumbnail(c *draw.Canvas) {
	ctr := c.Center()
	s := d.size * 1.5
	c.FillPolygon(d.color, []vg.Point{{X: ctr.X - s, Y: ctr.Y - s}, {X: ctr.X + s, Y: ctr.Y - s}, {X: ctr.X + s, Y: ctr.Y + s}, {X: ctr.X - s, Y: ctr.Y + s}})
}

// vline is a vertical reference line at X with a label at its top.
type vline struct {
	x     float64
	label string
	style draw.LineStyle
}

func (v *vline) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	x := trX(v.x)
	if !c.ContainsX(x) {
		return
	}
	c.StrokeLine2(v.style, x, c.Min.Y, x, c.Max.Y)
}

func (v *vline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return v.x, v.x, math.Inf(1), math.Inf(-1)
}

func (v *vline) Thumbnail(c *draw.Canvas) {
	ctr := c.Center()
	c.StrokeLine2(v.style, ctr.X, c.Min.Y, ctr.X, c.Max.Y)
}

// segments draws horizontal segments (a step function by group).
type segments struct {
	segs  [][2]plotter.XY
	style draw.LineStyle
}

func (s *segments) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for _, sg := range s.segs {
		pts := []vg.Point{{X: trX(sg[0].X), Y: trY(sg[0].Y)}, {X: trX(sg[1].X), Y: trY(sg[1].Y)}}
		c.StrokeLines(s.style, c.ClipLinesXY(pts)...)
	}
}

func (s *segments) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, sg := range s.segs {
		for _, p := range sg {
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
		}
	}
	return
}

func (s *segments) Thumbnail(c *draw.Canvas) {
	ctr := c.Center()
	c.StrokeLine2(s.style, c.Min.X, ctr.Y, c.Max.X, ctr.Y)
}

// bands shades spans of the x axis (the scenario's phases) and labels each
// at the top of the data area (style should align the top: draw.YTop).
type bands struct {
	spans []band
	style text.Style
}

type band struct {
	from, to float64
	label    string
}

func (b *bands) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	for i, s := range b.spans {
		x0, x1 := trX(s.from), trX(s.to)
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 <= x0 {
			continue
		}
		fill := colorPhaseA
		if i%2 == 1 {
			fill = colorPhaseB
		}
		c.FillPolygon(fill, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		if i > 0 {
			c.StrokeLine2(draw.LineStyle{Color: colorRef, Width: 0.5, Dashes: []vg.Length{2, 2}}, x0, c.Min.Y, x0, c.Max.Y)
		}
		label := s.label
		for label != "" && b.style.Width(label) > x1-x0-4 {
			r := []rune(label)
			if len(r) <= 2 {
				label = ""
				break
			}
			label = string(r[:len(r)-2]) + "…"
		}
		if label != "" {
			c.FillText(b.style, vg.Point{X: x0 + 2, Y: c.Max.Y - 2}, label)
		}
	}
}

func (b *bands) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, s := range b.spans {
		xmin, xmax = math.Min(xmin, s.from), math.Max(xmax, s.to)
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}
