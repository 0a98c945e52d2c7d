package mamba1

import (
	"math"
	"math/cmplx"

	"ssmverify/ssm"
)

// CoefDeriv returns the derivatives in x of method m's Ā(x) and g(x) at
// complex x (real x on the real axis), in complex128:
//
//	method      dĀ/dx               dg/dx
//	zoh         e^x                 0
//	foh         e^x                 φ1'(x) = (e^x − φ1(x))/x, 1/2 at 0
//	bilinear    1/(1 − x/2)²        (1/2)/(1 − x/2)²
//	poly        e^x                 1/2 + x/3
//	highorder   e^x                 1/2
//	rk4         e^x                 1/2 + x/3 + x²/8
//
// φ1' is its Taylor series Σ k·x^(k−1)/(k+1)! for |x| < 1/2, where the
// quotient cancels, and the quotient (Smith's division) beyond. An invalid
// method gives NaNs.
func CoefDeriv(m ssm.Method, x complex128) (dabar, dg complex128) {
	if m == ssm.Bilinear {
		r := complex(1/(1-real(x)/2), 0) // real x: +Inf at the pole, where a complex 1/0 is NaN
		if imag(x) != 0 {
			r = quo(1, 1-x/2)
		}
		return r * r, r * r / 2
	}
	e, _ := Complex(ssm.ZOH, x)
	switch m {
	case ssm.ZOH:
		return e, 0
	case ssm.FOH:
		return e, dPhi1(x, e)
	case ssm.Poly:
		return e, 0.5 + x/3
	case ssm.HighOrder:
		return e, 0.5
	case ssm.RK4:
		return e, 0.5 + x*(1.0/3+x/8)
	}
	nan := complex(math.NaN(), math.NaN())
	return nan, nan
}

// dPhi1 is φ1'(x) given e = e^x: the series to degree 19 for |x| < 1/2
// (its truncation, 20·2⁻¹⁹/21!, is far below float64's u), else
// (e^x − φ1(x))/x, where the subtraction loses at most a few bits.
func dPhi1(x, e complex128) complex128 {
	if cmplx.Abs(x) < 0.5 {
		// c_k = k/(k+1)! for k = 20 … 1, by Horner's rule.
		var s complex128
		for k := 20; k >= 1; k-- {
			f := 1.0
			for j := 2; j <= k+1; j++ {
				f *= float64(j)
			}
			s = s*x + complex(float64(k)/f, 0)
		}
		return s
	}
	return quo(e-Phi1Complex(x), x)
}

// ScanGrad returns the gradients of the real loss
//
//	L = Σ ct.Out·out + Σ ct.LastState·last_state
//
// (for complex last states, Σ Re(conj(ct) · h) over the interleaved pairs)
// with respect to every input of p, in float64: the adjoint of the
// recurrence (the package documentation's backward). withInitial asks for
// the gradient with respect to the initial state too. It validates p and
// ct first.
func ScanGrad(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool) (*ssm.Grads, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := ct.Validate(p); err != nil {
		return nil, err
	}
	g := ssm.NewGrads(p, withInitial)
	N, L, w := p.Dstate, p.Seqlen, p.ElemWords()
	// k: y = Σ C·h for real A, 2·Re Σ C·h for complex A.
	k := complex(float64(w), 0)
	hs := make([]complex128, (L+1)*N) // hs[(t+1)·N + n] = h after step t; hs[n] = h before step 0
	lam := make([]complex128, N)      // ∂L/∂h (PyTorch's convention for complex h)
	next := make([]complex128, N)     // Ā of the step after the current one
	a := make([]complex128, N)
	get := func(s []float64, i int) complex128 {
		if p.Complex {
			return complex(s[i], s[i+1])
		}
		return complex(s[i], 0)
	}
	add := func(s []float64, i int, v complex128) {
		s[i] += real(v)
		if p.Complex {
			s[i+1] += imag(v)
		}
	}
	coef := func(x complex128) (abar, gg, dabar, dg complex128) {
		if p.Complex {
			abar, gg = Complex(p.Method, x)
		} else {
			ra, rg := Real(p.Method, real(x))
			abar, gg = complex(ra, 0), complex(rg, 0)
		}
		dabar, dg = CoefDeriv(p.Method, x)
		return
	}
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			row := b*p.Dim + d
			rp := rowParamsOf(p, b, d)
			for n := 0; n < N; n++ {
				a[n] = get(p.A, (d*N+n)*w)
				hs[n] = 0
				if p.InitialState != nil {
					hs[n] = get(p.InitialState, (row*N+n)*w)
				}
			}
			// The forward, keeping every state.
			for t := 0; t < L; t++ {
				i := rp.row + t
				dt := complex(StepDelta(p, i), 0)
				u := complex(p.U[i], 0)
				for n := 0; n < N; n++ {
					ab, gg, _, _ := coef(dt * a[n])
					bv := get(p.B, rp.bBase+t*rp.bStep+n*rp.bStride)
					hs[(t+1)*N+n] = ab*hs[t*N+n] + dt*gg*bv*u
				}
			}
			// The adjoint, from the last step back.
			for n := 0; n < N; n++ {
				lam[n], next[n] = 0, 1
				if ct.LastState != nil {
					lam[n] = get(ct.LastState, (row*N+n)*w)
				}
			}
			for t := L - 1; t >= 0; t-- {
				i := rp.row + t
				v := p.Delta[i]
				if p.DeltaBias != nil {
					v += p.DeltaBias[d]
				}
				dtr := StepDelta(p, i)
				dt, u := complex(dtr, 0), complex(p.U[i], 0)
				var y complex128
				for n := 0; n < N; n++ {
					y += get(p.C, rp.cBase+t*rp.cStep+n*rp.cStride) * hs[(t+1)*N+n]
				}
				yr := real(k * y)
				if !p.Complex {
					yr = real(y)
				}
				if p.D != nil {
					yr += p.D[d] * p.U[i]
				}
				dy := ct.Out[i]
				if p.Z != nil {
					z := p.Z[i]
					sig := 1 / (1 + math.Exp(-z))
					g.Z[i] = ct.Out[i] * yr * sig * (1 + z*(1-sig))
					dy *= z * sig
				}
				var du, ddt float64
				for n := 0; n < N; n++ {
					bi, ci := rp.bBase+t*rp.bStep+n*rp.bStride, rp.cBase+t*rp.cStep+n*rp.cStride
					bv, cv := get(p.B, bi), get(p.C, ci)
					x := dt * a[n]
					ab, gg, dab, dg := coef(x)
					lam[n] = cmplx.Conj(next[n])*lam[n] + k*complex(dy, 0)*cmplx.Conj(cv)
					l := lam[n]
					add(g.C, ci, k*complex(dy, 0)*cmplx.Conj(hs[(t+1)*N+n]))
					add(g.B, bi, cmplx.Conj(dt*gg*u)*l)
					du += real(l * cmplx.Conj(dt*gg*bv))
					gx := cmplx.Conj(dab)*cmplx.Conj(hs[t*N+n])*l + cmplx.Conj(dg)*cmplx.Conj(dt*u*bv)*l
					ddt += real(l*cmplx.Conj(gg*bv*u)) + real(gx*cmplx.Conj(a[n]))
					add(g.A, (d*N+n)*w, dt*gx)
					next[n] = ab
				}
				if p.D != nil {
					du += dy * p.D[d]
					g.D[d] += dy * p.U[i]
				}
				g.U[i] = du
				if p.Softplus && v <= 20 {
					ddt *= 1 / (1 + math.Exp(-v)) // softplus' = σ
				}
				g.Delta[i] = ddt
				if p.DeltaBias != nil {
					g.DeltaBias[d] += ddt
				}
			}
			if withInitial {
				for n := 0; n < N; n++ {
					add(g.InitialState, (row*N+n)*w, cmplx.Conj(next[n])*lam[n])
				}
			}
		}
	}
	return g, nil
}
