package mamba1

import (
	"fmt"
	"math"

	"ssmverify/ssm"

	"gonum.org/v1/gonum/mat"
)

// ExpFrechet returns L(X, E) = d/dε e^{X+εE} at ε = 0, the Fréchet
// derivative of the matrix exponential at X in the direction E, by scaling
// and squaring on the derivative: with Y = X/2^s, F = E/2^s and
// ‖Y‖₁ ≤ 1/4, e^Y and L(Y, F) come from their Taylor series together
// (T_k = Y·T_{k−1}/k, D_k = (F·T_{k−1} + Y·D_{k−1})/k, the derivative of
// (Y + εF)^k/k!), and then s times L ← L·e^Y + e^Y·L, e^Y ← e^Y·e^Y (the
// derivative of e^{2Y} = e^Y·e^Y). It shares no code with Van Loan's
// block-triangular exponential, exp([[X, E], [0, X]]) = [[e^X, L], [0, e^X]],
// against which it is tested. A non-finite X gives NaNs.
func ExpFrechet(X, E mat.Matrix) *mat.Dense {
	n, _ := X.Dims()
	if nx := mat.Norm(X, 1); math.IsInf(nx, 0) || math.IsNaN(nx) {
		// no finite derivative; and no squaring count would reach it
		nan := mat.NewDense(n, n, nil)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				nan.Set(i, j, math.NaN())
			}
		}
		return nan
	}
	s := 0
	for norm := mat.Norm(X, 1); norm > 0.25; norm /= 2 {
		s++
	}
	scale := 1.0
	for i := 0; i < s; i++ {
		scale /= 2
	}
	var Y, F mat.Dense
	Y.Scale(scale, X)
	F.Scale(scale, E)
	T, D := identity(n), mat.NewDense(n, n, nil)
	expY, L := identity(n), mat.NewDense(n, n, nil)
	for k := 1; k < 60; k++ {
		var t1, d1, d2 mat.Dense
		d1.Mul(&F, T)
		d2.Mul(&Y, D)
		d1.Add(&d1, &d2)
		d1.Scale(1/float64(k), &d1)
		t1.Mul(&Y, T)
		t1.Scale(1/float64(k), &t1)
		T, D = &t1, &d1
		expY.Add(expY, T)
		L.Add(L, D)
		if mat.Norm(T, 1)+mat.Norm(D, 1) < 1e-20*(mat.Norm(expY, 1)+mat.Norm(L, 1)) {
			break
		}
	}
	for i := 0; i < s; i++ {
		var a, b, e mat.Dense
		a.Mul(L, expY)
		b.Mul(expY, L)
		L.Add(&a, &b)
		e.Mul(expY, expY)
		expY = &e
	}
	return L
}

// DiscretizeDeriv returns the directional derivatives (dĀ, dB̄) of
// Discretize's matrix forms at (Δ, A, B) in the direction (dΔ, dA, dB):
// with X = ΔA, dX = dΔ·A + Δ·dA and d(ΔB) = dΔ·B + Δ·dB,
//
//	e^X methods   dĀ = L(X, dX) (ExpFrechet)
//	zoh           dB̄ = d(ΔB)
//	foh           (dĀ, dB̄) the blocks of L([[X, ΔB], [0, 0]], [[dX, d(ΔB)], [0, 0]])
//	bilinear      W = (I − X/2)⁻¹: dĀ = W·(dX/2)·(Ā + I), dB̄ = W·(dX/2)·B̄ + W·d(ΔB)
//	polynomials   dB̄ = dg·ΔB + g·d(ΔB), dg by differentiating Horner's rule
//
// For diagonal A they are the scalar CoefDeriv applied entry by entry.
func DiscretizeDeriv(m ssm.Method, delta float64, A, B mat.Matrix, dDelta float64, dA, dB mat.Matrix) (dAbar, dBbar *mat.Dense, err error) {
	Abar, Bbar, err := Discretize(m, delta, A, B)
	if err != nil {
		return nil, nil, err
	}
	n, _ := A.Dims()
	_, k := B.Dims()
	if r, c := dA.Dims(); r != n || c != n {
		return nil, nil, fmt.Errorf("DiscretizeDeriv: dA is %d×%d, want %d×%d like A", r, c, n, n)
	}
	if r, c := dB.Dims(); r != n || c != k {
		return nil, nil, fmt.Errorf("DiscretizeDeriv: dB is %d×%d, want %d×%d like B", r, c, n, k)
	}
	var X, dX, t, dDB, DB mat.Dense
	X.Scale(delta, A)
	dX.Scale(dDelta, A)
	t.Scale(delta, dA)
	dX.Add(&dX, &t)
	DB.Scale(delta, B)
	dDB.Scale(dDelta, B)
	t.Reset()
	t.Scale(delta, dB)
	dDB.Add(&dDB, &t)

	switch m {
	case ssm.Bilinear:
		W := identity(n)
		var half mat.Dense
		half.Scale(0.5, &X)
		W.Sub(W, &half)
		var lu mat.LU
		lu.Factorize(W)
		var hdX, ap1, rhsA, rhsB mat.Dense
		hdX.Scale(0.5, &dX)
		ap1.Add(Abar, identity(n))
		rhsA.Mul(&hdX, &ap1)
		dAbar = mat.NewDense(n, n, nil)
		if err := lu.SolveTo(dAbar, false, &rhsA); err != nil {
			return nil, nil, fmt.Errorf("DiscretizeDeriv: bilinear dĀ: %w", err)
		}
		rhsB.Mul(&hdX, Bbar)
		rhsB.Add(&rhsB, &dDB)
		dBbar = mat.NewDense(n, k, nil)
		if err := lu.SolveTo(dBbar, false, &rhsB); err != nil {
			return nil, nil, fmt.Errorf("DiscretizeDeriv: bilinear dB̄: %w", err)
		}
		return dAbar, dBbar, nil
	case ssm.FOH:
		M, dM := mat.NewDense(n+k, n+k, nil), mat.NewDense(n+k, n+k, nil)
		M.Slice(0, n, 0, n).(*mat.Dense).Copy(&X)
		M.Slice(0, n, n, n+k).(*mat.Dense).Copy(&DB)
		dM.Slice(0, n, 0, n).(*mat.Dense).Copy(&dX)
		dM.Slice(0, n, n, n+k).(*mat.Dense).Copy(&dDB)
		L := ExpFrechet(M, dM)
		return mat.DenseCopyOf(L.Slice(0, n, 0, n)), mat.DenseCopyOf(L.Slice(0, n, n, n+k)), nil
	}
	dAbar = ExpFrechet(&X, &dX)
	coeffs := taylorCoeffs[m]
	// Horner's rule and its derivative: G ← X·G + c·I, dG ← dX·G + X·dG.
	G := identity(n)
	G.Scale(coeffs[len(coeffs)-1], G)
	dG := mat.NewDense(n, n, nil)
	for i := len(coeffs) - 2; i >= 0; i-- {
		var nd, a, ng mat.Dense
		nd.Mul(&dX, G)
		a.Mul(&X, dG)
		nd.Add(&nd, &a)
		ng.Mul(&X, G)
		c := identity(n)
		c.Scale(coeffs[i], c)
		ng.Add(&ng, c)
		G, dG = &ng, &nd
	}
	var p1, p2 mat.Dense
	p1.Mul(dG, &DB)
	p2.Mul(G, &dDB)
	p1.Add(&p1, &p2)
	return dAbar, &p1, nil
}
