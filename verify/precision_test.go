package verify

import (
	"fmt"
	"math"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

// TestComplexFallback holds the library to its ssmk_capabilities word for
// complex A: a method declared native must match the complex reference and
// must not return zoh's output; a declared fallback must equal the
// library's own zoh output exactly, and the report says so loudly; an
// undeclared fallback (zoh's output from a method that claims native
// support) fails, naming the method.
func TestComplexFallback(t *testing.T) {
	track(t)
	table := report.Table{Name: "complex A: declared and observed behaviour", Columns: []string{"method", "dtype", "declared", "observed", "max |out − zoh out|"}}
	for _, dt := range ssm.DTypes() {
		s := mamba1.MambaBlock(ssm.ZOH, 2, 8, 64, 8)
		s.Complex = true
		base, err := fitProblem(t.Name(), mamba1.Generate(within(s, dt), 11), dt)
		if err != nil {
			continue
		}
		if dt == ssm.F32 {
			base.RoundToFloat32()
		}
		if !judged(t.Name(), "complex scans (against its zoh) of", ssm.ZOH, dt, true, false) {
			continue
		}
		zoh, err := lib.Scan(base, dt)
		if err != nil {
			t.Errorf("zoh %v complex: declared supported, but %v", dt, err)
			continue
		}
		for _, m := range ssm.Methods() {
			caps := lib.Capabilities(m, dt, true)
			declared := "native"
			switch {
			case !caps.Supported():
				declared = "unsupported"
			case caps.ComplexZOHFallback():
				declared = "zoh fallback"
			}
			if declared == "unsupported" {
				judged(t.Name(), "complex scans of", m, dt, true, false)
				table.Rows = append(table.Rows, []string{m.String(), dt.String(), declared, "—", "—"})
				continue
			}
			p := base.Clone()
			p.Method = m
			got, err := lib.Scan(p, dt)
			if err != nil {
				t.Errorf("%v %v complex: declared supported, but %v", m, dt, err)
				continue
			}
			diff := 0.0
			for i := range got.Out {
				diff = math.Max(diff, math.Abs(got.Out[i]-zoh.Out[i]))
			}
			observed := "native"
			if diff == 0 {
				observed = "zoh output"
			}
			table.Rows = append(table.Rows, []string{m.String(), dt.String(), declared, observed, fmt.Sprintf("%.3g", diff)})
			switch {
			case declared == "zoh fallback":
				t.Logf("DECLARED FALLBACK: %v %v with complex A computes zoh", m, dt)
				if diff != 0 {
					t.Errorf("%v %v: declares a complex zoh fallback but its output differs from its zoh output by %.3g", m, dt, diff)
				}
			case m != ssm.ZOH && diff == 0:
				t.Errorf("UNDECLARED FALLBACK: %v %v claims native complex support but returns zoh's output", m, dt)
				rep.Add("TestComplexFallback", m, dt, true, math.Inf(1), math.Inf(1), false, "undeclared complex fallback to zoh")
			default:
				c, err := judge.CompareScan(p, got, dt, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				rep.Add("TestComplexFallback", m, dt, true, c.Worst.Ratio, c.Worst.ULP, c.Passed(dt), c.Worst.String())
				if !c.Passed(dt) {
					t.Errorf("%v %v complex (declared native): worst %s; threshold %g%s", m, dt, c.Worst, judge.Threshold(dt), diagnosis(t.Name(), p, dt))
				}
			}
		}
	}
	logTable(t, withBlank(table))
	rep.AddTable(table)
}

// withBlank appends an empty last column for logTable (which leaves the
// last column, a free-text one in other tables, out of the log).
func withBlank(t report.Table) report.Table {
	out := report.Table{Name: t.Name, Columns: append(append([]string(nil), t.Columns...), "")}
	for _, r := range t.Rows {
		out.Rows = append(out.Rows, append(append([]string(nil), r...), ""))
	}
	return out
}

// errorStats compares values with a reference: max absolute error, max and
// mean relative error over the elements whose reference exceeds 1e-3 of the
// largest (relative error means nothing near zero), and Pearson's
// correlation.
func errorStats(got, want []float64) (maxAbs, maxRel, meanRel, corr float64) {
	var big float64
	for _, w := range want {
		big = math.Max(big, math.Abs(w))
	}
	var n int
	var sg, sw, sgg, sww, sgw float64
	for i := range want {
		d := math.Abs(got[i] - want[i])
		maxAbs = math.Max(maxAbs, d)
		if math.Abs(want[i]) > 1e-3*big {
			rel := d / math.Abs(want[i])
			maxRel = math.Max(maxRel, rel)
			meanRel += rel
			n++
		}
		sg, sw, sgg, sww, sgw = sg+got[i], sw+want[i], sgg+got[i]*got[i], sww+want[i]*want[i], sgw+got[i]*want[i]
	}
	if n > 0 {
		meanRel /= float64(n)
	}
	k := float64(len(want))
	corr = (k*sgw - sg*sw) / math.Sqrt((k*sgg-sg*sg)*(k*sww-sw*sw))
	return
}

// TestErrorByDType: per method, real and complex A, the kernel in every
// dtype it declares — fp64, fp32, and the 16-bit input types bf16 and
// fp16 — on one Mamba-block problem (2×16×256×16), each on the problem's
// inputs rounded to what that dtype reads (ssm.Problem.RoundTo), judged
// against the float64 reference of those inputs: max abs, max and mean
// relative error, correlation and the max scaled ratio, which must pass;
// and end to end, against the float64 reference of the unrounded inputs:
// what a user loses by running the method in that dtype, input rounding
// included. For fp32, the float32 reference mode's ratio beside it (the
// problem's natural float32 error) says whether the kernel's error is the
// natural one or worse.
func TestErrorByDType(t *testing.T) {
	track(t)
	table := report.Table{Name: "error by dtype against the float64 reference (Mamba block 2×16×256×16)",
		Columns: []string{"method", "A", "dtype", "max abs err", "max rel err", "mean rel err", "1 − corr", "max ratio",
			"end-to-end max rel", "end-to-end mean rel", "f32-mode max ratio"}}
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			s := mamba1.MambaBlock(m, 2, 16, 256, 16)
			s.Complex = isComplex
			exact, err := fitProblem(t.Name(), mamba1.Generate(within(s, ssm.F32), 5), ssm.F32)
			if err != nil {
				continue
			}
			exactRef, err := mamba1.Scan(exact, ssm.Float64)
			if err != nil {
				t.Fatal(err)
			}
			for _, dt := range []ssm.DType{ssm.F64, ssm.F32, ssm.BF16, ssm.F16} {
				if isComplex && fallback(m, dt) {
					continue
				}
				if !judged(t.Name(), "scans of", m, dt, isComplex, false) {
					continue
				}
				p := exact.Clone()
				p.RoundTo(dt)
				ref, err := mamba1.Scan(p, ssm.Float64)
				if err != nil {
					t.Fatal(err)
				}
				sc, err := mamba1.ErrorScaleIn(p, dt.Precision())
				if err != nil {
					t.Fatal(err)
				}
				got, err := lib.Scan(p, dt)
				if err != nil {
					t.Errorf("%v %v %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), err)
					continue
				}
				c, err := judge.CompareScan(p, got, dt, ref, sc)
				if err != nil {
					t.Fatal(err)
				}
				rep.Add("TestErrorByDType", m, dt, isComplex, c.Worst.Ratio, c.Worst.ULP, c.Passed(dt), c.Worst.String())
				maxAbs, maxRel, meanRel, corr := errorStats(got.Out, ref.Out)
				_, e2eMax, e2eMean, _ := errorStats(got.Out, exactRef.Out)
				mode := "—"
				if dt == ssm.F32 {
					f32, err := mamba1.Scan(p, ssm.Float32)
					if err != nil {
						t.Fatal(err)
					}
					modeCmp, err := judge.CompareScan(p, f32, ssm.F32, ref, sc)
					if err != nil {
						t.Fatal(err)
					}
					mode = fmt.Sprintf("%.3g", modeCmp.Worst.Ratio)
				}
				table.Rows = append(table.Rows, []string{m.String(), ssm.AKind(isComplex), dt.String(),
					fmt.Sprintf("%.3g", maxAbs), fmt.Sprintf("%.3g", maxRel), fmt.Sprintf("%.3g", meanRel),
					fmt.Sprintf("%.3g", 1-corr), fmt.Sprintf("%.3g", c.Worst.Ratio),
					fmt.Sprintf("%.3g", e2eMax), fmt.Sprintf("%.3g", e2eMean), mode})
				if !c.Passed(dt) {
					t.Errorf("%v %s %v: worst %s; threshold %g%s", m, ssm.AKind(isComplex), dt, c.Worst, judge.Threshold(dt), diagnosis(t.Name(), p, dt))
				}
			}
		}
	}
	logTable(t, withBlank(table))
	rep.AddTable(table)
}
