package diagnose

import (
	"testing"

	"ssmverify/reference"
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
		ab, g := reference.Real(p.Method, x)
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
