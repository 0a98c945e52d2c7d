package judge

import (
	"fmt"
	"math"
	"sort"

	"ssmverify/contain"
	"ssmverify/mamba1"
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
	// FirstNonFinite is the first of them (Name, Index, Got, Want; its
	// Ratio and ULP unset), so that a failure can name where it is.
	FirstNonFinite GradWorst
	// Missing names gradients the reference has and the kernel did not
	// return (or returned with another length).
	Missing []string
	// Unscaled names gradients whose error scale does not match the
	// reference's length: the caller's inconsistency (an error scale of
	// another problem), not the kernel's, so they are left unjudged and
	// the comparison does not pass.
	Unscaled []string
	// Internal is a panic of the comparison itself (package contain): a
	// bug of the suite; the comparison does not pass.
	Internal error
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
	if c.NonFinite > 0 || len(c.Missing) > 0 || len(c.Unscaled) > 0 || c.Internal != nil {
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
// (mamba1.GradErrorScale): ratio |kernel − reference| / (u·S + η·T)
// per element, complex elements by the modulus of their error. For a
// 16-bit dtype the input-typed gradients (ssm.InputTyped: du, ddelta, dz,
// variable dB and dC) carry their one rounding to the input type beyond
// the float32 model, allowed as OutputRatio allows the output's; an
// element of fp16 that a correct float32 value may carry past 65520 may be
// ±Inf.
func CompareGrads(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, ref *ssm.Grads, sc *mamba1.GradScale) (c GradComparison) {
	defer func() {
		if e := contain.Recovered(recover(), "judge.CompareGrads", p.Shape); e != nil {
			c = GradComparison{Internal: e}
		}
	}()
	if got == nil {
		got = &ssm.Grads{} // no gradients: every one missing
	}
	return compareGrads(p, got, dt, ref, sc)
}

func compareGrads(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, ref *ssm.Grads, sc *mamba1.GradScale) GradComparison {
	var c GradComparison
	var fields []gradField
	fields, c.Missing, c.Unscaled = gradFields(p, got, ref, sc, dt)
	for _, f := range fields {
		w := GradWorst{Name: f.name}
		for i := 0; i < len(f.got); i += f.step {
			diff, mag, r := f.elem(i, dt)
			c.Elements++
			if math.IsNaN(diff) || math.IsInf(diff, 0) {
				if !math.IsNaN(mag) && !math.IsInf(mag, 0) {
					if c.NonFinite == 0 {
						c.FirstNonFinite = GradWorst{Name: f.name, Index: i, Got: f.got[i], Want: f.want[i]}
					}
					c.NonFinite++
				}
				continue
			}
			if i == 0 || r > w.Ratio {
				w.Ratio, w.Index, w.Got, w.Want = r, i, f.got[i], f.want[i]
			}
			w.ULP = math.Max(w.ULP, ULPsOf(diff, mag, f.stored))
		}
		c.Grads = append(c.Grads, w)
	}
	return c
}

// EachGradRatio calls f with the scaled error ratio of every element of
// every gradient that ref holds and got holds at the same length, as
// CompareGrads judges it: e is the element's index in its array (a complex
// element counts once), r is NaN where the kernel's difference is not
// finite.
func EachGradRatio(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, ref *ssm.Grads, sc *mamba1.GradScale, f func(name string, e int, r float64)) {
	fields, _, _ := gradFields(p, got, ref, sc, dt)
	for _, g := range fields {
		for i := 0; i < len(g.got); i += g.step {
			_, _, r := g.elem(i, dt)
			f(g.name, i/g.step, r)
		}
	}
}

// gradField is one gradient as CompareGrads compares it: the kernel's and
// the reference's arrays, the scale and underflow allowance of each element,
// the words per element (2 for a complex array) and the type its elements
// are stored in (the 16-bit input type for an input-typed gradient of a
// 16-bit dtype, else the arithmetic's).
type gradField struct {
	name                   string
	step                   int
	stored                 ssm.DType
	got, want, scale, tiny []float64
}

// gradFields pairs every gradient of ref with got's, in ref's order, and
// names those got lacks or holds at another length, and those whose scale
// (sc) is not of ref's length.
func gradFields(p *ssm.Problem, got, ref *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType) (fields []gradField, missing, unscaled []string) {
	gotBy, scBy, tinyBy := got.ByName(), sc.Scale.ByName(), sc.Tiny.ByName()
	complexArr := map[string]bool{"dA": p.Complex, "dB": p.Complex, "dC": p.Complex, "dinitial_state": p.Complex}
	for _, f := range ref.Fields() {
		g := gotBy[f.Name]
		if len(g) != len(f.Values) {
			missing = append(missing, f.Name)
			continue
		}
		if len(scBy[f.Name]) != len(f.Values) || len(tinyBy[f.Name]) != len(f.Values) {
			unscaled = append(unscaled, f.Name)
			continue
		}
		step := 1
		if complexArr[f.Name] {
			step = 2
		}
		stored := dt.Weight()
		if dt.Narrow() && ssm.InputTyped(p, f.Name) {
			stored = dt
		}
		fields = append(fields, gradField{f.Name, step, stored, g, f.Values, scBy[f.Name], tinyBy[f.Name]})
	}
	return fields, missing, unscaled
}

// elem is element i's (its real word's, for a complex array) difference
// from the reference (modulus for complex), the reference's magnitude, and
// the scaled ratio (NaN where the difference is not finite) for a kernel
// of dtype dt.
func (f gradField) elem(i int, dt ssm.DType) (diff, mag, r float64) {
	err := func(k int) float64 {
		if f.stored.Narrow() && outputMayOverflow(f.got[k], f.want[k], f.scale[i], f.tiny[i], f.stored) {
			return 0 // a correct float32 value may round to ±Inf here
		}
		return f.got[k] - f.want[k]
	}
	diff, mag = math.Abs(err(i)), math.Abs(f.want[i])
	if f.step == 2 {
		diff, mag = math.Hypot(err(i), err(i+1)), math.Hypot(f.want[i], f.want[i+1])
	}
	if math.IsNaN(diff) || math.IsInf(diff, 0) {
		return diff, mag, math.NaN()
	}
	if !f.stored.Narrow() {
		return diff, mag, mamba1.Ratio(diff, f.scale[i], f.tiny[i], dt.Precision())
	}
	// each stored word rounded once (OutputRatio's allowance, per word)
	return diff, mag, roundedRatio(diff, mag, f.scale[i], f.tiny[i], f.stored, f.step)
}
