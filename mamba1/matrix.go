package mamba1

import (
	"fmt"

	"ssmverify/ssm"

	"gonum.org/v1/gonum/mat"
)

// Discretize returns the matrix forms (Ā, B̄) of method m for a general
// (not necessarily diagonal) real state matrix A (n×n), input matrix B (n×k)
// and step Δ:
//
//	zoh        Ā = e^{ΔA}                    B̄ = ΔB
//	foh        Ā = e^{ΔA}                    B̄ = A⁻¹(e^{ΔA} − I)B = Δ·φ1(ΔA)·B
//	bilinear   Ā = (I − ΔA/2)⁻¹(I + ΔA/2)    B̄ = (I − ΔA/2)⁻¹ΔB
//	poly       Ā = e^{ΔA}                    B̄ = Δ(I + ΔA/2 + (ΔA)²/6)B
//	highorder  Ā = e^{ΔA}                    B̄ = Δ(I + ΔA/2)B
//	rk4        Ā = e^{ΔA}                    B̄ = Δ(I + ΔA/2 + (ΔA)²/6 + (ΔA)³/24)B
//
// e^{ΔA} is gonum's scaling-and-squaring Padé exponential. foh never inverts
// A: the top-right block of exp([[ΔA, ΔB], [0, 0]]) is ∫₀^Δ e^{sA} ds·B, which
// equals A⁻¹(e^{ΔA} − I)B when A is invertible and stays right when it is
// singular. bilinear solves with an LU factorisation rather than forming the
// inverse; a singular I − ΔA/2 is an error. For diagonal A every one of these
// equals the scalar form applied to each diagonal entry.
func Discretize(m ssm.Method, delta float64, A, B mat.Matrix) (Abar, Bbar *mat.Dense, err error) {
	n, c := A.Dims()
	if n != c || n == 0 {
		return nil, nil, fmt.Errorf("Discretize: A is %d×%d, want a non-empty square matrix", n, c)
	}
	br, k := B.Dims()
	if br != n || k == 0 {
		return nil, nil, fmt.Errorf("Discretize: B is %d×%d, want %d rows and at least one column", br, k, n)
	}
	if !m.Valid() {
		return nil, nil, fmt.Errorf("Discretize: %v is not a method", m)
	}
	dA := mat.NewDense(n, n, nil)
	dA.Scale(delta, A)
	dB := mat.NewDense(n, k, nil)
	dB.Scale(delta, B)

	switch m {
	case ssm.Bilinear:
		lhs := identity(n)
		rhs := identity(n)
		var half mat.Dense
		half.Scale(0.5, dA)
		lhs.Sub(lhs, &half)
		rhs.Add(rhs, &half)
		var lu mat.LU
		lu.Factorize(lhs)
		if lu.Det() == 0 {
			return nil, nil, fmt.Errorf("Discretize: I − ΔA/2 is singular (Δ = %g)", delta)
		}
		Abar = mat.NewDense(n, n, nil)
		Bbar = mat.NewDense(n, k, nil)
		if err := lu.SolveTo(Abar, false, rhs); err != nil {
			return nil, nil, fmt.Errorf("Discretize: bilinear Ā: %w", err)
		}
		if err := lu.SolveTo(Bbar, false, dB); err != nil {
			return nil, nil, fmt.Errorf("Discretize: bilinear B̄: %w", err)
		}
		return Abar, Bbar, nil
	case ssm.FOH:
		// exp([[ΔA, N], [0, 0]]) = [[e^{ΔA}, ∫₀^Δ e^{sA}ds·N/Δ], [0, I]] is
		// linear in N, so N = ΔB/s is scaled to the 1-norm of ΔA and the
		// block rescaled by s afterwards. The augmented matrix's 1-norm (a max
		// over columns) is then ‖ΔA‖₁: the exponential takes as few
		// squarings, and is as accurate, as e^{ΔA} alone.
		s := 1.0
		if nb := mat.Norm(dB, 1); nb > 0 {
			target := mat.Norm(dA, 1)
			if target == 0 {
				target = 1
			}
			s = nb / target
		}
		aug := mat.NewDense(n+k, n+k, nil)
		aug.Slice(0, n, 0, n).(*mat.Dense).Copy(dA)
		aug.Slice(0, n, n, n+k).(*mat.Dense).Scale(1/s, dB)
		var e mat.Dense
		e.Exp(aug)
		Abar = mat.DenseCopyOf(e.Slice(0, n, 0, n))
		Bbar = mat.NewDense(n, k, nil)
		Bbar.Scale(s, e.Slice(0, n, n, n+k))
		return Abar, Bbar, nil
	}

	Abar = mat.NewDense(n, n, nil)
	Abar.Exp(dA)
	// g(ΔA) by Horner's rule on matrices: c0·I + ΔA(c1·I + ΔA(c2·I + …)).
	coeffs := taylorCoeffs[m]
	g := identity(n)
	g.Scale(coeffs[len(coeffs)-1], g)
	for i := len(coeffs) - 2; i >= 0; i-- {
		var t mat.Dense
		t.Mul(dA, g)
		g = identity(n)
		g.Scale(coeffs[i], g)
		g.Add(g, &t)
	}
	Bbar = mat.NewDense(n, k, nil)
	Bbar.Mul(g, dB)
	return Abar, Bbar, nil
}

// taylorCoeffs are the coefficients c0, c1, … of g(x) = Σ cᵢ·xⁱ for the
// methods whose g is a polynomial (zoh's is 1), for Discretize and
// DiscretizeDeriv's Horner's rule on matrices.
var taylorCoeffs = map[ssm.Method][]float64{
	ssm.ZOH:       {1},
	ssm.HighOrder: {1, 1.0 / 2},
	ssm.Poly:      {1, 1.0 / 2, 1.0 / 6},
	ssm.RK4:       {1, 1.0 / 2, 1.0 / 6, 1.0 / 24},
}

func identity(n int) *mat.Dense {
	d := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		d.Set(i, i, 1)
	}
	return d
}
