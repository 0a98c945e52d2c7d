package judge

import (
	"fmt"
	"math"
	"sort"

	"ssmverify/reference"
	"ssmverify/ssm"
)

// GradWorst is the worst element of one gradient array.
type GradWorst struct {
	Name      string  // "du", "dA", … (ssm.Grads.Fields)
	Ratio     float64 // scaled error ratio, as for the forward
	ULP       float64 // the largest error in ulps of the dtype at the reference's magnitude (modulus for complex)
	Index     int     // flat index into the array (the real word of a complex element)
	Got, Want float64
}

func (w GradWorst) String() string {
	return fmt.Sprintf("%s[%d]: kernel %.9g, reference %.17g, ratio %.3g, %.3g ulp", w.Name, w.Index, w.Got, w.Want, w.Ratio, w.ULP)
}

// GradComparison is the result of comparing a kernel's backward pass with
// the reference: the worst element of every gradient, in ABI order.
type GradComparison struct {
	Grads    []GradWorst
	Elements int
	// NonFinite counts NaN or ±Inf kernel gradients where the reference is
	// finite, and finite ones where it is not: always a failure.
	NonFinite int
	// Missing names gradients the reference has and the kernel did not
	// return (or returned with another length).
	Missing []string
}

// Worst is the gradient whose worst element has the largest ratio.
func (c GradComparison) Worst() GradWorst {
	var w GradWorst
	for i, g := range c.Grads {
		if i == 0 || g.Ratio > w.Ratio || math.IsNaN(g.Ratio) {
			w = g
		}
	}
	return w
}

// Passed reports whether every gradient is present, finite and within the
// threshold.
func (c GradComparison) Passed(dt ssm.DType) bool {
	if c.NonFinite > 0 || len(c.Missing) > 0 {
		return false
	}
	for _, g := range c.Grads {
		if !(g.Ratio <= Threshold(dt)) {
			return false
		}
	}
	return true
}

// Failing lists the gradients beyond the threshold, worst first.
func (c GradComparison) Failing(dt ssm.DType) []GradWorst {
	var out []GradWorst
	for _, g := range c.Grads {
		if !(g.Ratio <= Threshold(dt)) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ratio > out[j].Ratio })
	return out
}

// CompareGrads compares a kernel's gradients (got, in dtype dt) with the
// float64 reference gradients and their error scale
// (reference.GradErrorScale): ratio |kernel − reference| / (u·S + η·T)
// per element, complex elements by the modulus of their error.
func CompareGrads(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, ref *ssm.Grads, sc *reference.GradScale) GradComparison {
	prec := dt.Precision()
	var c GradComparison
	gotBy := map[string][]float64{}
	for _, f := range got.Fields() {
		gotBy[f.Name] = f.Values
	}
	scBy, tinyBy := map[string][]float64{}, map[string][]float64{}
	for _, f := range sc.Scale.Fields() {
		scBy[f.Name] = f.Values
	}
	for _, f := range sc.Tiny.Fields() {
		tinyBy[f.Name] = f.Values
	}
	complexArr := map[string]bool{"dA": p.Complex, "dB": p.Complex, "dC": p.Complex, "dinitial_state": p.Complex}
	for _, f := range ref.Fields() {
		g := gotBy[f.Name]
		if len(g) != len(f.Values) {
			c.Missing = append(c.Missing, f.Name)
			continue
		}
		w := GradWorst{Name: f.Name}
		step := 1
		if complexArr[f.Name] {
			step = 2
		}
		for i := 0; i < len(g); i += step {
			want, have := f.Values[i], g[i]
			diff := math.Abs(have - want)
			mag := math.Abs(want)
			if step == 2 {
				diff = math.Hypot(have-want, g[i+1]-f.Values[i+1])
				mag = math.Hypot(want, f.Values[i+1])
			}
			c.Elements++
			finiteRef := !math.IsNaN(mag) && !math.IsInf(mag, 0)
			if math.IsNaN(diff) || math.IsInf(diff, 0) {
				if finiteRef {
					c.NonFinite++
				}
				continue
			}
			r := reference.Ratio(diff, scBy[f.Name][i], tinyBy[f.Name][i], prec)
			if i == 0 || r > w.Ratio {
				w.Ratio, w.Index, w.Got, w.Want = r, i, g[i], f.Values[i]
			}
			w.ULP = math.Max(w.ULP, ULPsOf(diff, mag, dt))
		}
		c.Grads = append(c.Grads, w)
	}
	return c
}
