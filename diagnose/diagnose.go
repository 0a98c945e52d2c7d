package diagnose

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

// Scanner is what a diagnosis needs of a library: its forward scan in a
// dtype (cudalib.Library satisfies it).
type Scanner interface {
	Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error)
}

// Declarer is a Scanner that declares what its scan takes
// (cudalib.Library: ssmk_scan_features).
type Declarer interface {
	Features(m ssm.Method, dt ssm.DType, isComplex bool) (ssm.Features, error)
}

// exactScanner hands a Declarer the problems a diagnosis makes up (probes,
// ablations, shrunk sizes) as it takes them with the same solution
// (ssm.Features.Exact), and refuses, saying why, those it cannot take so.
type exactScanner struct {
	s Scanner
	d Declarer
}

func (e exactScanner) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	f, err := e.d.Features(p.Method, dt, p.Complex)
	if err != nil {
		return nil, err
	}
	q, err := f.Exact(p)
	if err != nil {
		return nil, fmt.Errorf("outside what the library declares it takes: %w", err)
	}
	return e.s.Scan(q, dt)
}

// Finding is the diagnosis of one failing scan: report.Finding, the type
// report.json carries, so that a diagnosis is data wherever it is read.
type Finding = report.Finding

// Scan investigates why the kernel of s fails on p in dtype dt; p is used
// as given (a float32 caller rounds it first, as the suite does). The steps
// and their order are the package documentation's. A refusal is explained
// by the reductions the kernel accepts; a failure that does not reproduce
// gives an empty Tag.
func Scan(s Scanner, p *ssm.Problem, dt ssm.DType) (f Finding) {
	defer contained(&f, "diagnose.Scan", func() string { return p.Shape() + " " + dt.String() })
	return diagnoseScan(s, p, dt)
}

func diagnoseScan(s Scanner, p *ssm.Problem, dt ssm.DType) Finding {
	d, declares := s.(Declarer)
	s = checkedKernel{s}
	if declares {
		s = exactScanner{s, d}
	}
	got, err := s.Scan(p, dt)
	if e := (*ShapeError)(nil); errors.As(err, &e) {
		return shapeFinding(e)
	}
	if err != nil {
		return refusal(s, p, dt, err)
	}
	ref, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		return Finding{Tag: "error", Cause: "the reference refuses the problem: " + err.Error()}
	}
	sc, err := mamba1.ErrorScaleIn(p, dt.Precision())
	if err != nil {
		return Finding{Tag: "error", Cause: "error scale: " + err.Error()}
	}
	cmp, _ := judge.CompareScan(p, got, dt, ref, sc)
	if cmp.Passed(dt) {
		return Finding{Cause: "the failure does not reproduce on this problem"}
	}
	f := Finding{Tag: "none", Cause: "no diagnosis fits", Where: where(p, got, ref, sc, dt)}
	// A truncated 16-bit output is named before the slips: its signature
	// (every failing output within one ulp toward zero, the state right) is
	// the narrower one, and on the few elements a shrunk case leaves a slip
	// can fit the same values within the threshold (y from the state before
	// the update is D·u alone at the first step); such a slip is an
	// alternative (Also).
	if dt.Narrow() {
		if tag, cause, ok := outputTruncated(p, got, ref, sc, dt); ok {
			f.Tag, f.Cause = tag, cause
		}
	}
	for _, sl := range mamba1.Slips(p.Method) {
		if !sl.Applies(p) {
			continue
		}
		if c, ok := slipMatches(p, got, dt, sl, sc); ok {
			if f.Tag == "none" {
				f.Tag, f.Cause = sl.Tag, sl.Cause
				f.Evidence = append(f.Evidence, fmt.Sprintf("the kernel matches this formula within %.2g of the threshold, the reference by %.3g", c.Worst.Ratio, cmp.Worst.Ratio))
			} else {
				f.Also = append(f.Also, sl.Tag)
			}
		}
	}
	// One slip fits the failing problem, which a shrunk case has stripped
	// of every feature its failure does not need: a second slip in a
	// feature it lacks would go unseen. The whole failure is checked on a
	// problem of the same combination with every feature on.
	if f.Tag != "none" && len(f.Also) == 0 {
		if tag, cause, ev, ok := wholeFailure(s, p, dt, f.Tag); ok {
			f.Tag, f.Cause = tag, cause
			f.Evidence = append(f.Evidence, ev)
		} else if ev != "" {
			f.Evidence = append(f.Evidence, ev)
		}
	}
	// No slip alone: two together, named in full ("a+b"). One that fits
	// alone explains every failing element (it passed the judgement), so
	// the pairs are tried only here.
	if f.Tag == "none" {
		if a, b, ok := slipPair(p, got, dt); ok {
			f.Tag, f.Cause = a.Tag+"+"+b.Tag, a.Cause+"; and "+b.Cause
			f.Evidence = append(f.Evidence, "no slip alone fits; the two together fit every element")
		}
	}
	if f.Tag == "none" && dt.Narrow() {
		if tag, cause, ok := explainNarrow(s, p.Method, dt); ok {
			f.Tag, f.Cause = tag, cause
		}
	}
	// The probes scan problems of their own values, which a 16-bit input
	// type would round: a mixed-precision kernel's formulas are diagnosed
	// by its float32 variant.
	if f.Tag == "none" && !dt.Narrow() {
		if pts, err := probe(s, p.Method, dt, p.Complex); err != nil {
			f.Evidence = append(f.Evidence, "the discretization probe failed: "+err.Error())
		} else if tag, cause, ev, ok := explainDiscretization(p.Method, dt, p.Complex, pts); ok {
			f.Tag, f.Cause = tag, cause
			f.Evidence = append(f.Evidence, ev)
		}
	}
	if f.Tag == "none" && !dt.Narrow() && (p.Softplus || p.Z != nil) {
		if sp, gate, err := probeElementwise(s, p.Method, dt); err == nil {
			if tag, cause, ok := explainElementwise(dt, sp, gate); ok {
				f.Tag, f.Cause = tag, cause
			}
		}
	}
	if f.Tag == "none" {
		if tag, cause, ok := rowPattern(p, got, ref, sc, dt); ok {
			f.Tag, f.Cause = tag, cause
		}
	}
	if f.Tag == "none" {
		if tag, r := ratioPattern(p, got, ref); r != "" {
			f.Tag, f.Cause = tag, r
		}
	}
	if f.Tag == "none" {
		if tag, cause, ok := halfOverflow(dt, cmp.NonFinite, ref); ok {
			f.Tag, f.Cause = tag, cause
		} else if tag, cause, ok := narrowArithmetic(dt, cmp.Worst.Ratio); ok {
			f.Tag, f.Cause = tag, cause
		}
	}
	f.Needs = needs(s, p, dt)
	return f
}

// slipPair returns the first two slips of the catalogue (in its order)
// that together match the kernel's result.
func slipPair(p *ssm.Problem, got *ssm.Output, dt ssm.DType) (mamba1.Slip, mamba1.Slip, bool) {
	var cat []mamba1.Slip
	for _, sl := range mamba1.Slips(p.Method) {
		if sl.Applies(p) {
			cat = append(cat, sl)
		}
	}
	for i := range cat {
		for j := i + 1; j < len(cat); j++ {
			if pairMatches(p, got, dt, cat[i], cat[j]) {
				return cat[i], cat[j], true
			}
		}
	}
	return mamba1.Slip{}, mamba1.Slip{}, false
}

// slipMatches compares the kernel's result with slip sl of p.
func slipMatches(p *ssm.Problem, got *ssm.Output, dt ssm.DType, sl mamba1.Slip, sc *mamba1.Scale) (judge.Comparison, bool) {
	if sl.Transform != nil || sl.TransformIn != nil {
		var q *ssm.Problem
		if sl.Transform != nil {
			q = sl.Transform(p)
		} else if q = sl.TransformIn(p, dt); q == nil {
			return judge.Comparison{}, false // not a slip of this dtype
		}
		c, err := judge.CompareScan(q, got, dt, nil, nil)
		if err == nil && !c.Passed(dt) && c.Beyond > 0 {
			// The slip's problem leaves the dtype's range (a step made
			// negative grows the state): judge the elements whose every
			// intermediate stays in range.
			return compareInRange(q, got, dt)
		}
		return c, err == nil && c.Passed(dt)
	}
	alt := mamba1.EditedScan(p, sl.Edit)
	if sl.Rescale != nil {
		sc = copyScale(sc)
		sl.Rescale(p, sc)
	}
	c, err := judge.CompareScan(p, got, dt, alt, sc)
	return c, err == nil && c.Passed(dt)
}

// compareInRange compares got with the reference of q on the elements whose
// magnitude bounds (mamba1.Scale's MagOut, PathMagOut, PathMagState) stay
// within the dtype's largest number; the others take the reference's value.
func compareInRange(q *ssm.Problem, got *ssm.Output, dt ssm.DType) (judge.Comparison, bool) {
	ref, err := mamba1.Scan(q, ssm.Float64)
	if err != nil {
		return judge.Comparison{}, false
	}
	sc, err := mamba1.ErrorScaleIn(q, dt.Precision())
	if err != nil {
		return judge.Comparison{}, false
	}
	largest := dt.Precision().Largest()
	masked := &ssm.Output{Out: append([]float64(nil), got.Out...), LastState: append([]float64(nil), got.LastState...)}
	kept := 0
	for i := range masked.Out {
		if sc.MagOut[i] > largest || sc.PathMagOut[i] > largest {
			masked.Out[i] = ref.Out[i]
		} else {
			kept++
		}
	}
	w := q.ElemWords()
	for i := range sc.PathMagState {
		if sc.PathMagState[i] > largest {
			copy(masked.LastState[i*w:(i+1)*w], ref.LastState[i*w:(i+1)*w])
		}
	}
	c, err := judge.CompareScan(q, masked, dt, ref, sc)
	return c, err == nil && kept > 0 && c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(dt)
}

func copyScale(sc *mamba1.Scale) *mamba1.Scale {
	c := *sc
	c.Out, c.TinyOut = append([]float64(nil), sc.Out...), append([]float64(nil), sc.TinyOut...)
	c.LastState, c.TinyState = append([]float64(nil), sc.LastState...), append([]float64(nil), sc.TinyState...)
	return &c
}

// where says which arrays fail, which part of a complex state, and from
// which step.
// rowPattern reads the structure of a failure that no slip explains: which
// (batch, channel) rows fail. Where the rows of the first batch entry all
// pass and only later entries' fail, a per-batch offset or stride is wrong
// (of u, Δ, z, variable B/C or out); likewise past the first group of
// channels (the groups' offset of variable B/C), past the first channel,
// or in the last row alone (its end: a bound or the tail of a buffer). The
// relation is reported with its evidence even though no named slip fits.
func rowPattern(p *ssm.Problem, got, ref *ssm.Output, sc *mamba1.Scale, dt ssm.DType) (tag, cause string, ok bool) {
	rows := p.Batch * p.Dim
	if rows < 2 || len(got.Out) != len(ref.Out) {
		return "", "", false
	}
	thr := judge.Threshold(dt)
	bad := make([]bool, rows)
	nbad := 0
	for i := range ref.Out {
		r := judge.OutputRatio(got.Out[i]-ref.Out[i], ref.Out[i], sc.Out[i], sc.TinyOut[i], dt)
		if (r > thr || math.IsNaN(r) || math.IsNaN(got.Out[i])) && !bad[i/p.Seqlen] {
			bad[i/p.Seqlen] = true
			nbad++
		}
	}
	if nbad == 0 || nbad == rows {
		return "", "", false
	}
	// only reports whether every failing row satisfies in, and every other
	// row passes: the failure is exactly the rows in selects.
	only := func(in func(b, d int) bool) bool {
		for r := 0; r < rows; r++ {
			if bad[r] != in(r/p.Dim, r%p.Dim) {
				return false
			}
		}
		return true
	}
	some := func(in func(b, d int) bool) bool {
		for r := 0; r < rows; r++ {
			if bad[r] && !in(r/p.Dim, r%p.Dim) {
				return false
			}
		}
		return true
	}
	perGroup := p.Dim / p.Groups
	evidence := fmt.Sprintf(" (%d of %d rows of batch × dim %d×%d fail)", nbad, rows, p.Batch, p.Dim)
	switch {
	case only(func(b, d int) bool { return b == p.Batch-1 && d == p.Dim-1 }):
		return "offset:last-row", "only the last (batch, channel) row fails: the end of a buffer or a loop bound" + evidence, true
	case p.Batch > 1 && some(func(b, d int) bool { return b > 0 }):
		return "offset:batch", "only rows of batch entries after the first fail, the first entry's are right: a per-batch offset or stride (of u, Δ, z, variable B/C, out or the state) is wrong" + evidence, true
	case p.Groups > 1 && (p.VariableB || p.VariableC) && some(func(b, d int) bool { return d/perGroup > 0 }):
		return "offset:group", "only channels past the first group fail, the first group's are right: the offset of a group's variable B/C is wrong" + evidence, true
	case p.Dim > 1 && some(func(b, d int) bool { return d > 0 }):
		return "offset:channel", "only channels after the first fail, each batch entry's first channel is right: a per-channel offset or stride (of A, D, delta_bias, u, Δ, z or out) is wrong" + evidence, true
	}
	return "", "", false
}

func where(p *ssm.Problem, got, ref *ssm.Output, sc *mamba1.Scale, dt ssm.DType) string {
	prec, thr := dt.Precision(), judge.Threshold(dt)
	firstT, outBad := -1, 0
	for i := range ref.Out {
		r := judge.OutputRatio(got.Out[i]-ref.Out[i], ref.Out[i], sc.Out[i], sc.TinyOut[i], dt)
		if r > thr || math.IsNaN(r) || math.IsNaN(got.Out[i]) {
			outBad++
			if t := i % p.Seqlen; firstT < 0 || t < firstT {
				firstT = t
			}
		}
	}
	stBad, reBad, imBad := 0, 0, 0
	for i := range sc.LastState {
		w := p.ElemWords()
		bad := func(k int) bool {
			r := mamba1.Ratio(got.LastState[i*w+k]-ref.LastState[i*w+k], sc.LastState[i], sc.TinyState[i], prec)
			return r > thr || math.IsNaN(r)
		}
		re, im := bad(0), p.Complex && bad(1)
		if re || im {
			stBad++
		}
		if re {
			reBad++
		}
		if im {
			imBad++
		}
	}
	var parts []string
	if outBad > 0 {
		s := fmt.Sprintf("out wrong at %d of %d elements from step %d", outBad, len(ref.Out), firstT)
		switch {
		case firstT == 0:
			s += " (the first)"
		case firstT >= 2048:
			s += " (only past the first 2048 steps: a chunk boundary)"
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "out right")
	}
	if stBad > 0 {
		s := fmt.Sprintf("last_state wrong at %d of %d", stBad, len(sc.LastState))
		if p.Complex {
			switch {
			case imBad == 0:
				s += " (real parts only)"
			case reBad == 0:
				s += " (imaginary parts only)"
			}
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "last_state right")
	}
	return strings.Join(parts, ", ")
}

// ratioPattern looks at kernel/reference over the elements of each array:
// a constant ratio, or one proportional to an input (per state: B, C, A;
// per output: D, u, z).
func ratioPattern(p *ssm.Problem, got, ref *ssm.Output) (tag, cause string) {
	type series struct {
		name, tag string
		r         []complex128
		in        map[string][]complex128
	}
	w := p.ElemWords()
	val := func(s []float64, i int) complex128 {
		if w == 2 {
			return complex(s[2*i], s[2*i+1])
		}
		return complex(s[i], 0)
	}
	st := series{name: "last_state", tag: "state", in: map[string][]complex128{}}
	for i := 0; i < p.StateLen()/w; i++ {
		d, n := i/p.Dstate%p.Dim, i%p.Dstate
		st.r = append(st.r, val(got.LastState, i)/val(ref.LastState, i))
		st.in["A[d][n]"] = append(st.in["A[d][n]"], val(p.A, d*p.Dstate+n))
		if !p.VariableB {
			st.in["B[d][n]"] = append(st.in["B[d][n]"], val(p.B, d*p.Dstate+n))
		}
		if !p.VariableC {
			st.in["C[d][n]"] = append(st.in["C[d][n]"], val(p.C, d*p.Dstate+n))
		}
	}
	out := series{name: "out", tag: "output", in: map[string][]complex128{}}
	for i := range ref.Out {
		out.r = append(out.r, complex(got.Out[i]/ref.Out[i], 0))
		out.in["u"] = append(out.in["u"], complex(p.U[i], 0))
		if p.D != nil {
			out.in["D[d]"] = append(out.in["D[d]"], complex(p.D[i/p.Seqlen%p.Dim], 0))
		}
		if p.Z != nil {
			out.in["z"] = append(out.in["z"], complex(p.Z[i], 0))
		}
	}
	for _, s := range []series{out, st} {
		if k, ok := simpleRatio(s.r); ok {
			return s.tag + "-factor", fmt.Sprintf("%s is %g × the reference (its one finite element: a shrunk case)", s.name, real(k))
		}
		if k, ok := constant(s.r); ok && cmplx.Abs(k-1) > 1e-3 {
			return s.tag + "-factor", fmt.Sprintf("%s is %.6g × the reference everywhere", s.name, k)
		}
		for name, in := range s.in {
			for _, pw := range []int{1, -1} {
				v := make([]complex128, len(s.r))
				for i := range v {
					if pw == 1 {
						v[i] = s.r[i] / in[i]
					} else {
						v[i] = s.r[i] * in[i]
					}
				}
				if k, ok := constant(v); ok {
					op := "×"
					if pw == -1 {
						op = "/"
					}
					return s.tag + "-ratio:" + name, fmt.Sprintf("%s = %.6g × reference %s %s: the ratio follows %s", s.name, k, op, name, name)
				}
			}
		}
	}
	return "", ""
}

// simpleRatio reports whether v has one finite element and it is a factor
// a slip makes (−1, ±2, ±½) to within 10⁻⁵: on the one element of a shrunk
// case a ratio is no pattern, unless it is one of these.
func simpleRatio(v []complex128) (complex128, bool) {
	var one []complex128
	for _, x := range v {
		if !cmplx.IsNaN(x) && !cmplx.IsInf(x) {
			one = append(one, x)
		}
	}
	if len(one) != 1 {
		return 0, false
	}
	for _, f := range []float64{-1, 2, -2, 0.5, -0.5} {
		if cmplx.Abs(one[0]-complex(f, 0)) <= 1e-5*math.Abs(f) {
			return complex(f, 0), true
		}
	}
	return 0, false
}

// constant reports whether every finite v is within 1e-3 of their median.
func constant(v []complex128) (complex128, bool) {
	var re []float64
	var im []float64
	for _, x := range v {
		if !cmplx.IsNaN(x) && !cmplx.IsInf(x) {
			re, im = append(re, real(x)), append(im, imag(x))
		}
	}
	if len(re) < 2 {
		return 0, false
	}
	k := complex(median(re), median(im))
	for i := range re {
		if cmplx.Abs(complex(re[i], im[i])-k) > 1e-3*math.Max(cmplx.Abs(k), 1e-30) {
			return k, false
		}
	}
	return k, true
}

// narrowArithmetic explains a failure whose size is that of a narrower
// arithmetic than dt's: the ratio scales with the unit roundoff, so a
// float32 kernel that passes the error model at 2⁻¹¹ (fp16, or TF32 in a
// matrix product) but not at 2⁻²⁴ computes part of its result with 11-bit
// significands; at 2⁻⁸, bfloat16's; a float64 kernel that passes at 2⁻²⁴
// computes in float32 somewhere. The coarsest such explanation is not
// given: a ratio beyond bfloat16's is a wrong formula, not rounding.
func narrowArithmetic(dt ssm.DType, ratio float64) (tag, cause string, ok bool) {
	th, u := judge.Threshold(dt), dt.Precision().UnitRoundoff()
	type rung struct {
		bits       int
		tag, names string
	}
	rungs := []rung{{11, "narrow:11-bit", "fp16, or TF32 in a matrix product"}, {8, "narrow:8-bit", "bfloat16"}}
	if dt == ssm.F64 {
		rungs = []rung{{24, "narrow:24-bit", "float32"}}
	}
	for _, r := range rungs {
		scale := math.Ldexp(1, -r.bits) / u
		if ratio/scale <= th {
			return r.tag, fmt.Sprintf("the error's size is that of rounding with %d-bit significands (%s) somewhere in the computation: "+
				"the worst ratio %.3g is %.2g at a unit roundoff of 2^-%d, within the threshold %g", r.bits, r.names, ratio, ratio/scale, r.bits, th), true
		}
	}
	return "", "", false
}

// outputTruncated explains a 16-bit dtype's failure whose every failing
// output lies toward zero from the reference within one ulp of the narrow
// type, while the state passes: the output is truncated (rounded toward
// zero, the upper bits of a float kept) instead of rounded to nearest.
func outputTruncated(p *ssm.Problem, got, ref *ssm.Output, sc *mamba1.Scale, dt ssm.DType) (tag, cause string, ok bool) {
	failing, toward := 0, 0
	for i, w := range ref.Out {
		g := got.Out[i]
		if r := judge.OutputRatio(g-w, w, sc.Out[i], sc.TinyOut[i], dt); !(r > judge.Threshold(dt)) {
			continue
		}
		failing++
		if math.Abs(g) <= math.Abs(w) && (g == 0 || math.Signbit(g) == math.Signbit(w)) && judge.ULPs(g, w, dt) <= 1 {
			toward++
		}
	}
	if failing == 0 || toward < failing {
		return "", "", false
	}
	for i := range sc.LastState {
		w := p.ElemWords()
		for k := 0; k < w; k++ {
			if r := mamba1.Ratio(got.LastState[i*w+k]-ref.LastState[i*w+k], sc.LastState[i], sc.TinyState[i], dt.Precision()); r > judge.Threshold(dt) {
				return "", "", false
			}
		}
	}
	return "output-truncated", fmt.Sprintf("the %v output is truncated, not rounded to nearest: every one of the %d failing outputs lies toward 0 from "+
		"the reference within one %v ulp, and the float32 state is right", dt, failing, dt), true
}

// halfOverflow explains non-finite results of a float32 kernel where the
// reference is finite and its output or state exceeds fp16's largest
// number, 65504, though not float32's: an intermediate kept in half
// precision overflows.
func halfOverflow(dt ssm.DType, nonFinite int, ref *ssm.Output) (tag, cause string, ok bool) {
	if dt != ssm.F32 || nonFinite == 0 {
		return "", "", false
	}
	big := 0.0
	for _, v := range append(append([]float64(nil), ref.Out...), ref.LastState...) {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return "", "", false
		}
		big = math.Max(big, math.Abs(v))
	}
	if big <= ssm.Float16Max || big > math.MaxFloat32 {
		return "", "", false
	}
	return "narrow:fp16-overflow", fmt.Sprintf("%d results are ±Inf or NaN where the reference is finite, with magnitudes up to %.3g: "+
		"beyond fp16's largest number %g, within float32's: an intermediate kept in half precision overflows", nonFinite, big, float64(ssm.Float16Max)), true
}
