package mamba1

import (
	"fmt"
	"math"

	"ssmverify/ssm"
)

// wide is a complex number m·2^e with an unbounded exponent: its parts are
// float64 scaled so that the larger has magnitude in [1/2, 1), and e is an
// int. Products and sums round to 53 bits as float64 does but never overflow
// or underflow (a part far smaller than the other may still flush, which is
// below the rounding of the larger). Non-finite parts are kept as they are,
// with e = 0, so that NaN and ∞ propagate as in float64.
type wide struct {
	re, im float64
	e      int
}

func norm(re, im float64, e int) wide {
	big := math.Max(math.Abs(re), math.Abs(im))
	if big == 0 || math.IsInf(big, 0) || math.IsNaN(big) { // math.Max is NaN if either part is
		return wide{re, im, 0}
	}
	_, k := math.Frexp(big)
	return wide{math.Ldexp(re, -k), math.Ldexp(im, -k), e + k}
}

func wideOf(re, im float64) wide { return norm(re, im, 0) }

func (a wide) mul(b wide) wide {
	if a.im == 0 && b.im == 0 {
		// Real operands (real A's rows): no ∞·0 = NaN imaginary part
		// where a real coefficient overflows, as in the real Scan.
		return norm(a.re*b.re, 0, a.e+b.e)
	}
	return norm(a.re*b.re-a.im*b.im, a.re*b.im+a.im*b.re, a.e+b.e)
}

func (a wide) add(b wide) wide {
	if a.re == 0 && a.im == 0 {
		return b
	}
	if b.re == 0 && b.im == 0 {
		return a
	}
	e := max(a.e, b.e)
	return norm(math.Ldexp(a.re, a.e-e)+math.Ldexp(b.re, b.e-e), math.Ldexp(a.im, a.e-e)+math.Ldexp(b.im, b.e-e), e)
}

// float64s rounds to float64: ±Inf beyond the range, as IEEE 754 rounds.
func (a wide) float64s() (re, im float64) { return math.Ldexp(a.re, a.e), math.Ldexp(a.im, a.e) }

// ScanRowUnbounded evaluates row (b, d) of the scan as Scan(p, Float64)
// does — the same float64 coefficients Ā and Δ·g, and the same order of
// operations — but with the input terms Δ·g·B·u, the states and the sum
// Σ C·h of unbounded exponent range: the value of the recurrence whose
// intermediates cannot overflow. It differs from Scan only where a state
// leaves float64's range and a later Ā, underflowed to 0 or tiny, brings it
// back: the sequential float64 recurrence then meets ∞·0 = NaN while the
// value is finite, and a time-parallel kernel, which forms the product of
// the Ā first, computes it (FuzzScan on the H200: highorder, complex A, fp64,
// a state of 1e341 at step 2 and Ā = e^(−1.35e35) = 0 at step 3). It returns
// the row's Seqlen outputs and its last state (Dstate values, interleaved
// (re, im) when Complex). Coefficients that overflow themselves (e^x for
// x > log(MaxFloat64)) stay non-finite, as in Scan.
func ScanRowUnbounded(p *ssm.Problem, b, d int) (out, state []float64, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if b < 0 || b >= p.Batch || d < 0 || d >= p.Dim {
		return nil, nil, fmt.Errorf("reference: ScanRowUnbounded: row (b, d) = (%d, %d) outside batch %d × dim %d", b, d, p.Batch, p.Dim)
	}
	N, L, cw := p.Dstate, p.Seqlen, p.ElemWords()
	rp := rowParamsOf(p, b, d)
	out = make([]float64, L)
	ab, bc := make([]float64, N), make([]float64, N)
	aRe := make([]float64, N)
	for n := range aRe {
		aRe[n] = p.A[(d*N+n)*cw]
	}
	part := func(s []float64, i int) (re, im float64) {
		if p.Complex {
			return s[i], s[i+1]
		}
		return s[i], 0
	}
	h := make([]wide, N) // from the initial state, else 0
	if p.InitialState != nil {
		for n := range h {
			h[n] = wideOf(part(p.InitialState, ((b*p.Dim+d)*N+n)*cw))
		}
	}
	for t := range L {
		i := rp.row + t
		u := p.U[i]
		dt := stepDelta(p, p.Delta[i], d)
		if !p.Complex {
			coefRow(p.Method, dt, aRe, ab, bc)
		}
		bi, ci := rp.bBase+t*rp.bStep, rp.cBase+t*rp.cStep
		var acc wide
		for n := range N {
			var abar, coef wide // Ā and Δ·g
			if p.Complex {
				a := cpx[float64]{p.A[2*(d*N+n)], p.A[2*(d*N+n)+1]}
				x, g := complexCoef(p.Method, a.scale(dt))
				abar, coef = wideOf(x.re, x.im), wideOf(g.re, g.im).mul(wideOf(dt, 0))
			} else {
				abar, coef = wideOf(ab[n], 0), wideOf(bc[n], 0)
			}
			h[n] = abar.mul(h[n]).add(coef.mul(wideOf(part(p.B, bi))).mul(wideOf(u, 0)))
			acc = acc.add(wideOf(part(p.C, ci)).mul(h[n]))
			bi += rp.bStride
			ci += rp.cStride
		}
		if p.Complex { // y = 2·Re Σ C·h
			acc = acc.mul(wideOf(2, 0))
		}
		y, _ := acc.float64s()
		out[t] = finishOutput(p, y, u, d, i)
	}
	state = make([]float64, N*cw)
	for n, v := range h {
		re, im := v.float64s()
		state[n*cw] = re
		if p.Complex {
			state[n*cw+1] = im
		}
	}
	return out, state, nil
}
