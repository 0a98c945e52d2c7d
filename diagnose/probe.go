package diagnose

import (
	"fmt"
	"math"
	"math/cmplx"
	"sort"
	"ssmverify/mamba1"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// point is one probe of the kernel's discretization at (Δ, a), x = Δ·a.
type point struct {
	delta   float64
	a, x    complex128
	abar, g complex128 // measured: Ā and g = Bcoef/Δ
	zero    complex128 // measured: the state after one step with u = 0 (must be 0)
	// aKnown is false where Bcoef is 0 or not finite: Ā·Bcoef / Bcoef
	// then says nothing about Ā.
	aKnown bool
}

// probeXs are the real parts of x a probe visits: zero, the small |x| where
// φ1 cancels, the range of trained models' Δ·a, and a few positive values
// (all left of bilinear's pole at 2).
var probeXs = []float64{0, 1e-6, -1e-6, 1e-4, -1e-4, 1e-3, -1e-3, 3e-3, -3e-3, 0.01, -0.01, 0.03, -0.03,
	0.1, -0.1, 0.3, -0.3, -0.5, 0.7, -0.7, 1, -1, -2, -3, -5, -8, -12, -20}

// probeDeltas are the steps: the fit of Bcoef ∝ Δ^p needs more than one.
var probeDeltas = []float64{0.5, 0.03125}

// probe measures the kernel's Ā and g through its scan, so that it works
// for a library whose ssmk_discretize does not exist (SSMK_CAP_SCAN_ONLY):
// one channel per (Δ, a), dstate 1, B = 1, C = 1, no D, z or bias, u = 1 at
// t = 0. With seqlen 1 the last state is Bcoef; with seqlen 2 (u = 0 at
// t = 1) it is Ā·Bcoef; with u = 0 throughout it must be 0.
func probe(s Scanner, m ssm.Method, dt ssm.DType, isComplex bool) ([]point, error) {
	var pts []point
	ims := []float64{0}
	if isComplex {
		ims = []float64{0, 0.7, 3}
	}
	for _, d := range probeDeltas {
		for _, xr := range probeXs {
			for _, xi := range ims {
				a := complex(xr/d, xi/d)
				if dt == ssm.F32 {
					a = complex(float64(float32(real(a))), float64(float32(imag(a))))
				}
				pts = append(pts, point{delta: d, a: a, x: complex(d, 0) * a})
			}
		}
	}
	zero, err := probeRun(s, m, dt, isComplex, pts, 1, 0)
	if err != nil {
		return nil, err
	}
	one, err := probeRun(s, m, dt, isComplex, pts, 1, 1)
	if err != nil {
		return nil, err
	}
	two, err := probeRun(s, m, dt, isComplex, pts, 2, 1)
	if err != nil {
		return nil, err
	}
	for i := range pts {
		pts[i].g = one[i] / complex(pts[i].delta, 0)
		pts[i].abar = two[i] / one[i]
		pts[i].zero = zero[i]
		pts[i].aKnown = one[i] != 0 && !cmplx.IsNaN(one[i]) && !cmplx.IsInf(one[i])
	}
	return pts, nil
}

func probeRun(s Scanner, m ssm.Method, dt ssm.DType, isComplex bool, pts []point, seqlen int, u0 float64) ([]complex128, error) {
	n := len(pts)
	p := &ssm.Problem{Batch: 1, Dim: n, Seqlen: seqlen, Dstate: 1, Groups: 1, Method: m, Complex: isComplex}
	w := p.ElemWords()
	p.U, p.Delta = make([]float64, n*seqlen), make([]float64, n*seqlen)
	p.A, p.B, p.C = make([]float64, n*w), make([]float64, n*w), make([]float64, n*w)
	for i, pt := range pts {
		p.U[i*seqlen] = u0
		for t := 0; t < seqlen; t++ {
			p.Delta[i*seqlen+t] = pt.delta
		}
		p.A[i*w], p.B[i*w], p.C[i*w] = real(pt.a), 1, 1
		if isComplex {
			p.A[i*w+1] = imag(pt.a)
		}
	}
	o, err := s.Scan(p, dt)
	if err != nil {
		return nil, fmt.Errorf("probe scan (seqlen %d): %w", seqlen, err)
	}
	h := make([]complex128, n)
	for i := range h {
		h[i] = complex(o.LastState[i*w], 0)
		if isComplex {
			h[i] = complex(o.LastState[i*w], o.LastState[i*w+1])
		}
	}
	return h, nil
}

// unit is the rounding unit of a dtype.
func unit(dt ssm.DType) float64 {
	if dt == ssm.F64 {
		return 0x1p-53
	}
	return 0x1p-24
}

// tol is the relative error a correct kernel may make at x: e^x's condition
// number is |x| (x = Δ·a is rounded), plus a few roundings of the
// coefficient and of the probe's own quotient Ā·Bcoef / Bcoef. Fitting
// means within 4 tolerances, 8u·(4 + |x|): an exp2f(x·log2e) with log2e
// wrong in its 5th digit errs by 57u·|x| and shows beyond |x| ≈ 1.
func tol(dt ssm.DType, x complex128) float64 { return 2 * unit(dt) * (4 + cmplx.Abs(x)) }

// relErr is |got − want| / |want| (|got − want| where want is 0; +Inf
// where got is not finite and want is).
func relErr(got, want complex128) float64 {
	if cmplx.IsNaN(got) || cmplx.IsInf(got) {
		if cmplx.IsNaN(want) || cmplx.IsInf(want) {
			return 0
		}
		return math.Inf(1)
	}
	d := cmplx.Abs(got - want)
	if w := cmplx.Abs(want); w > 0 {
		return d / w
	}
	return d
}

// formula is a candidate for Ā(x) or for g(x, Δ). mag, where set, is the
// magnitude of the terms it sums (a sum that cancels to about 0 is judged
// relative to its terms, not to its tiny value).
type formula struct {
	tag, cause string
	f          func(pt point) complex128
	mag        func(pt point) float64
}

// fits reports whether measured values follow f at every point (within
// judge.Threshold tolerances) and the largest error in tolerances.
func fits(pts []point, dt ssm.DType, abar bool, f func(point) complex128) (bool, float64) {
	return fitsMag(pts, dt, abar, formula{f: f})
}

func fitsMag(pts []point, dt ssm.DType, abar bool, fm formula) (bool, float64) {
	f := fm.f
	worst := 0.0
	measured := func(pt point) complex128 { return pt.g }
	if abar {
		measured = func(pt point) complex128 { return pt.abar }
	}
	for _, pt := range pts {
		if abar && !pt.aKnown {
			continue
		}
		have, want := measured(pt), f(pt)
		e, d := relErr(have, want), cmplx.Abs(have-want)
		if d <= 8*dt.Precision().Tiny()*unit(dt) {
			e = 0 // within a few of the dtype's subnormal spacings: e^x underflowing to 0 is its rounding
		}
		if fm.mag != nil {
			if m := fm.mag(pt); m > cmplx.Abs(want) && !math.IsInf(e, 0) {
				e = d / m
			}
		}
		e /= tol(dt, pt.x)
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		worst = math.Max(worst, e)
	}
	return worst <= judge.Threshold(dt), worst
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// abarCandidates are the usual slips in Ā, with constants fitted to pts.
func abarCandidates(m ssm.Method, isComplex bool, pts []point) []formula {
	var cs []float64
	for _, pt := range pts {
		if pt.aKnown && math.Abs(real(pt.x)) >= 0.5 && cmplx.Abs(pt.abar) > 0 {
			cs = append(cs, real(cmplx.Log(pt.abar))/real(pt.x))
		}
	}
	c := median(cs)
	// the phase of Ā against Im x, where it does not wrap (|Im x| ≤ 1)
	var phs []float64
	for _, pt := range pts {
		if pt.aKnown && imag(pt.x) != 0 && math.Abs(imag(pt.x)) <= 1 && math.Abs(real(pt.x)) <= 1 {
			phs = append(phs, cmplx.Phase(pt.abar)/imag(pt.x))
		}
	}
	cp := median(phs)
	phaseWhy := ""
	if math.Abs(cp-math.Log2E) < 1e-4 {
		phaseWhy = " (c = log2(e): the angle went through exp2's scaling, as cos/sin of Im x·log2e)"
	}
	why := "a wrong log2(e) in exp2(x·log2e)?"
	switch {
	case math.Abs(c-math.Log2E) < 1e-4:
		why = "c = log2(e): the exponent is multiplied by log2(e) twice, as when A is pre-scaled by log2(e) and exp2(x·log2e) applied to it"
	case math.Abs(c-math.Ln2) < 1e-4:
		why = "c = ln 2: exp2(x) without the factor log2(e)"
	}
	fs := []formula{
		{"bilinear-sign", "Ā = (1 − x/2)/(1 + x/2): bilinear with the sign of x flipped",
			func(pt point) complex128 { return (1 - pt.x/2) / (1 + pt.x/2) }, nil},
		{"exp-scaled", fmt.Sprintf("|Ā| = e^{c·Re x} with c = %.9g: the exponent is scaled by a constant (%s)", c, why),
			func(pt point) complex128 { return cmplx.Exp(complex(c*real(pt.x), imag(pt.x))) }, nil},
		{"exp-scaled", fmt.Sprintf("Ā = e^{c·x} with c = %.9g (real and imaginary parts): the exponent is scaled by a constant (%s)", c, why),
			func(pt point) complex128 { return cmplx.Exp(complex(c, 0) * pt.x) }, nil},
		{"phase-scaled", fmt.Sprintf("Ā = e^{Re x}·e^{i·c·Im x} with c = %.9g: the modulus is right, the rotation is scaled by a constant%s", cp, phaseWhy),
			func(pt point) complex128 { return cmplx.Exp(complex(real(pt.x), cp*imag(pt.x))) }, nil},
		{"euler", "Ā = 1 + x: forward Euler instead of the exponential", func(pt point) complex128 { return 1 + pt.x }, nil},
	}
	for _, o := range ssm.Methods() {
		o := o
		if ab0, _ := mamba1.Coef(o, isComplex, 0.3); ab0 != func() complex128 { a, _ := mamba1.Coef(m, isComplex, 0.3); return a }() {
			fs = append(fs, formula{"method:" + o.String(), "Ā is " + o.String() + "'s",
				func(pt point) complex128 { a, _ := mamba1.Coef(o, isComplex, pt.x); return a }, nil})
		}
	}
	return fs
}

// gCandidates are the usual slips in g = Bcoef/Δ.
func gCandidates(m ssm.Method, isComplex bool, pts []point) []formula {
	ref := func(pt point) complex128 { _, g := mamba1.Coef(m, isComplex, pt.x); return g }
	var ks, ps []float64
	for _, pt := range pts {
		r := pt.g / ref(pt)
		if !cmplx.IsNaN(r) && !cmplx.IsInf(r) && r != 0 {
			ks = append(ks, real(r))
		}
	}
	k := median(ks)
	// Bcoef ∝ Δ^p at fixed x: compare the two Δ's at equal x.
	for _, p1 := range pts {
		for _, p2 := range pts {
			if p1.delta > p2.delta && p1.x == p2.x && p1.x != 0 {
				r := real(p1.g*complex(p1.delta, 0)) / real(p2.g*complex(p2.delta, 0))
				ps = append(ps, math.Log(math.Abs(r))/math.Log(p1.delta/p2.delta))
			}
		}
	}
	pw := median(ps)
	fs := []formula{
		{"bilinear-sign", "g = 1/(1 + x/2): bilinear with the sign of x flipped", func(pt point) complex128 { return 1 / (1 + pt.x/2) }, nil},
		{"delta-power", fmt.Sprintf("Bcoef = g·Δ^%.3g instead of g·Δ: a missing or extra factor Δ", pw),
			func(pt point) complex128 { return ref(pt) * complex(math.Pow(pt.delta, pw-1), 0) }, nil},
		{"scaled", fmt.Sprintf("g is %.6g × the method's: a constant factor", k),
			func(pt point) complex128 { return complex(k, 0) * ref(pt) }, nil},
	}
	for deg := 1; deg <= 4; deg++ {
		c := termFit(pts, ref, deg)
		d := deg
		term := func(pt point) complex128 { return complex(c, 0) * cmplx.Pow(pt.x, complex(float64(d), 0)) }
		fs = append(fs, formula{fmt.Sprintf("g-term:x^%d", deg),
			fmt.Sprintf("g has an x^%d term off by %.6g (the coefficient of x^%d is wrong or the term is missing)", d, c, d),
			func(pt point) complex128 { return ref(pt) + term(pt) },
			func(pt point) float64 { return cmplx.Abs(ref(pt)) + cmplx.Abs(term(pt)) }})
	}
	for _, o := range ssm.Methods() {
		o := o
		if o != m {
			fs = append(fs, formula{"method:" + o.String(), "g is " + o.String() + "'s",
				func(pt point) complex128 { _, g := mamba1.Coef(o, isComplex, pt.x); return g }, nil})
		}
	}
	return fs
}

// termFit estimates c in g_kernel − g_method ≈ c·x^deg: the median of
// (g_kernel − g_method)/x^deg over the real points with |x| ≥ 0.1 (where
// rounding does not dominate the difference). For the right degree every
// quotient is c.
func termFit(pts []point, ref func(point) complex128, deg int) float64 {
	var q []float64
	for _, pt := range pts {
		x := real(pt.x)
		if imag(pt.x) != 0 || math.Abs(x) < 0.1 || cmplx.IsNaN(pt.g) || cmplx.IsInf(pt.g) {
			continue
		}
		q = append(q, real(pt.g-ref(pt))/math.Pow(x, float64(deg)))
	}
	if len(q) == 0 {
		return 0
	}
	return median(q)
}

// cancellation recognises φ1 = (e^x − 1)/x evaluated without (or with too
// narrow) a series guard: NaN exactly at x = 0, or errors confined to
// 0 < |x| < 1 that grow as |x| shrinks.
func cancellation(m ssm.Method, dt ssm.DType, isComplex bool, pts []point) (tag, cause string, ok bool) {
	if m != ssm.FOH {
		return "", "", false
	}
	var bad []float64
	nanAtZero := false
	for _, pt := range pts {
		_, g := mamba1.Coef(m, isComplex, pt.x)
		e := relErr(pt.g, g) / tol(dt, pt.x)
		if e <= 4 {
			continue
		}
		if pt.x == 0 {
			nanAtZero = nanAtZero || cmplx.IsNaN(pt.g)
			continue
		}
		if cmplx.Abs(pt.x) >= 1 {
			return "", "", false
		}
		bad = append(bad, cmplx.Abs(pt.x))
	}
	if nanAtZero {
		return "phi1-no-guard", "φ1(0) is NaN: (e^x − 1)/x is evaluated at x = 0 without its limit φ1(0) = 1 (no small-x guard)", true
	}
	if len(bad) == 0 {
		return "", "", false
	}
	sort.Float64s(bad)
	return "phi1-narrow-guard", fmt.Sprintf("φ1 = (e^x − 1)/x cancels for %.3g ≤ |x| ≤ %.3g while x = 0 is exact: "+
		"the small-x series guard is too narrow", bad[0], bad[len(bad)-1]), true
}

// explainDiscretization compares the probed Ā and g with method m's and
// names the slip that fits. ok is false when both match the method.
func explainDiscretization(m ssm.Method, dt ssm.DType, isComplex bool, pts []point) (tag, cause, evidence string, ok bool) {
	refA := func(pt point) complex128 { a, _ := mamba1.Coef(m, isComplex, pt.x); return a }
	refG := func(pt point) complex128 { _, g := mamba1.Coef(m, isComplex, pt.x); return g }
	aOK, aWorst := fits(pts, dt, true, refA)
	gOK, gWorst := fits(pts, dt, false, refG)
	if aOK && gOK {
		return "", "", "", false
	}
	evidence = fmt.Sprintf("probe of %d (Δ, a) pairs through the scan: Ā off by up to %.3g tolerances, g by %.3g", len(pts), aWorst, gWorst)
	for _, pt := range pts {
		if pt.zero != 0 && !cmplx.IsNaN(pt.zero) && !cmplx.IsInf(pt.zero) { // NaN·0 is a NaN coefficient, judged below
			return "input-without-u", "with u = 0 the state is not 0: part of the input term is not multiplied by u",
				fmt.Sprintf("%s; at x = %v, Δ = %g one step with u = 0 leaves h = %v", evidence, pt.x, pt.delta, pt.zero), true
		}
	}
	if t, c, ok := cancellation(m, dt, isComplex, pts); ok {
		return t, c, evidence, true
	}
	if !aOK {
		for _, f := range abarCandidates(m, isComplex, pts) {
			if ok, w := fits(pts, dt, true, f.f); ok {
				return f.tag, f.cause, fmt.Sprintf("%s; it fits within %.2g tolerances", evidence, w), true
			}
		}
		return "abar-unknown", "Ā differs from " + m.String() + "'s and from every usual slip", evidence + worstPoint(pts, dt, true, refA), true
	}
	for _, f := range append(gCandidates(m, isComplex, pts), taylorCandidates()...) {
		if ok, w := fitsMag(pts, dt, false, f); ok {
			return f.tag, f.cause, fmt.Sprintf("%s; it fits within %.2g tolerances", evidence, w), true
		}
	}
	if d1, d2, x, ok := notFunctionOfX(pts, dt); ok {
		return "g-not-of-x", "g = Bcoef/Δ is not a function of x = Δ·a alone: the formula combines Δ and a otherwise (a term in Δ or a alone)",
			fmt.Sprintf("%s; at x = %v: g = %v with Δ = %g, %v with Δ = %g", evidence, x, d1.g, d1.delta, d2.g, d2.delta), true
	}
	return "g-unknown", "g = Bcoef/Δ differs from " + m.String() + "'s and from every usual slip", evidence + worstPoint(pts, dt, false, refG), true
}

// notFunctionOfX finds two probe points with the same x and different Δ
// whose g differ beyond rounding.
func notFunctionOfX(pts []point, dt ssm.DType) (point, point, complex128, bool) {
	for _, p1 := range pts {
		for _, p2 := range pts {
			if p1.delta > p2.delta && p1.x == p2.x && relErr(p1.g, p2.g) > 4*tol(dt, p1.x) && !cmplx.IsNaN(p1.g) && !cmplx.IsNaN(p2.g) {
				return p1, p2, p1.x, true
			}
		}
	}
	return point{}, point{}, 0, false
}

// phiTaylor is the sum of the first n terms of the Taylor series of φ_j,
// φ_j(x) = Σ_k x^k/(k+j)! (φ0 = e^x, φ1 = (e^x − 1)/x, φ2 = (e^x − 1 − x)/x²).
func phiTaylor(j, n int, x complex128) complex128 {
	var s complex128
	term := complex(1/factorial(j), 0)
	for k := 0; k < n; k++ {
		s += term
		term *= x / complex(float64(k+j+1), 0)
	}
	return s
}

func factorial(n int) float64 {
	f := 1.0
	for i := 2; i <= n; i++ {
		f *= float64(i)
	}
	return f
}

// taylorCandidates are Bcoef = Δ^(k+1)·(the first n Taylor terms of φ_j):
// the ABI's poly, highorder and rk4 are truncations of φ1, a forward Euler
// input is φ0's first term, and a first-order hold written as
// A⁻²(e^{ΔA} − I − ΔA)·B is Δ²·φ2.
func taylorCandidates() []formula {
	var fs []formula
	for j := 0; j <= 2; j++ {
		for k := 0; k <= 1; k++ {
			for n := 1; n <= 5; n++ {
				j, k, n := j, k, n
				fs = append(fs, formula{fmt.Sprintf("taylor:phi%d/%d·Δ^%d", j, n, k),
					fmt.Sprintf("Bcoef = Δ^%d·(the first %d Taylor terms of φ%d(x)), φ%d(x) = %s", k+1, n, j, j, phiName[j]),
					func(pt point) complex128 {
						return phiTaylor(j, n, pt.x) * complex(math.Pow(pt.delta, float64(k)), 0)
					}, nil})
			}
		}
	}
	return fs
}

var phiName = []string{"e^x", "(e^x − 1)/x", "(e^x − 1 − x)/x²"}

func worstPoint(pts []point, dt ssm.DType, abar bool, ref func(point) complex128) string {
	worst, at := -1.0, point{}
	for _, pt := range pts {
		if abar && !pt.aKnown {
			continue
		}
		v := pt.g
		if abar {
			v = pt.abar
		}
		if e := relErr(v, ref(pt)) / tol(dt, pt.x); e > worst || math.IsNaN(e) {
			worst, at = e, pt
		}
	}
	v := at.g
	if abar {
		v = at.abar
	}
	return fmt.Sprintf("; worst at x = %v (Δ = %g): kernel %v, %v", at.x, at.delta, v, ref(at))
}

// Discretized explains a failure of ssmk_discretize itself, from its
// outputs at the points where the caller's comparison failed: Ā[i] and
// Bcoef[i] at (Δ[i], a[i]), failed[i] set where the kernel is beyond the
// threshold. These values are exact outputs, not read back through a scan
// (probe), so they resolve what a probe's tolerance cannot: φ1 = (e^x −
// 1)/x cancelling by 20u just outside a too-narrow series guard, which the
// error model (reference.DiscretizeScale) rejects. Failures of foh confined
// to 0 < |x| < 1, none at x = 0, and either the worst at the smallest |x| or
// every one within the quotient's cancellation, 16·u/|x| relative in g (a
// device exponential's error of a few u scatters which of them is worst),
// are a narrow guard; anything else goes to the probe's explanations.
func Discretized(m ssm.Method, dt ssm.DType, isComplex bool, delta []float64, a, abar, bcoef []complex128, failed []bool) (f Finding) {
	defer contained(&f, "diagnose.Discretized", func() string {
		return fmt.Sprintf("%v %v %s, %d values of Δ", m, dt, ssm.AKind(isComplex), len(delta))
	})
	return diagnoseDiscretized(m, dt, isComplex, delta, a, abar, bcoef, failed)
}

func diagnoseDiscretized(m ssm.Method, dt ssm.DType, isComplex bool, delta []float64, a, abar, bcoef []complex128, failed []bool) Finding {
	for _, c := range []struct {
		name string
		n    int
	}{{"a", len(a)}, {"abar", len(abar)}, {"bcoef", len(bcoef)}, {"failed", len(failed)}} {
		if c.n != len(delta) {
			return shapeFinding(&ShapeError{c.name, c.n, len(delta)})
		}
	}
	var pts []point
	var bad []point
	for i := range delta {
		pt := point{delta: delta[i], a: a[i], x: complex(delta[i], 0) * a[i], abar: abar[i], aKnown: true}
		if delta[i] != 0 {
			pt.g = bcoef[i] / complex(delta[i], 0)
		}
		pts = append(pts, pt)
		if failed[i] {
			bad = append(bad, pt)
		}
	}
	if len(bad) == 0 {
		return Finding{Cause: "no point failed"}
	}
	if f, ok := subnormalX(dt, bad); ok {
		return f
	}
	if m == ssm.FOH {
		narrow := true
		for _, pt := range bad {
			r := cmplx.Abs(pt.x)
			narrow = narrow && r > 0 && r < 1
		}
		if narrow {
			sort.Slice(bad, func(i, j int) bool { return cmplx.Abs(bad[i].x) < cmplx.Abs(bad[j].x) })
			lo, hi := bad[0], bad[len(bad)-1]
			_, glo := mamba1.Coef(m, isComplex, lo.x)
			_, ghi := mamba1.Coef(m, isComplex, hi.x)
			cancels := true
			for _, pt := range bad {
				_, g := mamba1.Coef(m, isComplex, pt.x)
				cancels = cancels && relErr(pt.g, g) <= 16*unit(dt)/cmplx.Abs(pt.x)
			}
			if len(bad) == 1 || relErr(lo.g, glo) >= relErr(hi.g, ghi) || cancels {
				return Finding{Tag: "phi1-narrow-guard", Cause: fmt.Sprintf("φ1 = (e^x − 1)/x cancels for %.3g ≤ |x| ≤ %.3g (ssmk_discretize; "+
					"relative error of g %.3g at the smaller |x|, %.3g at the larger): the small-x series guard is too narrow",
					cmplx.Abs(lo.x), cmplx.Abs(hi.x), relErr(lo.g, glo), relErr(hi.g, ghi))}
			}
		}
	}
	if tag, cause, ev, ok := explainDiscretization(m, dt, isComplex, pts); ok {
		return Finding{Tag: tag, Cause: cause, Evidence: []string{ev + " (ssmk_discretize's outputs)"}}
	}
	return Finding{Tag: "none", Cause: "no diagnosis fits the failing points of ssmk_discretize"}
}

// subnormalX explains failures that all lie where x = Δ·a has a nonzero
// part below the precision's least normal number: a kernel that flushes
// such parts, or forms a value from an inexact half or scaling of them
// (sin b = 2·sin(b/2)·cos(b/2), where b/2 is inexact), is right elsewhere.
func subnormalX(dt ssm.DType, bad []point) (Finding, bool) {
	eta := dt.Precision().Tiny()
	tiny := func(v float64) bool { return v != 0 && math.Abs(v) < eta }
	for _, pt := range bad {
		if !tiny(real(pt.x)) && !tiny(imag(pt.x)) {
			return Finding{}, false
		}
	}
	return Finding{Tag: "subnormal-x", Cause: fmt.Sprintf("every failing point has x = Δ·a with a part below the least "+
		"normal number (%.3g), e.g. x = %.3g: the kernel mishandles subnormal arguments (flushes them, or forms a "+
		"value from an inexact half or scaling of them)", eta, bad[0].x)}, true
}
