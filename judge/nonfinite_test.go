package judge

import (
	"math"
	"strings"
	"testing"

	"ssmverify/ssm"
)

// TestJudge: each rule of the non-finite policy on hand-made values, in
// the style of the math package's special-value tables.
func TestJudge(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	r := func(v float64) complex128 { return complex(v, 0) }
	const f32max = math.MaxFloat32
	for _, tc := range []struct {
		name string
		v    Element
		dt   ssm.DType
		want string // "" to accept, else a fragment of the complaint
	}{
		{"rule 1: within", Element{Kernel: r(1 + 1e-7), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, ""},
		{"rule 1: beyond", Element{Kernel: r(1 + 1e-5), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, "ratio"},
		{"rule 1: NaN kernel", Element{Kernel: r(nan), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, "kernel gives NaN"},
		{"rule 1: float64 tighter", Element{Kernel: r(1 + 1e-12), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F64, "ratio"},
		{"rule 1: underflow part", Element{Kernel: r(0), Exact: r(1e-39), InDtype: r(0), Scale: 1, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel too", Element{Kernel: r(inf), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel exact", Element{Kernel: r(5e36), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel wrong", Element{Kernel: r(1), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, "ratio"},
		{"rule 2: dtype leaves the model", Element{Kernel: r(0), Exact: r(1e-30), InDtype: r(0), Scale: 1, Tiny: 0}, ssm.F32, ""},
		{"rule 2: neither answer", Element{Kernel: r(0.5), Exact: r(1), InDtype: r(0), Scale: 1, Tiny: 0}, ssm.F32, "ratio"},
		{"rule 3: +Inf wanted", Element{Kernel: r(inf), Exact: r(inf), InDtype: r(inf)}, ssm.F32, ""},
		{"rule 3: wrong sign", Element{Kernel: r(-inf), Exact: r(inf), InDtype: r(inf)}, ssm.F32, "reference is +Inf"},
		{"rule 3: NaN for +Inf", Element{Kernel: r(nan), Exact: r(inf), InDtype: r(inf)}, ssm.F32, "kernel gives NaN"},
		{"rule 3: finite for NaN", Element{Kernel: r(0), Exact: r(nan), InDtype: r(nan)}, ssm.F64, "reference is NaN"},
		{"rule 3: the dtype's class", Element{Kernel: r(nan), Exact: r(inf), InDtype: r(nan)}, ssm.F32, ""},
		{"rule 3: sums need only be non-finite", Element{Kernel: r(nan), Exact: r(inf), InDtype: r(inf), Sum: true}, ssm.F32, ""},
		{"rule 3: complex needs only be non-finite", Element{Kernel: complex(nan, nan), Exact: complex(inf, 0), InDtype: complex(inf, 0), IsComplex: true}, ssm.F32, ""},
		{"rule 3: complex finite for Inf", Element{Kernel: complex(1, 1), Exact: complex(inf, nan), InDtype: complex(inf, 0), IsComplex: true}, ssm.F32, "reference is Inf"},
		{"edge: beyond the range, +Inf", Element{Kernel: r(inf), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1}, ssm.F32, ""},
		{"edge: beyond the range, -Inf", Element{Kernel: r(-inf), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1}, ssm.F32, "want a value within the threshold or +Inf"},
		{"edge: beyond the range, sum NaN", Element{Kernel: r(nan), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1, Sum: true}, ssm.F32, ""},
		{"edge: just below max, finite", Element{Kernel: r(f32max), Exact: r(f32max * (1 - 1e-8)), InDtype: r(f32max), Scale: 4 * f32max, Tiny: 1}, ssm.F32, ""},
		{"edge: just below max, +Inf", Element{Kernel: r(inf), Exact: r(f32max * (1 - 1e-8)), InDtype: r(f32max), Scale: 4 * f32max, Tiny: 1}, ssm.F32, ""},
		{"scale undefined: finite", Element{Kernel: r(3), Exact: r(1), InDtype: r(1), Scale: nan, Tiny: 1}, ssm.F32, ""},
		{"scale undefined: NaN", Element{Kernel: r(nan), Exact: r(1), InDtype: r(1), Scale: nan, Tiny: 1}, ssm.F32, "error scale undefined"},
		{"scale overflows: anything", Element{Kernel: r(inf), Exact: r(0), InDtype: r(0), Scale: inf, Tiny: 1}, ssm.F64, ""},
		{"on infinity: the dtype's answer accepted", Element{Kernel: r(0.0712663457), Exact: r(0.0712667931), InDtype: r(0.0712663531), Scale: 1.85, Tiny: 1, OnInfinity: true}, ssm.F32, ""},
		{"not on infinity: the same is rejected", Element{Kernel: r(0.0712663457), Exact: r(0.0712667931), InDtype: r(0.0712663531), Scale: 1.85, Tiny: 1}, ssm.F32, "ratio"},
		{"on infinity: NaN accepted", Element{Kernel: r(nan), Exact: r(0.5), InDtype: r(0), Scale: 1, Tiny: 1, OnInfinity: true}, ssm.F32, ""},
		// 16-bit outputs: one rounding to nearest beyond the float32 model; ±Inf from fp16's 65520 on
		{"fp16: rounded to nearest", Element{Kernel: r(1 + 0x1p-10), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1, Rounded: true}, ssm.F16, ""},
		{"fp16: truncated", Element{Kernel: r(1), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1, Rounded: true}, ssm.F16, "ratio"},
		{"fp16: the same value unrounded fails", Element{Kernel: r(1 + 0x1p-10), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1}, ssm.F16, "ratio"},
		{"bf16: rounded to nearest", Element{Kernel: r(1 + 0x1p-7), Exact: r(1 + 0.75*0x1p-7), InDtype: r(1 + 0.75*0x1p-7), Scale: 2, Tiny: 1, Rounded: true}, ssm.BF16, ""},
		{"fp16: past 65520, +Inf", Element{Kernel: r(inf), Exact: r(70000), InDtype: r(70000), Scale: 2e5, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, ""},
		{"fp16: past 65520, saturated", Element{Kernel: r(ssm.Float16Max), Exact: r(70000), InDtype: r(70000), Scale: 2e5, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, "want a value within the threshold or +Inf"},
		// the float32 evaluation itself off its model (83×), then rounded: either answer stands
		{"fp16: the dtype's own evaluation off the model", Element{Kernel: r(294.75), Exact: r(294.9567682246783), InDtype: r(294.8412780761719), Scale: 23488, Tiny: 1, Rounded: true}, ssm.F16, ""},
		{"fp16: the same kernel where the evaluation is on the model", Element{Kernel: r(294.75), Exact: r(294.9567682246783), InDtype: r(294.9567682246783), Scale: 23488, Tiny: 1, Rounded: true}, ssm.F16, "ratio"},
		{"fp16: 65504 is not +Inf", Element{Kernel: r(inf), Exact: r(ssm.Float16Max), InDtype: r(ssm.Float16Max), Scale: 2e4, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, "kernel gives +Inf"},
	} {
		wantJudged(t, tc.name, Judge(tc.v, tc.dt, NonFinitePolicy), tc.want)
	}
}

// wantJudged checks one judgement: accepted where want is "", else a
// complaint containing want.
func wantJudged(t *testing.T, name, got, want string) {
	t.Helper()
	switch {
	case want == "" && got != "":
		t.Errorf("%s: rejected: %s", name, got)
	case want != "" && !strings.Contains(got, want):
		t.Errorf("%s: got %q, want a complaint containing %q", name, got, want)
	}
}

// TestFiniteOnly: without the non-finite policy, what the error model
// covers is judged as under it (rule 1), and every element beyond it is
// accepted: a non-finite reference, a dtype evaluation that overflows or
// leaves the model, the edge of the range, an x that overflows. A correct
// kernel's NaN where the policy wants −Inf (Δ = −3.4e38: the 23
// seeds) is not a failure of the accuracy contract.
func TestFiniteOnly(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	r := func(v float64) complex128 { return complex(v, 0) }
	for _, tc := range []struct {
		name string
		v    Element
		want string
	}{
		{"rule 1: within", Element{Kernel: r(1 + 1e-7), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ""},
		{"rule 1: beyond", Element{Kernel: r(1 + 1e-5), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, "ratio"},
		{"rule 1: NaN kernel", Element{Kernel: r(nan), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, "kernel gives NaN"},
		{"rule 3: NaN where −Inf", Element{Kernel: r(nan), Exact: r(-inf), InDtype: r(-inf)}, ""},
		{"rule 2: dtype overflows, kernel wrong", Element{Kernel: r(1), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ""},
		{"rule 2: neither answer", Element{Kernel: r(0.5), Exact: r(1), InDtype: r(0), Scale: 1, Tiny: 0}, ""},
		{"edge: beyond the range, -Inf", Element{Kernel: r(-inf), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1}, ""},
		{"on infinity: NaN", Element{Kernel: r(nan), Exact: r(0.5), InDtype: r(0), Scale: 1, Tiny: 1, OnInfinity: true}, ""},
		// Ā at Δ = +Inf: the reference's limit is finite, its error scale
		// undefined; the model does not cover it (a correct library
		// without SSMK_CAP_NONFINITE gave NaN and failed make fuzz)
		{"scale undefined: NaN", Element{Kernel: r(nan), Exact: r(0), InDtype: r(0), Scale: nan, Tiny: nan}, ""},
	} {
		wantJudged(t, tc.name, Judge(tc.v, ssm.F32, FiniteOnly), tc.want)
		if under := Judge(tc.v, ssm.F32, NonFinitePolicy); tc.want != "" && under == "" {
			t.Errorf("%s: the policy accepts what finite-only rejects", tc.name)
		}
	}
	// the policy itself still asks for the class there
	undefined := Element{Kernel: r(nan), Exact: r(0), InDtype: r(0), Scale: nan, Tiny: nan}
	wantJudged(t, "scale undefined under the policy", Judge(undefined, ssm.F32, NonFinitePolicy), "error scale undefined")
}
