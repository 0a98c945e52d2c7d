package mamba1

import (
	"math"
	"sort"

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
	// Peak bounds every partial product a kernel may form on the way to
	// any gradient term, in any order of multiplication (the product of a
	// term's factors above 1): where it passes a dtype's largest number, an
	// evaluation in that dtype may overflow although the gradient does not
	// (FuzzBackward: Δ·u = 10⁶⁰ in float32 where Δ·g·u is 2·10³⁰).
	Peak float64
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
	r := absC(x)
	var d derivBound
	if m == ssm.Bilinear {
		dn := absC(1 - x/2)
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
			d.evalDG = cf*((2+exp2Route*r)*c.abar+c.evalG+2*(c.abar+c.g))/r + 2*c.dg
		}
	case ssm.Poly:
		d.d2g, d.evalDG = 1.0/3, 2*cf*(0.5+r/3)
	case ssm.RK4:
		d.d2g, d.evalDG = absC(1.0/3+x/4), 4*cf*(0.5+r/3+r*r/8)
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
// for a weight) adds K·Σ|terms| for any order of summation. Underflow is
// bounded apart, in units of η, as the forward's is (flushLoss): a partial
// product of a term's factors below η loses up to η times the factors
// multiplied after it, bilinear's Ā' = g² and g' = g²/2 counted as the
// products they are. withInitial asks for the initial state's gradient
// too.
//
// prec is the kernel's precision, for what underflow adds: σ(z) of a very
// negative z flushes to 0 (e^{−z} overflows first), losing dy and dz
// entirely; that loss, at most η·|dout·z| in dy and η·|dout·y|·(1 + |z|)
// in dz, is carried in units of u (η/u of the precision) through the same
// propagation as rounding.
func GradErrorScale(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool, prec ssm.Precision) (*GradScale, error) {
	return gradErrorScale(p, ct, withInitial, prec, false)
}

// GradErrorScaleRecovered is GradErrorScale for a backward that does not
// carry Ā·h_{t−1} but recovers it from the state it scanned as h_t − β_t
// (Mamba's kernel: x − Δ·u·B): each use of Ā·h_{t−1} (through Ā'·h_{t−1} in
// ∂L/∂x, hence in dA and dΔ) may then be off by the error of h_t and the
// roundings of h_t, β_t and the subtraction, u·(S_h + |h_t| + 4|β_t|),
// which is unbounded relative to Ā·h_{t−1} where the step's input
// dominates the state. The suite judges by GradErrorScale, the bound a
// backward that carries the state achieves; package diagnose uses this
// one to name the recovered form.
func GradErrorScaleRecovered(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool, prec ssm.Precision) (*GradScale, error) {
	return gradErrorScale(p, ct, withInitial, prec, true)
}

func gradErrorScale(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool, prec ssm.Precision, recovered bool) (*GradScale, error) {
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
	Tz := make([]float64, rows*(L+1)*N) // the states' underflow bounds (units of η)
	if _, err := errorScale(p, 0, func(row, t, n int, h, s, tz float64) {
		j := (row*(L+1)+t+1)*N + n
		H[j], S[j], Tz[j] = h, s, tz
	}); err != nil {
		return nil, err
	}
	sc, tiny := ssm.NewGrads(p, withInitial), ssm.NewGrads(p, withInitial)
	peak := 0.0
	pk := func(fs ...float64) {
		p := 1.0
		for _, f := range fs {
			if f > 1 {
				p *= f
			}
		}
		peak = math.Max(peak, p)
	}
	tf := func(fs ...float64) float64 {
		pk(fs...)
		return termFlush(prec, fs...)
	}
	sumA, sumB, sumC := make([]gradSum, len(sc.A)), make([]gradSum, len(sc.B)), make([]gradSum, len(sc.C))
	sumD, sumBias := make([]gradSum, p.Dim), make([]gradSum, p.Dim)
	lam, slam, next, snext := make([]float64, N), make([]float64, N), make([]float64, N), make([]float64, N)
	tlam := make([]float64, N) // the adjoint's underflow bound (units of η)
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
			tAt := func(t, n int) float64 { return Tz[(row*(L+1)+t+1)*N+n] }
			for n := 0; n < N; n++ {
				if p.Complex {
					a[n] = complex(p.A[2*(d*N+n)], p.A[2*(d*N+n)+1])
				} else {
					a[n] = complex(p.A[d*N+n], 0)
				}
				lam[n], slam[n], next[n], snext[n], tlam[n] = 0, 0, 1, 0, 0
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
				TY := 2 * float64(N) // y's underflow bound (units of η), as the forward's
				for n := 0; n < N; n++ {
					h, s := hAt(t, n)
					cv := elemAbs(p, p.C, rp.cBase+t*rp.cStep+n*rp.cStride)
					Y += k * cv * h
					SY += k * (cv*s + float64(N)*cv*h)
					TY += k * cv * tAt(t, n)
				}
				if p.D != nil {
					// D·u in any place of the sum, as the forward's scale
					// has it.
					du := math.Abs(p.D[d]) * u
					SY += Y + (float64(N)+2)*du
					Y += du
				}
				// dy = dout·z·σ(z) and dz = dout·y·σ(z)(1 + z(1 − σ(z))): the
				// gate's evaluation (5 + (1 − σ)|z|)·u relative, as forward.
				DY, SDY := math.Abs(ct.Out[i]), 0.0
				// dy's factors, for the underflow bounds: with a gate dy is the
				// product dout·z·σ(z), which may flush before it meets h or C
				// (FuzzBackward: z = 6.7e-44 made dy 0 in float32, and dC = k·dy·h
				// with h = 10¹⁵ lost 7.6e-32).
				dyf := []float64{DY}
				if p.Z != nil {
					z := p.Z[i]
					sig := 1 / (1 + math.Exp(-z))
					rel := 5 + (1-sig)*exp2Route*math.Abs(z)
					inner := 1 + z*(1-sig)
					dsilu := math.Abs(sig * inner)
					// σ(1 + z(1 − σ)) cancels near z ≈ −1.28: the absolute
					// errors of σ, of 1 − σ, of z(1 − σ) and of the sum.
					eSig := sig * rel
					eInner := math.Abs(z)*(eSig+(1-sig)) + 2*math.Abs(z*(1-sig)) + 1
					eDsilu := sig*eInner + math.Abs(inner)*eSig + dsilu
					flush := prec.Tiny() / prec.UnitRoundoff()
					sc.Z[i] = math.Abs(ct.Out[i]) * (dsilu*SY + Y*eDsilu + 2*dsilu*Y + flush*Y*(1+math.Abs(z)))
					tiny.Z[i] = math.Abs(ct.Out[i])*dsilu*TY + tf(math.Abs(ct.Out[i]), Y, dsilu) + 4
					SDY = rel*DY*math.Abs(z*sig) + flush*DY*math.Abs(z)
					DY *= math.Abs(z * sig)
					dyf = append(dyf, math.Abs(z), sig)
				}
				var su, mu, sdd, mdd float64 // du's and dΔ's scale and Σ|terms|
				var tu, tdd float64          // their underflow losses (units of η)
				for n := 0; n < N; n++ {
					bi, ci := rp.bBase+t*rp.bStep+n*rp.bStride, rp.cBase+t*rp.cStep+n*rp.cStride
					bv, cv := elemAbs(p, p.B, bi), elemAbs(p, p.C, ci)
					x := complex(dt, 0) * a[n]
					cb := boundCoef(p.Method, x, p.Complex)
					db := boundDeriv(p.Method, x, p.Complex, cb)
					sx := absC(a[n])*sdt + absC(x)*(1+boolf(p.Complex))
					sA, sg := cb.dabar*sx+cb.evalA, cb.dg*sx+cb.evalG
					sdA, sdg := db.d2abar*sx+db.evalDA, db.d2g*sx+db.evalDG
					h, sh := hAt(t, n)
					hp, shp := hAt(t-1, n)
					// λ_t = Ā_{t+1}·λ_{t+1} + k·dy·C_t (conjugates for complex A)
					in := k * DY * cv
					slam[n] = next[n]*slam[n] + snext[n]*lam[n] + k*SDY*cv + 2*cf*(next[n]*lam[n]+in)
					// Ā may flush to 0 (an error of η·Λ), as may each rounding
					// of the update (FuzzBackward: e^x subnormal in float32 over
					// a λ of 10⁷ left dinitial_state 0 for 3.5e-33)
					tlam[n] = next[n]*tlam[n] + lam[n] + 2 + tf(append([]float64{k, cv}, dyf...)...)
					lam[n] = next[n]*lam[n] + in
					next[n], snext[n] = cb.abar, sA
					l, sl, tl := lam[n], slam[n], tlam[n]
					pk(next[n], l)
					pk(k, DY, cv)
					pk(math.Abs(dt), cb.g, bv, u)
					adt := math.Abs(dt)
					// dC += k·dy·h
					addSum(sumC, ci, k*(DY*sh+SDY*h+cf*DY*h), k*DY*h, tf(append([]float64{k, h}, dyf...)...)+k*DY*tAt(t, n))
					// dB += λ·Δ·g·u
					addSum(sumB, bi, adt*cb.g*u*sl+l*(cb.g*u*sdt+adt*u*sg)+3*cf*l*adt*cb.g*u, l*adt*cb.g*u,
						tf(l, adt, cb.g, u)+adt*cb.g*u*tl)
					// du += λ·Δ·g·B
					su += adt*cb.g*bv*sl + l*(cb.g*bv*sdt+adt*bv*sg) + 3*cf*l*adt*cb.g*bv
					mu += l * adt * cb.g * bv
					tu += tf(l, adt, cb.g, bv) + adt*cb.g*bv*tl
					// The derivatives' factors as a kernel may form them:
					// bilinear's Ā' = g·g and g' = g·g/2 (g² underflows where
					// Δ·g·g need not: FuzzBackward on the H100, x = 2e30).
					dab, dgs := []float64{cb.dabar}, []float64{cb.dg}
					if p.Method == ssm.Bilinear {
						dab, dgs = []float64{cb.g, cb.g}, []float64{cb.g, cb.g, 0.5}
					}
					ga := absC(a[n])
					with := func(fs []float64, more ...float64) []float64 { return append(append([]float64(nil), fs...), more...) }
					// and the state's own underflow (the forward's T) through Ā'
					thp := cb.dabar*l*tAt(t-1, n) + (cb.dabar*hp+adt*u*bv*cb.dg)*tl
					tdA := tf(with(dab, hp, l, adt)...) + tf(with(dgs, adt, u, bv, l, adt)...) + adt*thp
					tdd += tf(with(dab, hp, l, ga)...) + tf(with(dgs, adt, u, bv, l, ga)...) + tf(l, cb.g, bv, u) + cb.g*bv*u*tl + ga*thp
					// ∂L/∂x = λ·h_{t−1}·Ā' + λ·Δ·u·B·g'
					gx := l*hp*cb.dabar + l*adt*u*bv*cb.dg
					sgx := cb.dabar*(hp*sl+l*shp) + l*hp*sdA + 3*cf*l*hp*cb.dabar +
						adt*u*bv*cb.dg*sl + l*u*bv*(cb.dg*sdt+adt*sdg) + 4*cf*l*adt*u*bv*cb.dg
					if recovered && cb.abar > 0 {
						// Ā'·h_{t−1} as (Ā'/Ā)·(h_t − β_t)
						sgx += l * cb.dabar / cb.abar * (sh + h + 4*adt*cb.g*bv*u)
					}
					// dΔ += λ·g·B·u + a·∂L/∂x
					sdd += cb.g*bv*u*sl + l*bv*u*sg + 3*cf*l*cb.g*bv*u + ga*sgx + cf*ga*gx
					mdd += l*cb.g*bv*u + ga*gx
					// dA += Δ·∂L/∂x
					addSum(sumA, d*N*w+n*w, adt*sgx+gx*sdt+cf*adt*gx, adt*gx, tdA)
				}
				su += float64(N) * mu
				if p.D != nil {
					// du += D·dy and dD += dy·u: products of dy's factors
					// that may flush on the way (FuzzBackward: highorder,
					// complex, fp32, dD of 3.6e-29 off by 0.4 %)
					// D·dy is one more summand of du, in any place of its
					// sum over states (Mamba's backward starts it with
					// D·dy), as D·u in y.
					dd := math.Abs(p.D[d])
					su += dd*SDY + (float64(N)+2)*dd*DY + 2*mu
					tu += tf(append([]float64{dd}, dyf...)...)
					addSum(sumD, d, u*SDY+u*DY, u*DY, tf(append([]float64{u}, dyf...)...))
				}
				sc.U[i], tiny.U[i] = su, float64(2*N+2)+tu
				sdd += 2 * float64(N) * mdd
				if v := p.Delta[i] + biasOf(p, d); p.Softplus && v <= 20 {
					// dΔ·σ(v): σ's own error and that of v (the bias addition)
					sig := 1 / (1 + math.Exp(-v))
					sv := 0.0
					if p.DeltaBias != nil {
						sv = math.Abs(v)
					}
					sdd = sig*sdd + mdd*(sig*(1-sig)*sv+3*sig) + sig*mdd
					// σ(v) of a very negative v flushes to 0 (e^{−v} overflows
					// first): an error of η·|dΔ| (FuzzBackward: v ≈ −92 in float32)
					tdd = sig*tdd + mdd + 2
					mdd *= sig
				}
				sc.Delta[i], tiny.Delta[i] = sdd, float64(4*N+4)+tdd
				if p.DeltaBias != nil {
					sumBias[d].s += sdd
					sumBias[d].mag += mdd
					sumBias[d].t += tdd
					sumBias[d].n++
				}
			}
			if withInitial {
				for n := 0; n < N; n++ {
					j := (row*N + n) * w
					sc.InitialState[j] = next[n]*slam[n] + snext[n]*lam[n] + 2*cf*next[n]*lam[n]
					tiny.InitialState[j] = next[n]*tlam[n] + lam[n] + 4
				}
			}
		}
	}
	finish := func(sum []gradSum, s, t []float64) {
		for j := range sum {
			s[j] = sum[j].s + sum[j].n*sum[j].mag
			t[j] = 4*(sum[j].n+1) + sum[j].t
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
	return &GradScale{Scale: sc, Tiny: tiny, Peak: peak}, nil
}

// gradSum collects the terms of a summed gradient element: their scales,
// their magnitudes, their underflow losses t (units of η) and their number
// n; the sum's scale adds n·Σ|terms|, the rounding of any order of
// summation.
type gradSum struct{ s, mag, t, n float64 }

// addSum adds one term of summed element j (the real word of a complex
// one): its scale s, magnitude m and underflow loss tl.
func addSum(sum []gradSum, j int, s, m, tl float64) {
	sum[j].s += s
	sum[j].mag += m
	sum[j].t += tl
	sum[j].n++
}

func biasOf(p *ssm.Problem, d int) float64 {
	if p.DeltaBias == nil {
		return 0
	}
	return p.DeltaBias[d]
}

// termFlush bounds, in units of prec's smallest normal η, what underflow
// inside the product of the nonnegative factors fs can cost in any order
// of multiplication: a partial product p below η/u (a complex product's
// components may flush before its magnitude does) loses at most p itself
// and at most η, times the product q of the factors after it: at most
// min(η·q, p·q) = min(q, |term|/η) units, twice over for the rounding of
// the flushed value; 0 when a factor is 0. Unlike the forward's flushLoss
// it caps each loss by the term itself: the backward's terms reach
// products of Δ², where η·q alone is far beyond the term (FuzzBackward,
// bilinear at Δ = 10³⁰: g² = 10⁻⁵⁹ flushed while Δ²·g² is 64).
//
// The worst partial product is the smallest one, so no enumeration is
// needed (a term's factors number up to nine, 2⁹ subsets per term per state
// and step, which made FuzzBackward's workers hang at dstate 256): the
// smallest product of two to n − 1 factors is that of every factor below 1
// (the n − 1 smallest if all are), or of the two smallest, and the loss is
// 2·total/max(that, η) units, computed in logarithms.
func termFlush(prec ssm.Precision, fs ...float64) float64 {
	// The common case, decided without logarithms (smallestPartial is +Inf
	// for fewer than three factors).
	if smallestPartial(fs) >= prec.Tiny()/prec.UnitRoundoff() {
		return 0
	}
	return termFlushLogs(prec, fs)
}

// termFlushLogs is termFlush in logarithms, for any factors.
func termFlushLogs(prec ssm.Precision, fs []float64) float64 {
	if len(fs) < 3 {
		return 0 // no partial product between a factor and the whole term
	}
	small := append([]float64(nil), fs...)
	sort.Float64s(small)
	if small[0] == 0 {
		return 0
	}
	// In logarithms: the factors' products may leave float64's range
	// (FuzzBackward in CI: B = 4e-315 times u = 1.4e-76, with Δ² = 1.7e243
	// after them, underflowed the bound itself to 0).
	logTotal := 0.0
	for _, f := range small {
		logTotal += math.Log(f)
	}
	logIn, m := 0.0, 0
	for m < len(small)-1 && small[m] < 1 {
		logIn += math.Log(small[m])
		m++
	}
	if m < 2 {
		logIn = math.Log(small[0]) + math.Log(small[1])
	}
	eta := prec.Tiny()
	if logIn >= math.Log(eta/prec.UnitRoundoff()) {
		return 0
	}
	return 2 * math.Exp(logTotal-math.Max(logIn, math.Log(eta)))
}
