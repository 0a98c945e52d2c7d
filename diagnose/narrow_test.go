package diagnose

import (
	"math"
	"slices"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// oneState is a mixed-precision kernel of one channel and one state
// (constant B and C), as the probes scan it: float32 arithmetic, its state
// and x = Δ·a passed through keepState and keepX after each step.
type oneState struct {
	keepState, keepX func(float64) float64
}

func (k oneState) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	f := func(v float64) float64 { return float64(float32(v)) }
	h := 0.0
	out := make([]float64, p.Seqlen)
	for t := 0; t < p.Seqlen; t++ {
		x := k.keepX(f(p.Delta[t] * p.A[0]))
		ab, g := mamba1.Real(p.Method, x)
		h = k.keepState(f(f(ab)*h + f(f(p.Delta[t]*f(g))*p.B[0]*p.U[t])))
		out[t] = dt.Round(f(p.C[0] * h))
	}
	return &ssm.Output{Out: out, LastState: []float64{h}}, nil
}

// TestNarrowProbes: the probes name a state kept in bfloat16 or fp16 and an
// x rounded to 16 bits, and name nothing for a float32 kernel.
func TestNarrowProbes(t *testing.T) {
	same := func(v float64) float64 { return v }
	for _, tc := range []struct {
		name   string
		kernel oneState
		tag    string
	}{
		{"float32 state and x", oneState{same, same}, ""},
		{"bf16 state", oneState{ssm.RoundBFloat16, same}, "state-16bit"},
		{"fp16 state", oneState{ssm.RoundFloat16, same}, "state-16bit"},
		{"x in bf16", oneState{same, ssm.RoundBFloat16}, "dA-16bit"},
	} {
		for _, m := range []ssm.Method{ssm.ZOH, ssm.Bilinear, ssm.RK4} {
			for _, dt := range ssm.NarrowDTypes() {
				tag, cause, _ := explainNarrow(tc.kernel, m, dt)
				if tag != tc.tag {
					t.Errorf("%s, %v %v: tag %q (%s), want %q", tc.name, m, dt, tag, cause, tc.tag)
				}
			}
		}
	}
	if got := stateBits(oneState{ssm.RoundFloat16, func(v float64) float64 { return v }}, ssm.ZOH, ssm.F16); got != 11 {
		t.Errorf("fp16 state measured at %d bits, want 11", got)
	}
	if got := stateBits(oneState{ssm.RoundBFloat16, func(v float64) float64 { return v }}, ssm.ZOH, ssm.BF16); got != 8 {
		t.Errorf("bf16 state measured at %d bits, want 8", got)
	}
}

// truncating is a mixed-precision kernel whose only bug is its output's
// rounding: the float32 result truncated to the 16-bit type (toward zero)
// instead of rounded to nearest; the float32 state is right.
type truncating struct{}

func (truncating) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	o, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		return nil, err
	}
	for i, v := range o.LastState {
		o.LastState[i] = float64(float32(v))
	}
	for i, v := range o.Out {
		o.Out[i] = truncNarrow(float64(float32(v)), dt)
	}
	return o, nil
}

// truncNarrow rounds v toward zero to bfloat16 or fp16 (no overflow).
func truncNarrow(v float64, dt ssm.DType) float64 {
	if dt == ssm.BF16 {
		return float64(math.Float32frombits(math.Float32bits(float32(v)) &^ 0xffff))
	}
	a := math.Abs(v)
	_, e := math.Frexp(a)                // a in [2^(e−1), 2^e)
	ulp := math.Ldexp(1, max(e-11, -24)) // fp16's 10 fraction bits; its subnormals' spacing
	return math.Copysign(math.Floor(a/ulp)*ulp, v)
}

// TestScanNamesTruncatedOutput: a truncated 16-bit output is diagnosed as
// such, also on the one-element problem that shrinking leaves, where a slip
// (y from the state before the update: D·u alone at the first step) fits
// the same value within the threshold too and is named as an alternative.
func TestScanNamesTruncatedOutput(t *testing.T) {
	one := mamba1.Spec{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH, HasD: true, Dist: mamba1.Realistic}
	for _, c := range []struct {
		name string
		p    func(dt ssm.DType) *ssm.Problem
	}{
		{"Mamba block", func(dt ssm.DType) *ssm.Problem {
			p := problem(ssm.ZOH, false, nil)
			p.RoundTo(dt)
			return p
		}},
		{"one element", func(dt ssm.DType) *ssm.Problem {
			p := mamba1.Generate(one, 0)
			p.RoundTo(dt)
			return p
		}},
	} {
		for _, dt := range ssm.NarrowDTypes() {
			f := Scan(truncating{}, c.p(dt), dt)
			if f.Tag != "output-truncated" {
				t.Errorf("%s, %v: diagnosed %q: %s", c.name, dt, f.Tag, f)
			}
			if c.name == "one element" && dt == ssm.F16 && !slices.Contains(f.Also, "output-before-update") {
				t.Errorf("%s, %v: the slip that fits too is not named as an alternative: %s (also %v)", c.name, dt, f, f.Also)
			}
		}
	}
}
