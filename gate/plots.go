package gate

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"ssmverify/report"
	"ssmverify/ssm"
)

// WritePlots draws the report's pictures into dir and returns their file
// names: convergence.png (error against Δ per method with the expected
// slopes), ratios-fp32.png (the distribution of the scaled error ratio per
// method in float32, with the threshold) and throughput.png (Check7's
// throughput per method with 95% whiskers and the memory-bandwidth
// ceiling). A picture whose data did not run is left out.
func WritePlots(dir string, vr *report.Report, c7 *report.Check7) ([]string, error) {
	var files []string
	if vr != nil && vr.Convergence != nil && len(vr.Convergence.Deltas) > 0 {
		if err := plotConvergence(filepath.Join(dir, "convergence.png"), vr.Convergence); err != nil {
			return files, err
		}
		files = append(files, "convergence.png")
	}
	if ratios := verifyRatios(vr, "fp32"); len(ratios) > 0 {
		if err := plotRatios(filepath.Join(dir, "ratios-fp32.png"), ratios); err != nil {
			return files, err
		}
		files = append(files, "ratios-fp32.png")
	}
	if c7 != nil {
		if err := plotThroughput(filepath.Join(dir, "throughput.png"), c7); err != nil {
			return files, err
		}
		files = append(files, "throughput.png")
	}
	return files, nil
}

func plotConvergence(path string, c *report.Convergence) error {
	p := plot.New()
	p.Title.Text = "Global error at T = 2 against the step Δ (library scan, fp64)"
	p.X.Label.Text = "Δ"
	p.Y.Label.Text = "|h(T) − exact|"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: 1}, plot.LogTicks{Prec: 1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	for i, m := range ssm.Methods() {
		pts := make(plotter.XYs, len(c.Deltas))
		for k, d := range c.Deltas {
			pts[k].X, pts[k].Y = d, math.Max(c.Errors[m.String()][k], 1e-17) // foh: exact, rounding only
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, scatter.Color = plotutil.Color(i), plotutil.Color(i)
		scatter.Shape = plotutil.Shape(i)
		p.Add(line, scatter)
		p.Legend.Add(fmt.Sprintf("%v: order %.2f (expected %s)", m, c.Slopes[m.String()], orderText(m)), line, scatter)
		if want := float64(m.Order()); want > 0 {
			// The expected slope through the method's largest-Δ point.
			x0, y0 := pts[0].X, pts[0].Y
			ref := plotter.NewFunction(func(x float64) float64 { return y0 * math.Pow(x/x0, want) })
			ref.Color = plotutil.Color(i)
			ref.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			ref.XMin, ref.XMax = c.Deltas[len(c.Deltas)-1], x0
			p.Add(ref)
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 5*vg.Inch, path)
}

func orderText(m ssm.Method) string {
	if m.Order() == 0 {
		return "exact"
	}
	return fmt.Sprint(m.Order())
}

// verifyRatios returns every scaled error ratio of the verify report for
// one dtype, per method (real and complex A together).
func verifyRatios(vr *report.Report, dtype string) map[string][]float64 {
	if vr == nil {
		return nil
	}
	out := map[string][]float64{}
	for _, c := range vr.Cells {
		if c.DType != dtype {
			continue
		}
		for _, r := range c.Ratios {
			// A ratio of ∞ or NaN (a non-finite kernel value) is drawn at the
			// top of the axis: the plot is read for its shape, report.json
			// keeps the value.
			v := float64(r)
			if math.IsNaN(v) || math.IsInf(v, 1) {
				v = math.MaxFloat64
			}
			out[c.Method] = append(out[c.Method], v)
		}
	}
	return out
}

func methodOrder(names []string) []string {
	rank := map[string]int{}
	for i, m := range ssm.Methods() {
		rank[m.String()] = i
	}
	sort.Slice(names, func(i, j int) bool { return rank[names[i]] < rank[names[j]] })
	return names
}

func plotRatios(path string, ratios map[string][]float64) error {
	p := plot.New()
	p.Title.Text = "Scaled error ratio per method, fp32 (threshold 4; 0s drawn at 1e-6)"
	p.Y.Label.Text = "|kernel − reference| / (u·S + η·T)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: 1}
	var names []string
	for m := range ratios {
		names = append(names, m)
	}
	names = methodOrder(names)
	for i, m := range names {
		vals := make(plotter.Values, len(ratios[m]))
		for k, v := range ratios[m] {
			vals[k] = math.Min(math.Max(v, 1e-6), 1e12) // zeros and infinities onto the axis
		}
		box, err := plotter.NewBoxPlot(vg.Points(28), float64(i), vals)
		if err != nil {
			return err
		}
		box.FillColor = plotutil.Color(i)
		p.Add(box)
	}
	p.NominalX(names...)
	top := 10.0 // the threshold stays in view
	for _, m := range names {
		for _, v := range ratios[m] {
			top = math.Max(top, 3*math.Min(v, 1e12))
		}
	}
	p.Y.Max = top
	thr := plotter.NewFunction(func(float64) float64 { return 4 })
	thr.Color = plotutil.Color(0)
	thr.Width = vg.Points(1.5)
	thr.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(thr)
	p.Legend.Add("threshold 4", thr)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// whiskers are y error bars for the throughput points.
type whiskers struct {
	plotter.XYs
	plotter.YErrors
}

func plotThroughput(path string, c *report.Check7) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Check7 throughput per method (%s)", c.Config)
	p.Y.Label.Text = "GB/s moved by the scan (log)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: 1}
	var names []string
	for _, m := range c.Methods {
		names = append(names, m.Method)
	}
	names = methodOrder(names)
	byName := map[string]int{}
	for i, m := range c.Methods {
		byName[m.Method] = i
	}
	var w whiskers
	for i, n := range names {
		m := c.Methods[byName[n]]
		gbps := func(us float64) float64 { return float64(c.BytesPerScan) / (us * 1e3) }
		mid := gbps(m.MedianUS)
		// A slower time is a lower throughput: the CI's high time is the low whisker.
		w.XYs = append(w.XYs, plotter.XY{X: float64(i), Y: mid})
		w.YErrors = append(w.YErrors, struct{ Low, High float64 }{mid - gbps(m.CIHighUS), gbps(m.CILowUS) - mid})
	}
	pts, err := plotter.NewScatter(w.XYs)
	if err != nil {
		return err
	}
	pts.Shape = draw.CrossGlyph{}
	pts.Radius = vg.Points(3)
	bars, err := plotter.NewYErrorBars(w)
	if err != nil {
		return err
	}
	bars.CapWidth = vg.Points(14)
	bars.LineStyle.Width = vg.Points(1.5)
	ceiling := plotter.NewFunction(func(float64) float64 { return c.CopyBandwidthGBps })
	ceiling.Width = vg.Points(1.5)
	ceiling.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(pts, bars, ceiling, plotter.NewGrid())
	p.Legend.Add("median with its 95% CI", pts)
	p.Legend.Add(fmt.Sprintf("copy bandwidth %.0f GB/s (ceiling)", c.CopyBandwidthGBps), ceiling)
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(names...)
	lo, hi := math.Inf(1), c.CopyBandwidthGBps
	for k, xy := range w.XYs {
		lo = math.Min(lo, xy.Y-w.YErrors[k].Low)
	}
	p.Y.Min, p.Y.Max = lo/2, hi*3
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
