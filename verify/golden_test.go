package verify

import (
	"fmt"
	"strings"
	"testing"

	"ssmverify/golden"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestGolden: the library under test matches every golden case (golden/)
// within the thresholds: in fp64 against the stored float64 outputs, in fp32
// with the inputs rounded to float32 and the reference recomputed on them;
// a mixed-precision case (fp16, bf16) in its own dtype alone, against its
// stored outputs (its inputs are already of its type). The golden files'
// checksums are verified on load.
func TestGolden(t *testing.T) {
	track(t)
	man, err := golden.Load("../golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range man.Cases {
		p, want, err := c.Problem("../golden")
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range caseDTypes(t, c) {
			if c.Complex && fallback(p.Method, dt) {
				continue
			}
			if !judged(t.Name(), "golden case "+c.Name+":", p.Method, dt, p.Complex, false) {
				continue
			}
			if !goldenTaken(t.Name(), c.Name, p, dt) {
				continue
			}
			q, ref := p, want
			if dt == ssm.F32 {
				q = p.Clone()
				q.RoundToFloat32()
				ref = nil
			}
			got, err := lib.Scan(q, dt)
			if err != nil {
				t.Errorf("%s %v: declared supported, but %v", c.Name, dt, err)
				continue
			}
			cmp, err := judge.CompareScan(q, got, dt, ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			rep.Add("TestGolden", p.Method, dt, p.Complex, cmp.Worst.Ratio, cmp.Worst.ULP, cmp.Passed(dt), c.Name+": "+cmp.Worst.String())
			if !cmp.Passed(dt) {
				t.Errorf("%s %v: worst %s; threshold %g%s", c.Name, dt, cmp.Worst, judge.Threshold(dt), diagnosis(t.Name(), q, dt))
			}
		}
	}
}

// goldenTaken reports whether the library takes golden case name (problem
// p) in dt as it stands, recording it under test as not supported if not:
// a case it takes only fitted (D dropped, heads shared) is another problem
// than the one its outputs and gradients are of.
func goldenTaken(test, name string, p *ssm.Problem, dt ssm.DType) bool {
	_, notes, err := featuresOf(p.Method, dt, p.Complex).Fit(p)
	if err == nil && len(notes) == 0 {
		return true
	}
	why := fmt.Sprint(err)
	if err == nil {
		why = "it would need " + strings.Join(notes, "; ")
	}
	rep.Unsupported(test, fmt.Sprintf("golden case %s %v: outside the declared features (%s)", name, dt, why))
	return false
}

// TestGoldenBackward: the library's backward pass on every golden case that
// holds one: in fp64 against the stored exact gradients (golden.ExactGrad),
// in fp32 with the inputs and cotangent rounded to float32 and the
// reference's gradients recomputed on them, and a 16-bit case in its type
// (its inputs and dout are of it) against its exact gradients, under the
// backward's error model (mamba1.GradErrorScale).
func TestGoldenBackward(t *testing.T) {
	track(t)
	man, err := golden.Load("../golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range man.Cases {
		if !c.HasGrads() {
			continue
		}
		p, _, err := c.Problem("../golden")
		if err != nil {
			t.Fatal(err)
		}
		ct, exact, err := c.Grads("../golden")
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range caseDTypes(t, c) {
			caps := lib.Capabilities(p.Method, dt, p.Complex)
			if !caps.Backward() || !lib.HasBackward() || (p.Complex && caps.ComplexZOHFallback()) {
				rep.Unsupported(t.Name(), fmt.Sprintf("the backward of golden case %s %v (declared unsupported)", c.Name, dt))
				continue
			}
			if !goldenTaken(t.Name(), c.Name, p, dt) {
				continue
			}
			if ct.LastState != nil && !caps.BackwardStateGrads() {
				rep.Unsupported(t.Name(), fmt.Sprintf("the backward of golden case %s %v with dlast_state (declared outputs only)", c.Name, dt))
				continue
			}
			if dt == ssm.F64 || dt.Narrow() {
				got, err := lib.Backward(p, ct, dt, false)
				if err != nil {
					t.Errorf("%s %v: declared supported, but %v", c.Name, dt, err)
					continue
				}
				sc, err := mamba1.GradErrorScale(p, ct, false, dt.Precision())
				if err != nil {
					t.Fatal(err)
				}
				cmp := judge.CompareGrads(p, got, dt, exact, sc)
				rep.AddBackward(t.Name(), p.Method, dt, p.Complex, cmp)
				if !cmp.Passed(dt) {
					t.Errorf("%s %v: %s", c.Name, dt, gradFailure(cmp, dt))
				}
				continue
			}
			cmp, _, _, err := backwardChecked(t.Name(), p, ct, dt, false)
			if err != nil {
				t.Errorf("%s %v: declared supported, but %v", c.Name, dt, err)
				continue
			}
			if !cmp.Passed(dt) {
				t.Errorf("%s %v: %s", c.Name, dt, gradFailure(cmp, dt))
			}
		}
	}
}

// caseDTypes are the dtypes a golden case is run in: F32 and F64, or a
// 16-bit case's own type (its inputs are of it).
func caseDTypes(t *testing.T, c golden.Case) []ssm.DType {
	t.Helper()
	if !c.Narrow() {
		return ssm.DTypes()
	}
	dt, err := c.Type()
	if err != nil {
		t.Fatal(err)
	}
	return []ssm.DType{dt}
}
