package mamba1

import (
	"math"
	"testing"

	"ssmverify/ssm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
	"pgregory.net/rapid"
)

func drawMatrix(t *rapid.T, r, c int, label string) *mat.Dense {
	d := rapid.SliceOfN(rapid.Float64Range(-1, 1), r*c, r*c).Draw(t, label)
	return mat.NewDense(r, c, d)
}

// ulps is the distance between a and b in units of b's ulp (b's exponent,
// at least the smallest normal's).
func ulps(a, b float64) float64 {
	if a == b {
		return 0
	}
	e := math.Max(math.Abs(b), 0x1p-1022)
	ulp := math.Nextafter(e, math.Inf(1)) - e
	return math.Abs(a-b) / ulp
}

// For diagonal A the matrix forms equal the scalar forms entry by entry, to
// a few ulp: within 4·(1 + max|x|) ulp while max|x| ≤ 2 and 64·(1 + max|x|)
// ulp up to max|x| = 20. The growth is exp's conditioning, not a defect:
// gonum's scaling-and-squaring Padé exponential is backward stable in ΔA,
// so its relative error grows like ‖ΔA‖·u. Measured over 50,000 random
// diagonals: at most 10 ulp and 3.5·(1 + max|x|) ulp for max|x| ≤ 2;
// 46·(1 + max|x|) ulp at max|x| = 5.4, the edge of the degree-13
// approximant. Off-diagonal entries stay exactly 0.
func TestPropMatrixDiagonalEqualsScalar(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		n := rapid.IntRange(1, 8).Draw(t, "n")
		k := rapid.IntRange(1, 3).Draw(t, "k")
		a := make([]float64, n)
		maxAbs := 0.0
		for i := range a {
			a[i] = real(drawA(t, false, 1e-3, 3, 0))
			maxAbs = math.Max(maxAbs, math.Abs(a[i]))
		}
		delta := logUniform(t, 1e-4, 20, "ln(Δ·max|a|)") / maxAbs
		if m == ssm.Bilinear {
			for _, ai := range a {
				if math.Abs(1-delta*ai/2) < 0.1 {
					t.Skip("too close to bilinear's pole for an ulp comparison")
				}
			}
		}
		xmax := delta * maxAbs
		tol := 4 * (1 + xmax)
		if xmax > 2 {
			tol = 64 * (1 + xmax)
		}
		B := drawMatrix(t, n, k, "B")
		Abar, Bbar, err := Discretize(m, delta, mat.NewDiagDense(n, a), B)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			sa, sg := Real(m, delta*a[i])
			for j := 0; j < n; j++ {
				got := Abar.At(i, j)
				if i != j && got != 0 {
					t.Fatalf("%v: Ā[%d,%d] = %g, want 0 for diagonal A", m, i, j, got)
				}
				if i == j && ulps(got, sa) > tol {
					t.Fatalf("%v: Ā[%d,%d] = %.17g, scalar %.17g (%.0f ulp) at x = %g", m, i, i, got, sa, ulps(got, sa), delta*a[i])
				}
			}
			for j := 0; j < k; j++ {
				want := delta * sg * B.At(i, j)
				got := Bbar.At(i, j)
				// The augmented exponential's error is relative to the
				// block's norm, so compare against Δ·|B| as well.
				scale := math.Max(math.Abs(want), delta*math.Abs(B.At(i, j)))
				if math.Abs(got-want) > tol*u64*2*scale+0x1p-1020 { // + a subnormal floor
					t.Fatalf("%v: B̄[%d,%d] = %.17g, scalar %.17g at x = %g", m, i, j, got, want, delta*a[i])
				}
			}
		}
	})
}

// similar builds A = S·D·S⁻¹ for a well-conditioned random S, so that any
// function of A is known in closed form: f(A) = S·f(D)·S⁻¹.
func similar(t *rapid.T, n int) (A, S, Sinv *mat.Dense, eig []float64, cond float64) {
	S = drawMatrix(t, n, n, "S")
	for i := 0; i < n; i++ {
		S.Set(i, i, S.At(i, i)+3) // diagonally dominant: cond(S) stays small
	}
	Sinv = mat.NewDense(n, n, nil)
	if err := Sinv.Inverse(S); err != nil {
		t.Fatalf("S is singular: %v", err)
	}
	eig = make([]float64, n)
	for i := range eig {
		eig[i] = real(drawA(t, false, 1e-2, 2, 0))
	}
	A = mat.NewDense(n, n, nil)
	A.Product(S, mat.NewDiagDense(n, eig), Sinv)
	return A, S, Sinv, eig, mat.Cond(S, 2)
}

func maxAbsDiff(a, b mat.Matrix) (diff, norm float64) {
	r, c := a.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			diff = math.Max(diff, math.Abs(a.At(i, j)-b.At(i, j)))
			norm = math.Max(norm, math.Abs(b.At(i, j)))
		}
	}
	return diff, norm
}

// Every matrix form against its eigendecomposition: for diagonalizable
// A = S·D·S⁻¹, Ā = S·Ā(ΔD)·S⁻¹ and B̄ = S·diag(Δ·g(ΔD))·S⁻¹·B. The
// tolerance is 64·n·cond(S)²·u relative to the largest entry: forming
// S·f(D)·S⁻¹ amplifies rounding by cond(S) on each side.
func TestPropMatrixEigendecomposition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		n := rapid.IntRange(2, 6).Draw(t, "n")
		A, S, Sinv, eig, cond := similar(t, n)
		delta := rapid.Float64Range(0.01, 1.5).Draw(t, "Δ")
		if m == ssm.Bilinear {
			for _, e := range eig {
				if math.Abs(1-delta*e/2) < 0.1 {
					t.Skip("too close to bilinear's pole")
				}
			}
		}
		B := drawMatrix(t, n, 2, "B")
		Abar, Bbar, err := Discretize(m, delta, A, B)
		if err != nil {
			t.Fatal(err)
		}
		fa, fg := make([]float64, n), make([]float64, n)
		for i, e := range eig {
			a, g := Real(m, delta*e)
			fa[i], fg[i] = a, delta*g
		}
		wantA := mat.NewDense(n, n, nil)
		wantA.Product(S, mat.NewDiagDense(n, fa), Sinv)
		wantB := mat.NewDense(n, 2, nil)
		wantB.Product(S, mat.NewDiagDense(n, fg), Sinv, B)
		tol := 64 * float64(n) * cond * cond * u64
		if d, nrm := maxAbsDiff(Abar, wantA); d > tol*nrm {
			t.Fatalf("%v: Ā differs from S·Ā(ΔD)·S⁻¹ by %g (norm %g, tol %g)", m, d, nrm, tol*nrm)
		}
		if d, nrm := maxAbsDiff(Bbar, wantB); d > tol*nrm {
			t.Fatalf("%v: B̄ differs from S·diag(Δg)·S⁻¹·B by %g (norm %g, tol %g)", m, d, nrm, tol*nrm)
		}
	})
}

// zoh for A with complex eigenvalues: A = S·blockdiag([[α, −β], [β, α]])·S⁻¹
// has e^{ΔA} = S·blockdiag(e^{Δα}·[[cos Δβ, −sin Δβ], [sin Δβ, cos Δβ]])·S⁻¹.
func TestPropMatrixZohOscillatory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pairs := rapid.IntRange(1, 3).Draw(t, "pairs")
		n := 2 * pairs
		S, _, _, _, _ := similar(t, n)
		Sinv := mat.NewDense(n, n, nil)
		if err := Sinv.Inverse(S); err != nil {
			t.Fatal(err)
		}
		J, E := mat.NewDense(n, n, nil), mat.NewDense(n, n, nil)
		delta := rapid.Float64Range(0.01, 1).Draw(t, "Δ")
		for p := 0; p < pairs; p++ {
			al := rapid.Float64Range(-2, 0.5).Draw(t, "α")
			be := rapid.Float64Range(0.1, 6).Draw(t, "β")
			i := 2 * p
			J.Set(i, i, al)
			J.Set(i, i+1, -be)
			J.Set(i+1, i, be)
			J.Set(i+1, i+1, al)
			e, c, s := math.Exp(delta*al), math.Cos(delta*be), math.Sin(delta*be)
			E.Set(i, i, e*c)
			E.Set(i, i+1, -e*s)
			E.Set(i+1, i, e*s)
			E.Set(i+1, i+1, e*c)
		}
		A, want := mat.NewDense(n, n, nil), mat.NewDense(n, n, nil)
		A.Product(S, J, Sinv)
		want.Product(S, E, Sinv)
		Abar, _, err := Discretize(ssm.ZOH, delta, A, mat.NewDense(n, 1, nil))
		if err != nil {
			t.Fatal(err)
		}
		cond := mat.Cond(S, 2)
		tol := 64 * float64(n) * cond * cond * u64
		if d, nrm := maxAbsDiff(Abar, want); d > tol*nrm {
			t.Fatalf("e^{ΔA} differs from the rotation form by %g (norm %g, tol %g)", d, nrm, tol*nrm)
		}
	})
}

// zoh against gonum's symmetric eigendecomposition: for symmetric A =
// Q·Λ·Qᵀ, e^{ΔA} = Q·e^{ΔΛ}·Qᵀ.
func TestPropMatrixZohSymmetricEigen(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		R := drawMatrix(t, n, n, "R")
		A := mat.NewSymDense(n, nil)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				A.SetSym(i, j, (R.At(i, j)+R.At(j, i))*2)
			}
		}
		var es mat.EigenSym
		if !es.Factorize(A, true) {
			t.Fatal("EigenSym failed")
		}
		var Q mat.Dense
		es.VectorsTo(&Q)
		delta := rapid.Float64Range(0.01, 1).Draw(t, "Δ")
		vals := es.Values(nil)
		for i := range vals {
			vals[i] = math.Exp(delta * vals[i])
		}
		want := mat.NewDense(n, n, nil)
		want.Product(&Q, mat.NewDiagDense(n, vals), Q.T())
		Abar, _, err := Discretize(ssm.ZOH, delta, A, mat.NewDense(n, 1, nil))
		if err != nil {
			t.Fatal(err)
		}
		tol := 256 * float64(n) * u64
		if d, nrm := maxAbsDiff(Abar, want); d > tol*nrm {
			t.Fatalf("e^{ΔA} differs from Q·e^{ΔΛ}·Qᵀ by %g (norm %g, tol %g)", d, nrm, tol*nrm)
		}
	})
}

// foh for singular A, where A⁻¹(e^{ΔA} − I) has no inverse to use but the
// integral ∫₀^Δ e^{sA} ds does: A = 0 gives B̄ = ΔB; the nilpotent
// A = [[0, 1], [0, 0]] gives e^{ΔA} = I + ΔA and B̄ = (ΔI + Δ²A/2)B.
func TestMatrixFohSingularA(t *testing.T) {
	const delta = 0.3
	B := mat.NewDense(2, 1, []float64{2, -5})
	Abar, Bbar, err := Discretize(ssm.FOH, delta, mat.NewDense(2, 2, nil), B)
	require.NoError(t, err)
	assert.InDeltaSlice(t, []float64{1, 0, 0, 1}, Abar.RawMatrix().Data, 1e-15)
	assert.InDeltaSlice(t, []float64{delta * 2, delta * -5}, Bbar.RawMatrix().Data, 1e-15)

	N := mat.NewDense(2, 2, []float64{0, 1, 0, 0})
	Abar, Bbar, err = Discretize(ssm.FOH, delta, N, B)
	require.NoError(t, err)
	assert.InDeltaSlice(t, []float64{1, delta, 0, 1}, Abar.RawMatrix().Data, 1e-15)
	// (ΔI + Δ²N/2)·B = (Δ·2 + Δ²/2·(−5), Δ·(−5))
	assert.InDeltaSlice(t, []float64{delta*2 + delta*delta/2*-5, delta * -5}, Bbar.RawMatrix().Data, 1e-15)
}

func TestDiscretizeErrors(t *testing.T) {
	sq := mat.NewDense(2, 2, nil)
	_, _, err := Discretize(ssm.ZOH, 1, mat.NewDense(2, 3, nil), mat.NewDense(2, 1, nil))
	assert.ErrorContains(t, err, "A is 2×3")
	_, _, err = Discretize(ssm.ZOH, 1, sq, mat.NewDense(3, 1, nil))
	assert.ErrorContains(t, err, "B is 3×1, want 2 rows")
	_, _, err = Discretize(ssm.Method(8), 1, sq, mat.NewDense(2, 1, nil))
	assert.ErrorContains(t, err, "method(8) is not a method")
	// I − ΔA/2 = 0 for A = 2I/Δ: bilinear's pole, as a matrix.
	_, _, err = Discretize(ssm.Bilinear, 0.5, mat.NewDiagDense(2, []float64{4, 4}), mat.NewDense(2, 1, nil))
	assert.ErrorContains(t, err, "singular")
}
