package reference

import (
	"math"
	"math/cmplx"

	"ssmverify/ssm"
)

// GradScale is the error scale of every gradient element (see
// GradErrorScale): a correct backward pass with unit roundoff u has
// |kernel − exact| ≲ u·Scale + η·Tiny per element, complex elements
// compared by the modulus of their error. Both are shaped like the
// gradients (ssm.Grads; only the real word of a complex element is used,
// the imaginary word repeats it).
type GradScale struct {
	Scale, Tiny *ssm.Grads
}

// derivBound is what the backward's error analysis needs of a method's
// derivatives at x: |dĀ/dx| and |dg/dx| (from coefBound), the magnitudes of
// the second derivatives (how an error in x propagates into the first) and
// the error of evaluating each first derivative from an exact x, in units
// of u.
type derivBound struct {
	d2abar, evalDA float64
	d2g, evalDG    float64
}

func boundDeriv(m ssm.Method, x complex128, isComplex bool, c coefBound) derivBound {
	cf := 1.0
	if isComplex {
		cf = 2
	}
	r := cmplx.Abs(x)
	var d derivBound
	if m == ssm.Bilinear {
		dn := cmplx.Abs(1 - x/2)
		// 1/(1 − x/2)² and half of it: the denominator's (1 + |x|/2)·u,
		// squared and inverted.
		d.d2abar = 1 / (dn * dn * dn)
		d.evalDA = cf * (2*(1+r/2)/(dn*dn*dn) + 3/(dn*dn))
		d.d2g, d.evalDG = d.d2abar/2, d.evalDA/2
		return d
	}
	// dĀ/dx = e^x = Ā: the same evaluation.
	d.d2abar, d.evalDA = c.abar, c.evalA
	switch m {
	case ssm.FOH:
		// φ1'' = (e^x − 2φ1')/x, 1/3 at 0; near 0 a series of positive
		// coefficients, bounded by its value at |x|.
		if r < 0.5 {
			d.d2g = 1.0/3 + r/4 + r*r/10
			d.evalDG = cf * 2 * math.Exp(r)
		} else {
			d.d2g = (c.abar + 2*c.dg) / r
			// (e^x − φ1)/x from e^x and φ1 as computed: their errors, the
			// subtraction and the division.
			d.evalDG = cf*((2+r)*c.abar+c.evalG+2*(c.abar+c.g))/r + 2*c.dg
		}
	case ssm.Poly:
		d.d2g, d.evalDG = 1.0/3, 2*cf*(0.5+r/3)
	case ssm.RK4:
		d.d2g, d.evalDG = cmplx.Abs(1.0/3+x/4), 4*cf*(0.5+r/3+r*r/8)
	}
	return d
}

// GradErrorScale returns the error scale of every gradient of p's backward
// pass for the cotangent ct, by a running error analysis of the adjoint in
// the manner of ErrorScale's (the package documentation's "The backward"):
// it starts from the forward's state bounds H and scales S at every step,
// carries a magnitude bound Λ and a scale S_λ of the adjoint state λ back
// in time, and bounds each gradient term by the errors of its factors plus
// its own roundings; a sum of K terms (over states, or over batch and time
// for a weight) adds K·Σ|terms| for any order of summation. withInitial
// asks for the initial state's gradient too.
//
// prec is the kernel's precision, for what underflow adds: σ(z) of a very
// negative z flushes to 0 (e^{−z} overflows first), losing dy and dz
// entirely; that loss, at most η·|dout·z| in dy and η·|dout·y|·(1 + |z|)
// in dz, is carried in units of u (η/u of the precision) through the same
// propagation as rounding.
func GradErrorScale(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool, prec ssm.Precision) (*GradScale, error) {
	if err := ct.Validate(p); err != nil {
		return nil, err
	}
	N, L, w := p.Dstate, p.Seqlen, p.ElemWords()
	rows := p.Batch * p.Dim
	H := make([]float64, rows*(L+1)*N) // H[(row·(L+1) + t+1)·N + n] after step t; t = −1: the initial state
	S := make([]float64, rows*(L+1)*N)
	if p.InitialState != nil {
		for i := range rows * N {
			row, n := i/N, i%N
			H[row*(L+1)*N+n] = elemAbs(p, p.InitialState, i*w)
		}
	}
	if _, err := errorScale(p, 0, func(row, t, n int, h, s float64) {
		H[(row*(L+1)+t+1)*N+n], S[(row*(L+1)+t+1)*N+n] = h, s
	}); err != nil {
		return nil, err
	}
	sc, tiny := ssm.NewGrads(p, withInitial), ssm.NewGrads(p, withInitial)
	sumA, sumB, sumC := make([]gradSum, len(sc.A)), make([]gradSum, len(sc.B)), make([]gradSum, len(sc.C))
	sumD, sumBias := make([]gradSum, p.Dim), make([]gradSum, p.Dim)
	lam, slam, next, snext := make([]float64, N), make([]float64, N), make([]float64, N), make([]float64, N)
	a := make([]complex128, N)
	cf := 1.0 // complex products round more
	if p.Complex {
		cf = 2
	}
	k := float64(w) // y = 2·Re Σ C·h for complex A
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			row := b*p.Dim + d
			rp := rowParamsOf(p, b, d)
			hAt := func(t, n int) (float64, float64) { j := (row*(L+1)+t+1)*N + n; return H[j], S[j] }
			for n := 0; n < N; n++ {
				if p.Complex {
					a[n] = complex(p.A[2*(d*N+n)], p.A[2*(d*N+n)+1])
				} else {
					a[n] = complex(p.A[d*N+n], 0)
				}
				lam[n], slam[n], next[n], snext[n] = 0, 0, 1, 0
				if ct.LastState != nil {
					lam[n] = elemAbs(p, ct.LastState, (row*N+n)*w)
				}
			}
			for t := L - 1; t >= 0; t-- {
				i := rp.row + t
				u := math.Abs(p.U[i])
				dt, sdt := deltaScale(p, p.Delta[i], d)
				// y before the gate, as the forward's scale has it.
				var Y, SY float64
				for n := 0; n < N; n++ {
					h, s := hAt(t, n)
					cv := elemAbs(p, p.C, rp.cBase+t*rp.cStep+n*rp.cStride)
					Y += k * cv * h
					SY += k * (cv*s + float64(N)*cv*h)
				}
				if p.D != nil {
					du := math.Abs(p.D[d]) * u
					SY += Y + 2*du
					Y += du
				}
				// dy = dout·z·σ(z) and dz = dout·y·σ(z)(1 + z(1 − σ(z))): the
				// gate's evaluation (5 + (1 − σ)|z|)·u relative, as forward.
				DY, SDY := math.Abs(ct.Out[i]), 0.0
				if p.Z != nil {
					z := p.Z[i]
					sig := 1 / (1 + math.Exp(-z))
					rel := 5 + (1-sig)*math.Abs(z)
					inner := 1 + z*(1-sig)
					dsilu := math.Abs(sig * inner)
					// σ(1 + z(1 − σ)) cancels near z ≈ −1.28: the absolute
					// errors of σ, of 1 − σ, of z(1 − σ) and of the sum.
					eSig := sig * rel
					eInner := math.Abs(z)*(eSig+(1-sig)) + 2*math.Abs(z*(1-sig)) + 1
					eDsilu := sig*eInner + math.Abs(inner)*eSig + dsilu
					flush := prec.Tiny() / prec.UnitRoundoff()
					sc.Z[i] = math.Abs(ct.Out[i]) * (dsilu*SY + Y*eDsilu + 2*dsilu*Y + flush*Y*(1+math.Abs(z)))
					tiny.Z[i] = 4
					SDY = rel*DY*math.Abs(z*sig) + flush*DY*math.Abs(z)
					DY *= math.Abs(z * sig)
				}
				var su, mu, sdd, mdd float64 // du's and dΔ's scale and Σ|terms|
				for n := 0; n < N; n++ {
					bi, ci := rp.bBase+t*rp.bStep+n*rp.bStride, rp.cBase+t*rp.cStep+n*rp.cStride
					bv, cv := elemAbs(p, p.B, bi), elemAbs(p, p.C, ci)
					x := complex(dt, 0) * a[n]
					cb := boundCoef(p.Method, x, p.Complex)
					db := boundDeriv(p.Method, x, p.Complex, cb)
					sx := cmplx.Abs(a[n])*sdt + cmplx.Abs(x)*(1+boolf(p.Complex))
					sA, sg := cb.dabar*sx+cb.evalA, cb.dg*sx+cb.evalG
					sdA, sdg := db.d2abar*sx+db.evalDA, db.d2g*sx+db.evalDG
					h, sh := hAt(t, n)
					hp, shp := hAt(t-1, n)
					// λ_t = Ā_{t+1}·λ_{t+1} + k·dy·C_t (conjugates for complex A)
					in := k * DY * cv
					slam[n] = next[n]*slam[n] + snext[n]*lam[n] + k*SDY*cv + 2*cf*(next[n]*lam[n]+in)
					lam[n] = next[n]*lam[n] + in
					next[n], snext[n] = cb.abar, sA
					l, sl := lam[n], slam[n]
					adt := math.Abs(dt)
					// dC += k·dy·h
					addSum(sumC, ci, k*(DY*sh+SDY*h+cf*DY*h), k*DY*h)
					// dB += λ·Δ·g·u
					addSum(sumB, bi, adt*cb.g*u*sl+l*(cb.g*u*sdt+adt*u*sg)+3*cf*l*adt*cb.g*u, l*adt*cb.g*u)
					// du += λ·Δ·g·B
					su += adt*cb.g*bv*sl + l*(cb.g*bv*sdt+adt*bv*sg) + 3*cf*l*adt*cb.g*bv
					mu += l * adt * cb.g * bv
					// ∂L/∂x = λ·h_{t−1}·Ā' + λ·Δ·u·B·g'
					gx := l*hp*cb.dabar + l*adt*u*bv*cb.dg
					sgx := cb.dabar*(hp*sl+l*shp) + l*hp*sdA + 3*cf*l*hp*cb.dabar +
						adt*u*bv*cb.dg*sl + l*u*bv*(cb.dg*sdt+adt*sdg) + 4*cf*l*adt*u*bv*cb.dg
					// dΔ += λ·g·B·u + a·∂L/∂x
					ga := cmplx.Abs(a[n])
					sdd += cb.g*bv*u*sl + l*bv*u*sg + 3*cf*l*cb.g*bv*u + ga*sgx + cf*ga*gx
					mdd += l*cb.g*bv*u + ga*gx
					// dA += Δ·∂L/∂x
					addSum(sumA, d*N*w+n*w, adt*sgx+gx*sdt+cf*adt*gx, adt*gx)
				}
				su += float64(N) * mu
				if p.D != nil {
					dd := math.Abs(p.D[d])
					su += dd*SDY + 2*(dd*DY+mu)
					sumD[d].s += u*SDY + u*DY
					sumD[d].mag += u * DY
					sumD[d].n++
				}
				sc.U[i], tiny.U[i] = su, float64(2*N+2)
				sdd += 2 * float64(N) * mdd
				if v := p.Delta[i] + biasOf(p, d); p.Softplus && v <= 20 {
					// dΔ·σ(v): σ's own error and that of v (the bias addition)
					sig := 1 / (1 + math.Exp(-v))
					sv := 0.0
					if p.DeltaBias != nil {
						sv = math.Abs(v)
					}
					sdd = sig*sdd + mdd*(sig*(1-sig)*sv+3*sig) + sig*mdd
					mdd *= sig
				}
				sc.Delta[i], tiny.Delta[i] = sdd, float64(4*N+4)
				if p.DeltaBias != nil {
					sumBias[d].s += sdd
					sumBias[d].mag += mdd
					sumBias[d].n++
				}
			}
			if withInitial {
				for n := 0; n < N; n++ {
					j := (row*N + n) * w
					sc.InitialState[j] = next[n]*slam[n] + snext[n]*lam[n] + 2*cf*next[n]*lam[n]
					tiny.InitialState[j] = 4
				}
			}
		}
	}
	finish := func(sum []gradSum, s, t []float64) {
		for j := range sum {
			s[j] = sum[j].s + sum[j].n*sum[j].mag
			t[j] = 4 * (sum[j].n + 1)
		}
	}
	finish(sumA, sc.A, tiny.A)
	finish(sumB, sc.B, tiny.B)
	finish(sumC, sc.C, tiny.C)
	if p.D != nil {
		finish(sumD, sc.D, tiny.D)
	}
	if p.DeltaBias != nil {
		finish(sumBias, sc.DeltaBias, tiny.DeltaBias)
	}
	if p.Complex {
		for _, f := range [][]float64{sc.A, sc.B, sc.C, sc.InitialState, tiny.A, tiny.B, tiny.C, tiny.InitialState} {
			for j := 0; j+1 < len(f); j += 2 {
				f[j+1] = f[j]
			}
		}
	}
	return &GradScale{Scale: sc, Tiny: tiny}, nil
}

// gradSum collects the terms of a summed gradient element: their scales,
// their magnitudes and their number n; the sum's scale adds n·Σ|terms|, the
// rounding of any order of summation.
type gradSum struct{ s, mag, n float64 }

// addSum adds one term of summed element j (the real word of a complex
// one): its scale s and magnitude m.
func addSum(sum []gradSum, j int, s, m float64) {
	sum[j].s += s
	sum[j].mag += m
	sum[j].n++
}

func biasOf(p *ssm.Problem, d int) float64 {
	if p.DeltaBias == nil {
		return 0
	}
	return p.DeltaBias[d]
}
