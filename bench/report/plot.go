package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotPercentiles are the points of each latency line; the labelled ticks
// are the "nines" 50, 90, 99, 99.9 and 99.99.
var (
	plotPercentiles = []float64{50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}
	tickPercentiles = []float64{50, 90, 99, 99.9, 99.99}
)

// minPlotMs keeps latencies positive on the log axis.
const minPlotMs = 0.001

// nines maps a percentile to the x axis: 50 → 0.3, 90 → 1, 99 → 2, 99.9 → 3.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// WritePlots writes the PNG plots of each scenario into dir, which must
// exist. A scenario of requests gets a latency-percentile plot (one line per
// target, percentiles on a nines scale, latency on a log scale) and a
// throughput bar chart (one bar per target); a scenario of paced streams
// gets its memory, CPU and event-delay plots against the number of streams
// (see writePacedPlots). It returns the file names written, by scenario
// index. Scenarios with no measured target get no plots.
func WritePlots(dir string, run *Run) (map[int][]string, error) {
	files := make(map[int][]string)
	for i := range run.Scenarios {
		sc := &run.Scenarios[i]
		base := fmt.Sprintf("%02d-%s", i+1, slug(sc.Name))
		if measured := measuredRows(scenarioRows(run, sc)); len(measured) > 0 {
			lat, tput := base+"-latency.png", base+"-throughput.png"
			if err := savePlot(latencyPlot(sc.Name, measured), filepath.Join(dir, lat)); err != nil {
				return files, err
			}
			if err := savePlot(throughputPlot(sc.Name, measured), filepath.Join(dir, tput)); err != nil {
				return files, err
			}
			files[i] = []string{lat, tput}
		}
		paced, err := writePacedPlots(dir, base, run, sc)
		files[i] = append(files[i], paced...)
		if err != nil {
			return files, err
		}
		if len(files[i]) == 0 {
			delete(files, i)
		}
	}
	return files, nil
}

// measuredRows returns the rows with latencies to plot, in target order.
func measuredRows(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Skipped == "" && r.Merged.LatencyHist != nil && r.Merged.LatencyHist.Count() > 0 {
			out = append(out, r)
		}
	}
	return out
}

func latencyPlot(scenario string, rows []Row) *plot.Plot {
	p := plot.New()
	p.Title.Text = scenario + ": latency by percentile"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	var ticks plot.ConstantTicks
	for _, q := range tickPercentiles {
		ticks = append(ticks, plot.Tick{Value: nines(q), Label: fmt.Sprint(q)})
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = nines(tickPercentiles[0]), nines(tickPercentiles[len(tickPercentiles)-1])
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	top, bottom := minPlotMs, math.Inf(1)
	for i, r := range rows {
		pts := make(plotter.XYs, len(plotPercentiles))
		for j, q := range plotPercentiles {
			ms := float64(r.Merged.LatencyHist.Percentile(q)) / float64(time.Millisecond)
			pts[j] = plotter.XY{X: nines(q), Y: max(ms, minPlotMs)}
			top, bottom = max(top, pts[j].Y), min(bottom, pts[j].Y)
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			panic("BUG: finite points rejected: " + err.Error())
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(r.Target, line, points)
	}
	// Room above the lines for the legend: a quarter of the log range or a
	// factor of three, whichever is more.
	p.Y.Min = max(bottom/1.5, minPlotMs)
	p.Y.Max = max(top*3, top*math.Pow(top/p.Y.Min, 0.25))
	p.Add(plotter.NewGrid())
	return p
}

// logTicks labels a log axis at 1, 2 and 5 times each power of ten, with
// unlabelled ticks at the other integers.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

func throughputPlot(scenario string, rows []Row) *plot.Plot {
	p := plot.New()
	p.Title.Text = scenario + ": throughput"
	p.Y.Label.Text = "req/s (median of rounds)"
	names := make([]string, len(rows))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(rows)), Labels: make([]string, len(rows))}
	top := 0.0
	for i, r := range rows {
		names[i] = r.Target
		bar, err := plotter.NewBarChart(plotter.Values{r.RPS}, vg.Points(40))
		if err != nil {
			panic("BUG: positive bar width rejected: " + err.Error())
		}
		bar.XMin = float64(i)
		bar.Color = plotutil.Color(i)
		bar.LineStyle.Width = 0
		p.Add(bar)
		labels.XYs[i] = plotter.XY{X: float64(i), Y: r.RPS}
		labels.Labels[i] = strconv.FormatFloat(r.RPS, 'f', 0, 64)
		top = max(top, r.RPS)
	}
	if l, err := plotter.NewLabels(labels); err == nil {
		l.Offset = vg.Point{X: -vg.Points(12), Y: vg.Points(3)}
		p.Add(l)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(rows))-0.5
	p.Y.Min, p.Y.Max = 0, max(top*1.15, 1)
	p.Add(plotter.NewGrid())
	return p
}

func savePlot(p *plot.Plot, path string) error {
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("cannot write plot %q: %w", path, err)
	}
	return nil
}

// slug turns a scenario name into a file name part: a-z, 0-9 and '-'.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if s == "" {
		return "scenario"
	}
	return s
}

// ensureDir creates dir if needed.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create report dir %q: %w", dir, err)
	}
	return nil
}
