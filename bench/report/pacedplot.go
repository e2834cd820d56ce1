package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/modelgate/gateway/bench/load"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// pacedSeries is one target's points in a paced-stream plot: x is the
// number of streams asked for, y the value plotted.
type pacedSeries struct {
	target string
	// color is the target's index in its scenario, so that a target keeps
	// its colour and shape in every plot, whichever targets are left out.
	color int
	pts   plotter.XYs
}

// writePacedPlots writes the paced-stream plots of sc into dir, named
// base-memory.png, base-cpu.png and base-delay.png, and returns the names
// written. The values are those of the paced-stream table (PacedRows), so
// the two never disagree. A plot with no point to show is not written.
func writePacedPlots(dir, base string, run *Run, sc *Scenario) ([]string, error) {
	rows := scenarioPacedRows(run, sc)
	if len(rows) == 0 {
		return nil, nil
	}
	var files []string
	save := func(name string, p *plot.Plot) error {
		if err := savePlot(p, filepath.Join(dir, name)); err != nil {
			return err
		}
		files = append(files, name)
		return nil
	}
	memory := pacedSeriesOf(sc, rows, func(r *PacedRow) (float64, bool) {
		return r.BytesPerStream / 1024, r.BytesPerStream > 0
	})
	if hasPoints(memory) {
		p := streamsPlot(sc.Name+": memory per open stream", "RSS per open stream (KiB)", memory)
		if err := save(base+"-memory.png", p); err != nil {
			return files, err
		}
	}
	cpu := pacedSeriesOf(sc, rows, func(r *PacedRow) (float64, bool) {
		return r.CPUPerEvent, r.CPUPerEvent > 0
	})
	if hasPoints(cpu) {
		p := streamsPlot(sc.Name+": CPU per relayed event", "CPU µs per event", cpu)
		if err := save(base+"-cpu.png", p); err != nil {
			return files, err
		}
	}
	delays := make([][]pacedSeries, len(delayPercentiles))
	for i, q := range delayPercentiles {
		delays[i] = pacedSeriesOf(sc, rows, func(r *PacedRow) (float64, bool) {
			return max(float64(q.of(&r.Delay))/float64(time.Millisecond), minPlotMs), r.Delay.Count > 0
		})
	}
	if hasPoints(delays[0]) {
		name := base + "-delay.png"
		if err := saveDelayPlots(filepath.Join(dir, name), sc.Name, delays); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}

// pacedSeriesOf returns one series per target of sc that has a row, in
// target order, with a point at each of its rows for which value is ok.
func pacedSeriesOf(sc *Scenario, rows []PacedRow, value func(*PacedRow) (float64, bool)) []pacedSeries {
	var out []pacedSeries
	for i := range sc.Targets {
		s := pacedSeries{target: sc.Targets[i].Name, color: i}
		found := false
		for j := range rows {
			r := &rows[j]
			if r.Target != s.target {
				continue
			}
			found = true
			if y, ok := value(r); ok {
				s.pts = append(s.pts, plotter.XY{X: float64(r.Streams), Y: y})
			}
		}
		if found {
			out = append(out, s)
		}
	}
	return out
}

func hasPoints(series []pacedSeries) bool {
	for _, s := range series {
		if len(s.pts) > 0 {
			return true
		}
	}
	return false
}

// streamsPlot plots series against the number of streams, one line with
// points per target, on linear axes from 0. A target without a point is
// named in the legend as not measured (direct has no process of its own
// between the client and the simulator to sample).
func streamsPlot(title, yLabel string, series []pacedSeries) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "concurrent streams"
	p.Y.Label.Text = yLabel
	placeLegend(p)
	top := addSeries(p, series)
	p.X.Min, p.X.Max = streamsRange(series)
	p.Y.Min = 0
	// Room above the lines for the legend, a band of the plot's height per
	// entry.
	p.Y.Max = max(top, 1e-9) / (1 - legendBand(len(series)))
	p.Add(plotter.NewGrid())
	return p
}

// addSeries adds the lines and the legend entries of series to p and
// returns the highest y.
func addSeries(p *plot.Plot, series []pacedSeries) (top float64) {
	for _, s := range series {
		if len(s.pts) == 0 {
			p.Legend.Add(s.target + " (not measured)")
			continue
		}
		line, points, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			panic("BUG: finite points rejected: " + err.Error())
		}
		line.Color, points.Color = plotutil.Color(s.color), plotutil.Color(s.color)
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(s.color)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(s.target, line, points)
		for _, pt := range s.pts {
			top = max(top, pt.Y)
		}
	}
	return top
}

// placeLegend puts p's legend in the top left corner of its data area,
// clear of the title.
func placeLegend(p *plot.Plot) {
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(6)
	p.Legend.Padding = vg.Points(2)
}

// legendBand is the share of a plot's height kept free above the lines
// for a legend of n entries.
func legendBand(n int) float64 { return min(0.06*float64(n+1), 0.5) }

// streamsRange is the x range of the streams axis: from 0 to a little past
// the most streams, or to twice the only size, so that a single size is a
// point in the middle rather than at the edge.
func streamsRange(series []pacedSeries) (lo, hi float64) {
	least, most := math.Inf(1), 0.0
	for _, s := range series {
		for _, pt := range s.pts {
			least, most = min(least, pt.X), max(most, pt.X)
		}
	}
	if least == most {
		return 0, max(2*most, 1)
	}
	return 0, most * 1.08
}

// delayPercentile is one percentile of the event delay: its panel title and
// how to read it from a summary.
type delayPercentile struct {
	name string
	of   func(*load.Summary) time.Duration
}

var delayPercentiles = []delayPercentile{
	{"p50", func(s *load.Summary) time.Duration { return s.P50 }},
	{"p99", func(s *load.Summary) time.Duration { return s.P99 }},
	{"p99.9", func(s *load.Summary) time.Duration { return s.P999 }},
}

// saveDelayPlots writes the event delay as three panels side by side (p50,
// p99, p99.9), each with the streams on x and one line per target, the
// delay on one log scale shared by the panels.
//
// Small multiples rather than one plot of the nines: the scenario asks how
// relaying holds up as the streams grow, so every size stays in the
// picture (a nines plot holds one size only), each panel reads like the
// memory and CPU plots (same x, same colours), and a shared log axis lets
// the eye compare the percentiles across panels. Grouped bars, targets ×
// percentiles at each size, crowd past two sizes.
func saveDelayPlots(path, scenario string, delays [][]pacedSeries) error {
	bottom, top := math.Inf(1), minPlotMs
	for _, series := range delays {
		for _, s := range series {
			for _, pt := range s.pts {
				bottom, top = min(bottom, pt.Y), max(top, pt.Y)
			}
		}
	}
	lo := max(bottom/2, minPlotMs)
	// Room above the lines for the first panel's legend, in log terms, and
	// a factor of three at least so a labelled tick always shows.
	hi := max(top*3, lo*math.Pow(top/lo, 1/(1-legendBand(len(delays[0])))))
	plots := make([]*plot.Plot, len(delays))
	for i, series := range delays {
		p := plot.New()
		p.Title.Text = "event delay " + delayPercentiles[i].name + ", simulator to client"
		if i == 0 {
			p.Title.Text = scenario + ": " + p.Title.Text
			// A short label: a long one moves this panel's top down
			// (gonum counts its glyph box) and leaves a gap above the legend.
			p.Y.Label.Text = "delay (ms)"
			placeLegend(p)
		}
		p.X.Label.Text = "concurrent streams"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		addSeries(p, series)
		if i > 0 {
			p.Legend = plot.NewLegend() // the first panel's legend serves all three
		}
		p.X.Min, p.X.Max = streamsRange(series)
		p.Y.Min, p.Y.Max = lo, hi
		p.Add(plotter.NewGrid())
		plots[i] = p
	}
	return savePanels(path, plots, 12*vg.Inch, 4*vg.Inch)
}

// savePanels draws plots side by side, aligned, into one PNG at path.
func savePanels(path string, plots []*plot.Plot, w, h vg.Length) (err error) {
	c, err := draw.NewFormattedCanvas(w, h, "png")
	if err != nil {
		return fmt.Errorf("cannot write plot %q: %w", path, err)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(12),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(c))
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write plot %q: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot write plot %q: %w", path, cerr)
		}
	}()
	if _, err := c.WriteTo(f); err != nil {
		return fmt.Errorf("cannot write plot %q: %w", path, err)
	}
	return nil
}
