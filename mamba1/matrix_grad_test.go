package mamba1

import (
	"math"
	"testing"

	"ssmverify/ssm"

	"gonum.org/v1/gonum/mat"
	"pgregory.net/rapid"
)

// relDiff is ‖a − b‖₁ / max(‖b‖₁, floor).
func relDiff(a, b mat.Matrix, floor float64) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, 1) / max(mat.Norm(b, 1), floor)
}

// ExpFrechet against Van Loan's block-triangular exponential (gonum's
// scaling-and-squaring Padé exp of [[X, E], [0, X]], whose top-right block
// is L(X, E)), for random X up to ‖X‖ ≈ 8 and random directions of norm 1.
func TestPropExpFrechetVanLoan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "n")
		X, E := drawMatrix(t, n, n, "X"), drawMatrix(t, n, n, "E")
		X.Scale(rapid.Float64Range(0, 8).Draw(t, "‖X‖ scale"), X)
		// L is linear in E; Van Loan's block exponential errs by u times the
		// block's norm, so E is taken of norm 1 (or 0)
		ne := mat.Norm(E, 1)
		if ne < 1e-200 {
			t.Skip("E is 0 to working precision") // 1/‖E‖ would overflow
		}
		E.Scale(1/ne, E)
		blk := mat.NewDense(2*n, 2*n, nil)
		blk.Slice(0, n, 0, n).(*mat.Dense).Copy(X)
		blk.Slice(n, 2*n, n, 2*n).(*mat.Dense).Copy(X)
		blk.Slice(0, n, n, 2*n).(*mat.Dense).Copy(E)
		var e mat.Dense
		e.Exp(blk)
		want := e.Slice(0, n, n, 2*n)
		got := ExpFrechet(X, E)
		// both backward stable: errors of a few u times exp's condition,
		// which grows like ‖X‖
		if r := relDiff(got, want, 1e-300); r > 1e-13*(1+mat.Norm(X, 1)) {
			t.Fatalf("‖ExpFrechet − Van Loan‖/‖Van Loan‖ = %.3g at ‖X‖₁ = %.3g", r, mat.Norm(X, 1))
		}
	})
}

// DiscretizeDeriv against Richardson-extrapolated central differences of
// Discretize, every method, general (non-diagonal) A, every direction.
func TestPropDiscretizeDerivDifferences(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		n, k := rapid.IntRange(1, 4).Draw(t, "n"), rapid.IntRange(1, 3).Draw(t, "k")
		A, B := drawMatrix(t, n, n, "A"), drawMatrix(t, n, k, "B")
		if m == ssm.Bilinear { // keep I − ΔA/2 far from singular
			A.Scale(0.5, A)
		}
		delta := rapid.Float64Range(0.05, 1.5).Draw(t, "Δ")
		dDelta := rapid.Float64Range(-1, 1).Draw(t, "dΔ")
		dA, dB := drawMatrix(t, n, n, "dA"), drawMatrix(t, n, k, "dB")
		gotA, gotB, err := DiscretizeDeriv(m, delta, A, B, dDelta, dA, dB)
		if err != nil {
			t.Fatal(err)
		}
		at := func(eps float64) (*mat.Dense, *mat.Dense) {
			var a, b mat.Dense
			a.Scale(eps, dA)
			a.Add(A, &a)
			b.Scale(eps, dB)
			b.Add(B, &b)
			x, y, err := Discretize(m, delta+eps*dDelta, &a, &b)
			if err != nil {
				t.Fatal(err)
			}
			return x, y
		}
		diff := func(h float64) (*mat.Dense, *mat.Dense) {
			a2, b2 := at(2 * h)
			a1, b1 := at(h)
			am1, bm1 := at(-h)
			am2, bm2 := at(-2 * h)
			comb := func(p2, p1, m1, m2 *mat.Dense) *mat.Dense {
				r, c := p1.Dims()
				out := mat.NewDense(r, c, nil)
				for i := 0; i < r; i++ {
					for j := 0; j < c; j++ {
						out.Set(i, j, (-p2.At(i, j)+8*p1.At(i, j)-8*m1.At(i, j)+m2.At(i, j))/(12*h))
					}
				}
				return out
			}
			return comb(a2, a1, am1, am2), comb(b2, b1, bm1, bm2)
		}
		const h = 1e-3
		ha, hb := diff(h)
		qa, qb := diff(h / 2)
		var wantA, wantB mat.Dense
		wantA.Scale(16.0/15, qa)
		ha.Scale(1.0/15, ha)
		wantA.Sub(&wantA, ha)
		wantB.Scale(16.0/15, qb)
		hb.Scale(1.0/15, hb)
		wantB.Sub(&wantB, hb)
		if r := relDiff(gotA, &wantA, 1e-3); r > 1e-8 {
			t.Fatalf("%v: dĀ off the differences by %.3g (relative)", m, r)
		}
		if r := relDiff(gotB, &wantB, 1e-3); r > 1e-8 {
			t.Fatalf("%v: dB̄ off the differences by %.3g (relative)", m, r)
		}
	})
}

// For diagonal A the matrix derivatives are the scalar ones entry by entry:
// dĀ_ii = Ā'(x_i)·(dΔ·a_i + Δ·dA_ii) and dB̄_ij = (dΔ·g + Δ·g'(x_i)·(dΔ·a_i +
// Δ·dA_ii))·B_ij + Δ·g·dB_ij, with CoefDeriv's Ā' and g'.
func TestPropDiscretizeDerivDiagonalIsScalar(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		n := rapid.IntRange(1, 4).Draw(t, "n")
		a := rapid.SliceOfN(rapid.Float64Range(-3, 0.5), n, n).Draw(t, "a")
		da := rapid.SliceOfN(rapid.Float64Range(-1, 1), n, n).Draw(t, "da")
		A, dA := mat.NewDiagDense(n, a), mat.NewDiagDense(n, da)
		B, dB := drawMatrix(t, n, 2, "B"), drawMatrix(t, n, 2, "dB")
		delta, dDelta := rapid.Float64Range(0.05, 1).Draw(t, "Δ"), rapid.Float64Range(-1, 1).Draw(t, "dΔ")
		gotA, gotB, err := DiscretizeDeriv(m, delta, A, B, dDelta, dA, dB)
		if err != nil {
			t.Fatal(err)
		}
		wantA, wantB := mat.NewDense(n, n, nil), mat.NewDense(n, 2, nil)
		for i := 0; i < n; i++ {
			x := delta * a[i]
			_, g := Real(m, x)
			dab, dg := CoefDeriv(m, complex(x, 0))
			dx := dDelta*a[i] + delta*da[i]
			wantA.Set(i, i, real(dab)*dx)
			for j := 0; j < 2; j++ {
				wantB.Set(i, j, (dDelta*g+delta*real(dg)*dx)*B.At(i, j)+delta*g*dB.At(i, j))
			}
		}
		if r := relDiff(gotA, wantA, 1e-3); r > 1e-13 {
			t.Fatalf("%v: diagonal dĀ off the scalar form by %.3g", m, r)
		}
		if r := relDiff(gotB, wantB, 1e-3); r > 1e-13 {
			t.Fatalf("%v: diagonal dB̄ off the scalar form by %.3g", m, r)
		}
	})
}

// A non-finite X has no derivative: NaNs, promptly (a squaring count from
// an infinite norm would never end).
func TestExpFrechetNonFinite(t *testing.T) {
	X := mat.NewDense(2, 2, []float64{math.Inf(1), 0, 0, 1})
	L := ExpFrechet(X, mat.NewDense(2, 2, []float64{1, 0, 0, 1}))
	if !math.IsNaN(L.At(0, 0)) || !math.IsNaN(L.At(1, 1)) {
		t.Fatalf("ExpFrechet(+Inf) = %v, want NaNs", mat.Formatted(L))
	}
}
