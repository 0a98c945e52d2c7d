package verify

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The mixed-precision dtypes (ABI extension SSMK_CAP_NARROW_INPUTS): fp16
// and bf16 inputs with float32 weights and state. Each test scans problems
// whose inputs are rounded to the 16-bit type (ssm.Problem.RoundTo), so
// that the float64 reference runs on exactly what the kernel reads, and
// judges the output with judge.OutputRatio: float32 arithmetic plus the
// output's one rounding to nearest.

// TestNarrowAccuracy: random shapes, options and inputs (realistic and
// stress) in fp16 and bf16, every declared method and kind of A, against
// the float64 reference on the rounded inputs.
func TestNarrowAccuracy(t *testing.T) {
	track(t)
	for _, d := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
		t.Run(d.String(), func(t *testing.T) {
			test := "TestNarrowAccuracy/" + d.String()
			accuracyProperty(t, test, d, declaredCombos(test, ssm.NarrowDTypes()))
		})
	}
}

// TestNarrowEveryCombination: one small fixed case of every declared
// method × 16-bit type × real/complex A × option set, the last with an
// initial state, so that no combination depends on what rapid draws.
func TestNarrowEveryCombination(t *testing.T) {
	track(t)
	type feat struct{ varB, varC, softplus, D, z, bias, h0 bool }
	feats := []feat{{}, {true, true, true, true, true, true, false}, {varB: true}, {softplus: true, bias: true}, {D: true, z: true}, {varB: true, varC: true, softplus: true, h0: true}}
	for _, cb := range declaredCombos(t.Name(), ssm.NarrowDTypes()) {
		for fi, f := range feats {
			if f.h0 && !lib.Capabilities(cb.m, cb.dt, cb.isComplex).InitialState() {
				continue
			}
			for _, d := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
				s := mamba1.Spec{Batch: 2, Dim: 6, Seqlen: 45, Dstate: 7, Groups: 3, Method: cb.m, Complex: cb.isComplex,
					VariableB: f.varB, VariableC: f.varC, Softplus: f.softplus, HasD: f.D, HasZ: f.z, HasBias: f.bias, Dist: d}
				p := mamba1.Generate(within(s, cb.dt), uint64(fi+1))
				if f.h0 {
					mamba1.SetInitialState(p, uint64(fi+1))
				}
				cmp, p, err := scanChecked(t.Name(), p, cb.dt)
				if errors.Is(err, errNotTaken) {
					continue
				}
				if err != nil {
					t.Errorf("%v %v: declared supported, but %v", s, cb.dt, err)
					continue
				}
				if !cmp.Passed(cb.dt) {
					t.Errorf("%v %v seed %d: worst %s; threshold %g%s", s, cb.dt, fi+1, cmp.Worst, judge.Threshold(cb.dt), diagnosis(t.Name(), p, cb.dt))
				}
			}
		}
	}
}

// handProblem is one channel with one state: Δ, a, B and C constant, u
// given per step.
func handProblem(m ssm.Method, u []float64, delta, a, b, c float64) *ssm.Problem {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: len(u), Dstate: 1, Groups: 1, Method: m,
		U: u, Delta: make([]float64, len(u)), A: []float64{a}, B: []float64{b}, C: []float64{c}}
	for i := range p.Delta {
		p.Delta[i] = delta
	}
	return p
}

// TestNarrowSpecialValues: the cases where a 16-bit type's limits show,
// in the manner of the standard library's tables of special values:
//   - fp16's overflow: outputs that cross 65520 must be ±Inf, those below
//     it finite (bf16, with float32's range, stays finite);
//   - fp16's subnormals: outputs between 2⁻²⁴ and 2⁻¹⁴ keep their value;
//   - a long accumulation: 4096 steps of a slowly decaying state (e^{−1/1000}),
//     whose sum needs the float32 state: a state kept in 16 bits drifts;
//   - large |Δ·a| (−20 to −80): e^x's relative error is |x| times that of
//     x, so a kernel that rounds Δ·a to 16 bits before the exponential errs
//     by up to 2⁻⁹·80 = 16% in Ā;
//   - Δ after softplus: δ = −6 … 6 where softplus(δ) is not a 16-bit value:
//     a kernel that stores the step in its input type rounds it.
func TestNarrowSpecialValues(t *testing.T) {
	track(t)
	steps := func(n int, f func(i int) float64) []float64 {
		u := make([]float64, n)
		for i := range u {
			u[i] = f(i)
		}
		return u
	}
	cases := []struct {
		name string
		p    func(m ssm.Method) *ssm.Problem
	}{
		{"fp16 overflow", func(m ssm.Method) *ssm.Problem {
			// y_t = Σ u up to t (a = 0: Ā = 1, g = 1): 30000, 60000, 90000, 120000
			return handProblem(m, []float64{30000, 30000, 30000, 30000, -1e5}, 1, 0, 1, 1)
		}},
		{"subnormal outputs", func(m ssm.Method) *ssm.Problem {
			return handProblem(m, steps(16, func(i int) float64 { return float64(i+1) * ssm.Float16MinSub }), 1, -0.5, 1.25, 0.75)
		}},
		{"long accumulation", func(m ssm.Method) *ssm.Problem {
			return handProblem(m, steps(4096, func(i int) float64 { return 1 + 0.5*math.Sin(float64(i)) }), 1, -1e-3, 1, 1)
		}},
		{"large |x|", func(m ssm.Method) *ssm.Problem {
			p := handProblem(m, steps(64, func(i int) float64 { return 1 }), 1, -1, 1, 1)
			for i := range p.Delta {
				p.Delta[i] = 20 + float64(i%8)*8 // x = −20 … −76
			}
			return p
		}},
		{"softplus step", func(m ssm.Method) *ssm.Problem {
			p := handProblem(m, steps(64, func(i int) float64 { return 1 }), 0, -0.7, 1, 1)
			for i := range p.Delta {
				p.Delta[i] = -6 + 12*float64(i)/63
			}
			p.Softplus = true
			return p
		}},
	}
	for _, cb := range declaredCombos(t.Name(), ssm.NarrowDTypes()) {
		if cb.isComplex {
			continue
		}
		for _, c := range cases {
			p := c.p(cb.m)
			if cb.m == ssm.Bilinear && c.name == "large |x|" {
				continue // bilinear's Ā = (1 + x/2)/(1 − x/2) is not small there: the case tests e^x
			}
			cmp, q, err := scanChecked(t.Name(), p, cb.dt)
			if errors.Is(err, errNotTaken) {
				continue
			}
			if err != nil {
				t.Errorf("%s %v %v: declared supported, but %v", c.name, cb.m, cb.dt, err)
				continue
			}
			if !cmp.Passed(cb.dt) {
				t.Errorf("%s %v %v: worst %s (%d non-finite, %d unmatched)%s", c.name, cb.m, cb.dt, cmp.Worst, cmp.NonFinite, cmp.Unmatched,
					diagnosis(t.Name(), q, cb.dt))
			}
		}
	}
}

// TestNarrowOverflowIsJudged: the overflow case above has outputs that a
// correct fp16 kernel must return as ±Inf; a kernel that saturates them at
// 65504 fails (the judge is not blind to fp16's range).
func TestNarrowOverflowIsJudged(t *testing.T) {
	p := handProblem(ssm.ZOH, []float64{30000, 30000, 30000, 30000, -1e5}, 1, 0, 1, 1)
	good := &ssm.Output{Out: []float64{30000, 60000, math.Inf(1), math.Inf(1), 20000}, LastState: []float64{20000}}
	saturated := &ssm.Output{Out: []float64{30000, 60000, ssm.Float16Max, ssm.Float16Max, 20000}, LastState: []float64{20000}}
	for _, tc := range []struct {
		out  *ssm.Output
		pass bool
	}{{good, true}, {saturated, false}} {
		c, err := judge.CompareScan(p, tc.out, ssm.F16, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Passed(ssm.F16) != tc.pass {
			t.Errorf("out %v: passed %t, want %t (%s)", tc.out.Out, c.Passed(ssm.F16), tc.pass, c.Worst)
		}
	}
	if got := fmt.Sprint(ssm.F16.Round(65519), ssm.F16.Round(65520)); got != "65504 +Inf" {
		t.Errorf("fp16 rounding at the overflow point: %s", got)
	}
}
