package mamba2

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

// TestGradScaleSubnormalProducts: a chunked kernel that rounds
// ∂J/∂(C_t·B_s) to fp16 for its products (upstream's _bmm_chunk_bwd) errs
// absolutely where those values lie below fp16's normal range. The error
// of that rounding, computed exactly on a problem whose x is small enough
// to put them there, lies within dB's and dC's scale; without the
// subnormal term it does not (the term is what covers it), and at ten
// times its size it does not either (the model is not vacuous).
func TestGradScaleSubnormalProducts(t *testing.T) {
	o := Options{Batch: 1, Seqlen: 32, Heads: 2, Headdim: 4, Groups: 1, Dstate: 4, Chunk: 16, DType: ssm.F16, StateDType: ssm.F32}
	p := Generate(o, 31)
	for i := range p.X {
		p.X[i] *= 1e-5 // ∂J/∂(C_t·B_s) near 10⁻⁶, below fp16's normal 6.1·10⁻⁵
	}
	ct := randomCotangent(p, 32)
	L, H, P, N, q := p.Seqlen, p.Heads, p.Headdim, p.Dstate, p.Chunk
	lo, hi := p.Limits()
	delta := func(t, h int) float64 { return p.delta(p.Dt[t*H+h], 0, lo, hi) }
	// the chunk's cumulative Δ·A, per head, and ∂J/∂(C_t·B_s)
	cum := make([]float64, L*H)
	for t := 0; t < L; t++ {
		for h := 0; h < H; h++ {
			cum[t*H+h] = delta(t, h) * p.A[h]
			if t%q != 0 {
				cum[t*H+h] += cum[(t-1)*H+h]
			}
		}
	}
	errB, errC := make([]float64, len(p.B)), make([]float64, len(p.C))
	for c0 := 0; c0 < L; c0 += q {
		for tt := c0; tt < c0+q; tt++ {
			for s := c0; s <= tt; s++ {
				dcb := 0.0
				for h := 0; h < H; h++ {
					for pp := 0; pp < P; pp++ {
						dcb += ct.Y[(tt*H+h)*P+pp] * p.X[(s*H+h)*P+pp] * delta(s, h) * math.Exp(cum[tt*H+h]-cum[s*H+h])
					}
				}
				e := ssm.F16.Round(dcb) - dcb
				for n := 0; n < N; n++ {
					errB[s*N+n] += e * p.C[tt*N+n]
					errC[tt*N+n] += e * p.B[s*N+n]
				}
			}
		}
	}
	u := p.DType.Precision().UnitRoundoff()
	worst := func(scale, err []float64, less []float64) float64 {
		w := 0.0
		for i, e := range err {
			s := scale[i]
			if less != nil {
				s -= less[i]
			}
			w = math.Max(w, math.Abs(e)/(u*s))
		}
		return w
	}
	sc := GradErrorScale(p, ct)
	term := func(other []float64, earlier bool) []float64 {
		v := make([]float64, len(other))
		subnormalProducts(p, ssm.F16.OutputSpacing()/2/u, v, other, earlier)
		return v
	}
	tB, tC := term(p.C, false), term(p.B, true)
	for _, c := range []struct {
		name           string
		scale, err, tm []float64
	}{{"dB", sc.Scale.B, errB, tB}, {"dC", sc.Scale.C, errC, tC}} {
		if r := worst(c.scale, c.err, nil); r > 1 {
			t.Errorf("%s: the rounding's error is %.3g of the model", c.name, r)
		}
		if r := worst(c.scale, c.err, c.tm); r <= 1 {
			t.Errorf("%s: without the subnormal term the error is %.3g of the model: the term covers nothing", c.name, r)
		}
		big := make([]float64, len(c.err))
		for i, e := range c.err {
			big[i] = 10 * e
		}
		if r := worst(c.scale, big, nil); r <= 1 {
			t.Errorf("%s: ten times the rounding's error is %.3g of the model", c.name, r)
		}
	}
}

// TestGradScaleClampEdgeSoftplus: with softplus, a Δ that lands a few
// units of roundoff (relative) below the dt limit's lower end, where a
// kernel computing log(e^v + 1) errs by about u absolutely, is within the
// clamp's edge allowance: its gradient may be either branch's. Far from
// the end it is not.
func TestGradScaleClampEdgeSoftplus(t *testing.T) {
	o := Options{Batch: 1, Seqlen: 8, Heads: 1, Headdim: 2, Groups: 1, Dstate: 2, Chunk: 4, DtBias: true, Softplus: true,
		DtMin: 0.004, DtMax: 0.05, DType: ssm.F32, StateDType: ssm.F32}
	u := o.DType.Precision().UnitRoundoff()
	for _, c := range []struct {
		name  string
		delta float64 // Δ before the clamp, at step 3
		edge  bool
	}{
		{"19 u below the end", 0.004 * (1 - 19*u), true},
		{"u absolutely below", 0.004 - u, true},
		{"a tenth below", 0.0036, false},
	} {
		p := Generate(o, 41)
		p.DtBias[0] = 0
		p.Dt[3] = math.Log(math.Expm1(c.delta)) // softplus⁻¹
		ct := randomCotangent(p, 42)
		sc := GradErrorScale(p, ct)
		unclamped := *p
		unclamped.DtMin, unclamped.DtMax = 1e-300, math.Inf(1)
		g := Grad(&unclamped, ct).Dt[3]
		if covered := math.Abs(g) <= 0.5*u*sc.Scale.Dt[3]; covered != c.edge {
			t.Errorf("%s: the unclamped gradient %.3g within the model: %v, want %v (scale %.3g u)", c.name, g, covered, c.edge, sc.Scale.Dt[3])
		}
	}
}
