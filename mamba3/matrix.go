package mamba3

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// MatrixCoefficients is the rule for a general state matrix A (the
// matrix form): over a step Δ with weight λ,
//
//	h_t = Ā·h_{t−1} + B̄_prev·u_{t−1} + B̄·u_t,
//	Ā = e^{ΔA},  B̄_prev = (1 − λ)·Δ·e^{ΔA}·B,  B̄ = λ·Δ·B,
//
// e^{ΔA} by gonum's scaling-and-squaring Padé exponential. For diagonal A
// it is the scalar rule (Coefficients) on each diagonal entry.
func MatrixCoefficients(A, B mat.Matrix, dt, lambda float64) (Abar, BbarPrev, Bbar *mat.Dense, err error) {
	n, c := A.Dims()
	if n != c || n == 0 {
		return nil, nil, nil, fmt.Errorf("mamba3.MatrixCoefficients: A is %d×%d, want a non-empty square matrix", n, c)
	}
	if br, k := B.Dims(); br != n || k == 0 {
		return nil, nil, nil, fmt.Errorf("mamba3.MatrixCoefficients: B is %d×%d, want %d rows and at least one column", br, k, n)
	}
	var dA mat.Dense
	dA.Scale(dt, A)
	Abar = &mat.Dense{}
	Abar.Exp(&dA)
	BbarPrev, Bbar = &mat.Dense{}, &mat.Dense{}
	BbarPrev.Mul(Abar, B)
	BbarPrev.Scale((1-lambda)*dt, BbarPrev)
	Bbar.Scale(lambda*dt, B)
	return Abar, BbarPrev, Bbar, nil
}
