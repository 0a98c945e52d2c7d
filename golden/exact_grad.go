package golden

import (
	"fmt"
	"math/big"

	"ssmverify/ssm"
)

// The golden gradients come from the adjoint of the exact scan, written
// here again in 256-bit arithmetic and sharing no code with package
// reference; TestExactGradMatchesDifferences holds it to central
// differences of the exact scan itself (perturbations of 2⁻⁸⁰, far below
// float64's resolution, which only this arithmetic can make).

// conj is the complex conjugate.
func (a bc) conj() bc { return bc{a.re, bnew().Neg(a.im)} }

// exactDeriv is (dĀ/dx, dg/dx) of method m at x, given (Ā, g) there.
func exactDeriv(m ssm.Method, x, abar, g bc) (da, dg bc, err error) {
	switch m {
	case ssm.ZOH:
		return abar, bcOf(0, 0), nil
	case ssm.FOH:
		if x.zero() {
			return abar, bcOf(0.5, 0), nil
		}
		dg, err = abar.sub(g).quo(x) // (e^x − φ1)/x: 256 bits absorb the cancellation near 0
		return abar, dg, err
	case ssm.Bilinear:
		gg := g.mul(g)
		return gg, gg.scale(bf(0.5)), nil
	case ssm.Poly:
		return abar, bcOf(0.5, 0).add(x.scale(bquo(bf(1), bf(3)))), nil
	case ssm.HighOrder:
		return abar, bcOf(0.5, 0), nil
	case ssm.RK4:
		return abar, bcOf(0.5, 0).add(x.scale(bquo(bf(1), bf(3)))).add(x.mul(x).scale(bf(0.125))), nil
	}
	return bc{}, bc{}, fmt.Errorf("unknown method %v", m)
}

// bsigmoid is 1/(1 + e^−z) (0 where e^−z leaves every range).
func bsigmoid(z *big.Float) *big.Float {
	e, ok := bexp(bnew().Neg(z))
	if !ok {
		return bf(0)
	}
	return bquo(bf(1), badd(bf(1), e))
}

// ExactGrad is the gradients of L = Σ ct.Out·out + Σ ct.LastState·
// last_state with respect to every input of p (ssm.Grads' conventions),
// by the adjoint of the exact scan in 256-bit arithmetic, rounded once to
// float64.
func ExactGrad(p *ssm.Problem, ct *ssm.Cotangent, withInitial bool) (*ssm.Grads, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := ct.Validate(p); err != nil {
		return nil, err
	}
	D, L, N := p.Dim, p.Seqlen, p.Dstate
	w := p.ElemWords()
	elem := func(v []float64, i int) bc {
		if w == 2 {
			return bcOf(v[2*i], v[2*i+1])
		}
		return bcOf(v[i], 0)
	}
	k := bf(float64(w))
	acc := func(n int) []bc {
		s := make([]bc, n)
		for i := range s {
			s[i] = bcOf(0, 0)
		}
		return s
	}
	gA, gB, gC := acc(len(p.A)/w), acc(len(p.B)/w), acc(len(p.C)/w)
	gD, gBias := acc(D), acc(D)
	g := ssm.NewGrads(p, withInitial)
	hs := make([][]bc, L+1)
	type step struct {
		dt, sp  *big.Float // Δ and softplus' derivative
		ab, gg  []bc
		dab, dg []bc
	}
	steps := make([]step, L)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < D; d++ {
			row := b*D + d
			grp := d / (D / p.Groups)
			bIdx := func(variable bool, n, t int) int {
				if variable {
					return ((b*p.Groups+grp)*N+n)*L + t
				}
				return d*N + n
			}
			hs[0] = make([]bc, N)
			for n := range hs[0] {
				hs[0][n] = bcOf(0, 0)
				if p.InitialState != nil {
					hs[0][n] = elem(p.InitialState, row*N+n)
				}
			}
			for t := 0; t < L; t++ {
				i := row*L + t
				v := bf(p.Delta[i])
				if p.DeltaBias != nil {
					v = badd(v, bf(p.DeltaBias[d]))
				}
				st := step{dt: v, sp: bf(1), ab: make([]bc, N), gg: make([]bc, N), dab: make([]bc, N), dg: make([]bc, N)}
				if p.Softplus && v.Cmp(bf(20)) <= 0 {
					e, _ := bexp(v)
					st.dt = blog(badd(bf(1), e))
					st.sp = bsigmoid(v)
				}
				u := bf(p.U[i])
				hs[t+1] = make([]bc, N)
				for n := 0; n < N; n++ {
					x := elem(p.A, d*N+n).scale(st.dt)
					ab, gg, err := exactMethod(p.Method, x)
					if err != nil {
						return nil, fmt.Errorf("golden: exact gradient at b=%d d=%d t=%d n=%d: %w", b, d, t, n, err)
					}
					da, dg, err := exactDeriv(p.Method, x, ab, gg)
					if err != nil {
						return nil, err
					}
					st.ab[n], st.gg[n], st.dab[n], st.dg[n] = ab, gg, da, dg
					hs[t+1][n] = ab.mul(hs[t][n]).add(gg.scale(bmul(st.dt, u)).mul(elem(p.B, bIdx(p.VariableB, n, t))))
				}
				steps[t] = st
			}
			lam := make([]bc, N)
			next := make([]bc, N)
			for n := range lam {
				lam[n], next[n] = bcOf(0, 0), bcOf(1, 0)
				if ct.LastState != nil {
					lam[n] = elem(ct.LastState, row*N+n)
				}
			}
			for t := L - 1; t >= 0; t-- {
				i := row*L + t
				st := steps[t]
				u := bf(p.U[i])
				y := bcOf(0, 0)
				for n := 0; n < N; n++ {
					y = y.add(elem(p.C, bIdx(p.VariableC, n, t)).mul(hs[t+1][n]))
				}
				yr := bmul(k, y.re)
				if p.D != nil {
					yr = badd(yr, bmul(bf(p.D[d]), u))
				}
				dy := bf(ct.Out[i])
				if p.Z != nil {
					z := bf(p.Z[i])
					s := bsigmoid(z)
					dsilu := bmul(s, badd(bf(1), bmul(z, bsub(bf(1), s))))
					g.Z[i], _ = bmul(bmul(dy, yr), dsilu).Float64()
					dy = bmul(dy, bmul(z, s))
				}
				du, ddt := bf(0), bf(0)
				for n := 0; n < N; n++ {
					bi, ci := bIdx(p.VariableB, n, t), bIdx(p.VariableC, n, t)
					bv, cv := elem(p.B, bi), elem(p.C, ci)
					a := elem(p.A, d*N+n)
					lam[n] = next[n].conj().mul(lam[n]).add(cv.conj().scale(bmul(k, dy)))
					l := lam[n]
					gC[ci] = gC[ci].add(hs[t+1][n].conj().scale(bmul(k, dy)))
					dtu := bmul(st.dt, u)
					gB[bi] = gB[bi].add(st.gg[n].conj().mul(l).scale(dtu))
					lgb := l.mul(st.gg[n].mul(bv).conj())
					du = badd(du, bmul(lgb.re, st.dt))
					gx := st.dab[n].conj().mul(hs[t][n].conj()).mul(l).add(st.dg[n].conj().mul(bv.conj()).mul(l).scale(dtu))
					ddt = badd(ddt, badd(bmul(lgb.re, u), gx.mul(a.conj()).re))
					gA[d*N+n] = gA[d*N+n].add(gx.scale(st.dt))
					next[n] = st.ab[n]
				}
				if p.D != nil {
					du = badd(du, bmul(dy, bf(p.D[d])))
					gD[d] = gD[d].add(bc{bmul(dy, u), bf(0)})
				}
				ddt = bmul(ddt, st.sp)
				g.U[i], _ = du.Float64()
				g.Delta[i], _ = ddt.Float64()
				gBias[d] = gBias[d].add(bc{ddt, bf(0)})
			}
			if withInitial {
				for n := 0; n < N; n++ {
					v := next[n].conj().mul(lam[n])
					put(g.InitialState, row*N+n, v, w)
				}
			}
		}
	}
	for i, v := range gA {
		put(g.A, i, v, w)
	}
	for i, v := range gB {
		put(g.B, i, v, w)
	}
	for i, v := range gC {
		put(g.C, i, v, w)
	}
	if p.D != nil {
		for i, v := range gD {
			g.D[i], _ = v.re.Float64()
		}
	}
	if p.DeltaBias != nil {
		for i, v := range gBias {
			g.DeltaBias[i], _ = v.re.Float64()
		}
	}
	return g, nil
}

// put rounds v into element i of s (w words per element).
func put(s []float64, i int, v bc, w int) {
	s[w*i], _ = v.re.Float64()
	if w == 2 {
		s[2*i+1], _ = v.im.Float64()
	}
}

// exactLoss is L = Σ ct.Out·out + Σ ct.LastState·last_state of the exact
// scan of p with the perturbation pert, in 256 bits.
func exactLoss(p *ssm.Problem, ct *ssm.Cotangent, pert *inputs) (*big.Float, error) {
	ys, hs, err := exactScan(p, pert)
	if err != nil {
		return nil, err
	}
	l := bf(0)
	for i, y := range ys {
		l = badd(l, bmul(bf(ct.Out[i]), y))
	}
	for k, h := range hs {
		if ct.LastState == nil {
			break
		}
		if p.Complex {
			l = badd(l, badd(bmul(bf(ct.LastState[2*k]), h.re), bmul(bf(ct.LastState[2*k+1]), h.im)))
		} else {
			l = badd(l, bmul(bf(ct.LastState[k]), h.re))
		}
	}
	return l, nil
}
