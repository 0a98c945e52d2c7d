package verify

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

type sweepStats struct {
	ratios, ulps []float64
	worst        string
}

func (s *sweepStats) add(r, ulp float64, where string) {
	if len(s.ratios) == 0 || r > slices.Max(s.ratios) || math.IsNaN(r) {
		s.worst = where
	}
	s.ratios = append(s.ratios, r)
	s.ulps = append(s.ulps, ulp)
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// TestDiscretizeSweep: ssmk_discretize over dense grids of x = Δ·a, per
// method, dtype and real/complex, against the reference with its error
// scale. Logs and reports the distribution (median, 99th percentile, max)
// of the ratio and of the error in ulp; every ratio must be within the
// threshold, except where the true value is beyond the dtype's range
// (e^x overflowing float32), which is reported as such.
func TestDiscretizeSweep(t *testing.T) {
	track(t)
	table := report.Table{Name: "discretize sweep: x = Δ·a, |x| in 1e-8…1e3, both signs and 0",
		Columns: []string{"method", "dtype", "A", "points", "median ratio", "p99 ratio", "max ratio", "median ulp", "max ulp", "worst"}}
	forEachDiscretized(t, func(m ssm.Method, dt ssm.DType, isComplex bool) {
		delta, a := mamba1.SweepGrid(dt, isComplex, uint64(m)+1)
		st := judgeDiscretized(t, m, dt, isComplex, delta, a, "points")
		if st == nil || len(st.ratios) == 0 {
			return
		}
		table.Rows = append(table.Rows, []string{m.String(), dt.String(), ssm.AKind(isComplex), fmt.Sprint(len(st.ratios)),
			fmt.Sprintf("%.3g", quantile(st.ratios, 0.5)), fmt.Sprintf("%.3g", quantile(st.ratios, 0.99)),
			fmt.Sprintf("%.3g", slices.Max(st.ratios)), fmt.Sprintf("%.3g", quantile(st.ulps, 0.5)),
			fmt.Sprintf("%.3g", slices.Max(st.ulps)), st.worst})
	})
	logTable(t, table)
	rep.AddTable(table)
}

// forEachDiscretized calls f for every method, dtype and real/complex A
// whose ssmk_discretize the library declares, other than a declared complex
// fallback (TestComplexFallback judges those).
func forEachDiscretized(t *testing.T, f func(m ssm.Method, dt ssm.DType, isComplex bool)) {
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				if isComplex && fallback(m, dt) {
					continue
				}
				if judged(t.Name(), "ssmk_discretize of", m, dt, isComplex, true) {
					f(m, dt, isComplex)
				}
			}
		}
	}
}

// judgeDiscretized runs ssmk_discretize at (delta, a), judges every point
// against the reference within the threshold, records each in the report
// under the test's name, reports the first three failures and, where the
// report wants one, the diagnosis of them all (what names the points in
// the message); nil where the library fails the call.
func judgeDiscretized(t *testing.T, m ssm.Method, dt ssm.DType, isComplex bool, delta, a []float64, what string) *sweepStats {
	t.Helper()
	abar, bcoef, err := lib.Discretize(m, dt, isComplex, delta, a)
	if err != nil {
		t.Errorf("%v %v %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), err)
		return nil
	}
	var st sweepStats
	failures := 0
	var pd []float64
	var pa, pAbar, pBcoef []complex128
	var pFailed []bool
	for _, pt := range judge.CompareDiscretize(m, dt, isComplex, delta, a, abar, bcoef) {
		r, where := pt.Ratio(), pt.String()
		ok := r <= judge.Threshold(dt)
		st.add(r, pt.ULP, where)
		pd, pa, pAbar, pBcoef = append(pd, pt.Delta), append(pa, pt.A), append(pAbar, pt.Abar), append(pBcoef, pt.Bcoef)
		pFailed = append(pFailed, !ok)
		if !ok {
			if failures++; failures <= 3 {
				t.Errorf("%v %v %s: ratio %.3g > %g at %s", m, dt, ssm.AKind(isComplex), r, judge.Threshold(dt), where)
			}
		}
		rep.Add(t.Name(), m, dt, isComplex, r, pt.ULP, ok, where)
	}
	if failures > 0 && rep.WantDiagnosis(t.Name(), m, dt, isComplex) {
		f := diagnose.Discretized(m, dt, isComplex, pd, pa, pAbar, pBcoef, pFailed)
		rep.AddDiagnosis(t.Name(), m, dt, isComplex, f)
		t.Errorf("%v %v %s: %d of %d %s fail; diagnosis [%s]: %s", m, dt, ssm.AKind(isComplex), failures, len(pd), what, f.Tag, f)
	}
	return &st
}

func kernelPair(abar, bcoef []float64, i int, isComplex bool) (complex128, complex128) {
	if isComplex {
		return complex(abar[2*i], abar[2*i+1]), complex(bcoef[2*i], bcoef[2*i+1])
	}
	return complex(abar[i], 0), complex(bcoef[i], 0)
}

// logTable logs a table with aligned columns; its last column (free text
// such as the worst case) goes to the report only.
func logTable(t *testing.T, tb report.Table) {
	t.Helper()
	cols := len(tb.Columns) - 1
	w := make([]int, cols)
	for i := 0; i < cols; i++ {
		w[i] = len([]rune(tb.Columns[i]))
		for _, r := range tb.Rows {
			w[i] = max(w[i], len([]rune(r[i])))
		}
	}
	line := func(cells []string) string {
		s := ""
		for i := 0; i < cols; i++ {
			s += fmt.Sprintf("%-*s  ", w[i], cells[i])
		}
		return s + "\n"
	}
	s := tb.Name + "\n" + line(tb.Columns)
	for _, r := range tb.Rows {
		s += line(r)
	}
	t.Log(s)
}

// TestBilinearDiagonalExact: for diagonal A the kernel's scalar bilinear
// equals the gonum matrix form (I − ΔA/2)⁻¹(I + ΔA/2), (I − ΔA/2)⁻¹ΔB to
// rounding, for random A and Δ including x near 2 (the pole of unstable A):
// the ratio against the matrix form, with the discretization error scale,
// stays within the threshold.
func TestBilinearDiagonalExact(t *testing.T) {
	track(t)
	r := rand.New(rand.NewPCG(2, 2))
	for _, dt := range ssm.DTypes() {
		if !judged(t.Name(), "ssmk_discretize of", ssm.Bilinear, dt, false, true) {
			continue
		}
		for trial := 0; trial < 50; trial++ {
			n := 1 + r.IntN(8)
			a := make([]float64, n)
			delta := make([]float64, n)
			dd := 0.01 + 2*r.Float64()
			for i := range a {
				switch {
				case i == 0 && trial%2 == 0: // x within 1e-3 of the pole x = 2
					a[i] = (2 + (2*r.Float64()-1)*1e-3) / dd
				default:
					a[i] = (2*r.Float64() - 1) * math.Pow(10, 3*r.Float64()-1)
				}
				if dt == ssm.F32 {
					a[i] = float64(float32(a[i]))
				}
			}
			if dt == ssm.F32 {
				dd = float64(float32(dd))
			}
			for i := range delta {
				delta[i] = dd
			}
			B := make([]float64, n)
			for i := range B {
				B[i] = 2*r.Float64() - 1
			}
			abar, bcoef, err := lib.Discretize(ssm.Bilinear, dt, false, delta, a)
			if err != nil {
				t.Errorf("%v: declared supported, but %v", dt, err)
				break
			}
			mA, mB, err := mamba1.Discretize(ssm.Bilinear, dd, mat.NewDiagDense(n, a), mat.NewDense(n, 1, B))
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				sA, sB := mamba1.DiscretizeScale(ssm.Bilinear, dd, complex(a[i], 0), false)
				// The matrix form (an LU solve of a diagonal system) errs by
				// an ulp or two of its own: add its share to the scale.
				sA += 2 * math.Abs(mA.At(i, i))
				sB += 2 * math.Abs(mB.At(i, 0)/B[i])
				rA := mamba1.Ratio(abar[i]-mA.At(i, i), sA, 2, dt.Precision())
				rB := mamba1.Ratio(bcoef[i]*B[i]-mB.At(i, 0), sB*math.Abs(B[i]), 2, dt.Precision())
				rat := math.Max(rA, rB)
				x := dd * a[i]
				rep.Add("TestBilinearDiagonalExact", ssm.Bilinear, dt, false, rat, judge.ULPsOf(abar[i]-mA.At(i, i), math.Max(math.Abs(mA.At(i, i)), (1+math.Abs(x)/2)/math.Abs(1-x/2)), dt),
					rat <= judge.Threshold(dt), fmt.Sprintf("x = %.9g", x))
				if !(rat <= judge.Threshold(dt)) {
					t.Errorf("%v: x = %.9g: kernel Ā %.9g, matrix %.17g; kernel B̄ %.9g, matrix %.17g: ratio %.3g > %g",
						dt, dd*a[i], abar[i], mA.At(i, i), bcoef[i]*B[i], mB.At(i, 0), rat, judge.Threshold(dt))
				}
			}
		}
	}
}

// TestBilinearScalarShortcutLimit quantifies where the scalar shortcut
// stops being exact: for A = diag + ε·offdiag, the scalar formula applied to
// the diagonal (the kernel's fp64 bilinear) differs from the matrix form by
// an amount that vanishes as ε → 0 (rounding only at ε = 0) and grows with
// ε (asserted: non-decreasing over ε, and first order — err/ε roughly
// constant for small ε).
func TestBilinearScalarShortcutLimit(t *testing.T) {
	track(t)
	const n = 8
	r := rand.New(rand.NewPCG(3, 3))
	diag := make([]float64, n)
	for i := range diag {
		diag[i] = -float64(i + 1) // S4D-real
	}
	off := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				off.Set(i, j, 2*r.Float64()-1)
			}
		}
	}
	if !judged(t.Name(), "ssmk_discretize of", ssm.Bilinear, ssm.F64, false, true) {
		return
	}
	const dd = 0.1
	delta := make([]float64, n)
	for i := range delta {
		delta[i] = dd
	}
	abar, bcoef, err := lib.Discretize(ssm.Bilinear, ssm.F64, false, delta, diag)
	if err != nil {
		t.Fatal(err)
	}
	B := mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		B.Set(i, 0, 1)
	}
	table := report.Table{Name: "bilinear: scalar shortcut vs matrix form for A = diag(−1…−8) + ε·offdiag, Δ = 0.1",
		Columns: []string{"ε", "max |ΔĀ|", "max |ΔB̄|", "max |ΔĀ|/ε"}}
	prev := -1.0
	var ratios []float64
	for _, eps := range []float64{0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1e-1} {
		A := mat.NewDense(n, n, nil)
		A.Scale(eps, off)
		for i := 0; i < n; i++ {
			A.Set(i, i, diag[i])
		}
		mA, mB, err := mamba1.Discretize(ssm.Bilinear, dd, A, B)
		if err != nil {
			t.Fatal(err)
		}
		var eA, eB float64
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				if i == j {
					s = abar[i]
				}
				eA = math.Max(eA, math.Abs(s-mA.At(i, j)))
			}
			eB = math.Max(eB, math.Abs(bcoef[i]-mB.At(i, 0)))
		}
		per := "—"
		if eps > 0 {
			per = fmt.Sprintf("%.3g", eA/eps)
			if eps <= 1e-4 && eps >= 1e-8 {
				ratios = append(ratios, eA/eps)
			}
		}
		table.Rows = append(table.Rows, []string{fmt.Sprintf("%g", eps), fmt.Sprintf("%.3g", eA), fmt.Sprintf("%.3g", eB), per})
		if eps == 0 && eA > 1e-15 {
			t.Errorf("ε = 0: the scalar form differs from the matrix form by %.3g: want rounding only", eA)
		}
		if eA < prev*0.999 {
			t.Errorf("ε = %g: error %.3g fell below the error at the smaller ε (%.3g): want growth with ε", eps, eA, prev)
		}
		prev = eA
	}
	if lo, hi := slices.Min(ratios), slices.Max(ratios); hi > 1.5*lo {
		t.Errorf("error/ε varies from %.3g to %.3g for ε in 1e-8…1e-4: want first order in ε", lo, hi)
	}
	logTable(t, report.Table{Name: table.Name, Columns: append(table.Columns, ""), Rows: func() [][]string {
		var rows [][]string
		for _, r := range table.Rows {
			rows = append(rows, append(r, ""))
		}
		return rows
	}()})
	rep.AddTable(table)
}

// TestStability: for Re(a) < 0 and Δ > 0, every method's |Ā| ≤ 1, for Δ·|a|
// up to 1e6 (bilinear's Ā → −1 there; the exp methods' → 0). Real Ā must
// not exceed 1 at all; a complex Ā is rounded component by component, which
// can lift a modulus just below 1 by up to √2·u, so complex values are held
// to |Ā| ≤ 1 + 2u (growth over a sequence of L steps at most (1 + 2u)^L).
func TestStability(t *testing.T) {
	track(t)
	r := rand.New(rand.NewPCG(4, 4))
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				if isComplex && fallback(m, dt) {
					continue
				}
				if !judged(t.Name(), "ssmk_discretize of", m, dt, isComplex, true) {
					continue
				}
				const n = 4000
				delta := make([]float64, n)
				a := make([]float64, 0, 2*n)
				for i := range delta {
					delta[i] = math.Pow(10, 12*r.Float64()-6) // 1e-6 … 1e6
					re := -math.Pow(10, 4*r.Float64()-2)      // −1e-2 … −1e2
					a = append(a, re)
					if isComplex {
						a = append(a, (2*r.Float64()-1)*100)
					}
				}
				abar, _, err := lib.Discretize(m, dt, isComplex, delta, a)
				if err != nil {
					t.Errorf("%v %v %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), err)
					continue
				}
				bound := 1.0
				if isComplex {
					bound += 2 * dt.Precision().UnitRoundoff()
				}
				for i := range delta {
					ab, _ := kernelPair(abar, abar, i, isComplex)
					if !(cmplx.Abs(ab) <= bound) {
						av, _ := kernelPair(a, a, i, isComplex)
						t.Errorf("%v %v %s: |Ā| = %.17g > %.17g at Δ = %g, a = %v", m, dt, ssm.AKind(isComplex), cmplx.Abs(ab), bound, delta[i], av)
						break
					}
				}
			}
		}
	}
}
