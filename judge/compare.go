package judge

import (
	"fmt"
	"math"
	"math/cmplx"
	"strings"

	"ssmverify/contain"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// Thresholds on the scaled error ratio |kernel − reference| / (u·S + η·T)
// (mamba1.Ratio). The error scale S is a first-order bound on what a
// correct implementation can err by, including the libm routes a kernel may
// take (exp as exp2(x·log2e), expm1, log1p within an ulp or two), so a
// correct kernel stays at or below about 1. Measured maxima of the project's
// correct kernels (2026-11-25): the CPU build over 16,599 comparisons
// (RAPID_SEED=1 go test ./verify -rapid.checks=1500: accuracy properties,
// sweeps, golden cases, fp32 vs fp64) reached 1.04 in fp32 and 0.98 in
// fp64; the CUDA build on the H200 0.89 in fp32 and 0.99 in fp64 (the
// suite's default draws: scripts/gpu.sh mutants, its baseline). The
// threshold, 4, is that maximum with a 4× margin for other libm
// implementations and summation orders. A logic error shows up at 10⁶
// (fp32) to 10¹⁴ (fp64). The smallest planted bugs of the mutation
// catalogue sit just past it: log2(e) wrong in the 5th digit (fp32 only)
// fails at 4.0 to 52 (the worst per method 38–52), foh's series guard
// narrowed to |x| < 0.03 at 4.2 and 4.3 (ssmk_discretize's sweep, where
// 20u of cancellation meets φ1's scale near 0).
const (
	ThresholdF32 = 4.0
	ThresholdF64 = 4.0
)

// Threshold returns the ratio threshold for a dtype.
func Threshold(dt ssm.DType) float64 {
	if dt == ssm.F64 {
		return ThresholdF64
	}
	return ThresholdF32
}

// Margin is the error a value of scale S may carry and still pass, over
// S: the threshold in units of the dtype's unit roundoff. The fuzz
// targets ask with it whether a state on the way to an element came within
// its error bound of the dtype's range.
func Margin(dt ssm.DType) float64 { return Threshold(dt) * dt.Precision().UnitRoundoff() }

// Worst describes the worst element of a comparison.
type Worst struct {
	Ratio float64 // scaled error ratio
	// ULP is the error in units of the last place, in the kernel's dtype,
	// of the magnitude of the element's terms (the larger of |reference|
	// and the bound on its terms' magnitudes, mamba1.Scale's MagOut and
	// MagState; the modulus for a complex state): normwise, as the ratio
	// is, so that an element that cancels to near 0, or a complex state's
	// component near 0, does not read as millions of ulp.
	ULP       float64
	Array     string  // "out" or "last_state"
	Index     []int   // [b, d, t] or [b, d, n]
	Got, Want float64 // kernel and reference values (real part for complex state)
	// Note is set when the problem itself leaves the dtype's range, so that
	// the failure it causes is not read as the kernel's.
	Note string
}

func (w Worst) String() string {
	s := fmt.Sprintf("%s%v: kernel %.9g, reference %.17g, ratio %.3g, %.3g ulp", w.Array, w.Index, w.Got, w.Want, w.Ratio, w.ULP)
	if w.Note != "" {
		s += "; " + w.Note
	}
	return s
}

// Comparison is the result of comparing one kernel scan with the reference.
type Comparison struct {
	Worst    Worst
	Elements int
	// NonFinite counts kernel values that are NaN or ±Inf where the
	// reference is finite: always a failure.
	NonFinite int
	// Unmatched counts elements whose reference is NaN or ±Inf and whose
	// kernel value is not the same (NaN for NaN, the same infinity): a
	// finite answer where there is none is a failure, never a silent pass.
	Unmatched int
	// Beyond is the largest of the error scale's magnitude bounds (every
	// intermediate of any evaluation order, Mag, the states on the way to an
	// element, PathMag, and the products of Ā that a time-parallel scan
	// forms, Decay) where it exceeds the dtype's
	// largest finite number, else 0. Such a problem may have no result a
	// kernel of that dtype can be held to (its state overflows, then ∞·0
	// gives NaN where the reference is tiny): a failure still fails, and
	// Worst.Note says why it may not be the kernel's.
	Beyond float64
}

// Passed reports whether every element is within the threshold.
func (c Comparison) Passed(dt ssm.DType) bool {
	return c.NonFinite == 0 && c.Unmatched == 0 && c.Worst.Ratio <= Threshold(dt)
}

// OutputRatio is the scaled error ratio of an output element: Ratio's
// |diff| / (u·S + η·T) for F32 and F64. For a 16-bit dtype the kernel
// computes in float32 and rounds each output once to the narrow type, so
// the ratio is of the error beyond that rounding, max(0, |diff| − ρ) /
// (u·S + η·T) in float32's u and η, with ρ the rounding's bound at any
// value a correct float32 evaluation can reach (within the threshold θ of
// the model): ρ = u_out·(|want| + θ·(u·S + η·T)) + spacing/2 (u_out = 2⁻¹¹
// for fp16, 2⁻⁸ for bf16: half an ulp relative to the value; spacing/2,
// half the narrow type's subnormal spacing, below its normal range). The
// rounding is exact arithmetic, not a model, so it needs no margin: a
// kernel that rounds to nearest stays at the float32 arithmetic's ≲ 1,
// while one that truncates (up to a whole ulp), or keeps its state, Δ or
// Δ·A in 16 bits (errors of u_out times the terms' magnitudes), exceeds it
// by orders of magnitude (the planted bugs of cmd/mutants: 736 to 6120).
func OutputRatio(diff, want, scale, tiny float64, dt ssm.DType) float64 {
	if !dt.Narrow() {
		return mamba1.Ratio(diff, scale, tiny, dt.Precision())
	}
	return roundedRatio(diff, math.Abs(want), scale, tiny, dt, 1)
}

// roundedRatio is OutputRatio's ratio for a value of the 16-bit type dt
// made of words stored words (2 for a complex gradient), each rounded once:
// ρ per word at the value's magnitude mag, √words·ρ for the modulus of the
// error.
func roundedRatio(diff, mag, scale, tiny float64, dt ssm.DType, words int) float64 {
	prec := dt.Precision()
	model := prec.UnitRoundoff()*scale + prec.Tiny()*tiny
	rho := math.Sqrt(float64(words)) * (dt.OutputRoundoff()*(mag+Threshold(dt)*model) + dt.OutputSpacing()/2)
	switch d := math.Abs(diff) - rho; {
	case math.IsNaN(d):
		return math.NaN()
	case d <= 0:
		return 0
	default:
		return d / model
	}
}

// outputMayOverflow reports whether a correct kernel of a 16-bit dtype may
// store got, ±Inf, for an output whose reference is want (finite): its
// float32 value, anywhere within the threshold of the model around want,
// may reach the narrow type's overflow point with got's sign (fp16: 65520,
// from which rounding to nearest gives ∞).
func outputMayOverflow(got, want, scale, tiny float64, dt ssm.DType) bool {
	if !dt.Narrow() || !math.IsInf(got, 0) {
		return false
	}
	prec := dt.Precision()
	reach := Threshold(dt) * (prec.UnitRoundoff()*scale + prec.Tiny()*tiny)
	if got > 0 {
		return want+reach >= dt.OutputOverflow()
	}
	return want-reach <= -dt.OutputOverflow()
}

// ULPs is the distance between got and want in units of the last place of
// want in the dtype (at least the dtype's smallest normal's ulp; for a want
// beyond float32's range, the ulp at its top, 2¹⁰⁴; for a 16-bit dtype,
// the ulp of its narrow type, the output's).
func ULPs(got, want float64, dt ssm.DType) float64 {
	if got == want {
		return 0
	}
	if math.IsNaN(got) || math.IsNaN(want) || math.IsInf(got, 0) || math.IsInf(want, 0) {
		return math.Inf(1)
	}
	if dt.Narrow() {
		return math.Abs(got-want) / narrowULP(want, dt)
	}
	if dt == ssm.F64 {
		w := math.Max(math.Abs(want), 0x1p-1022)
		return math.Abs(got-want) / (math.Nextafter(w, math.Inf(1)) - w)
	}
	if math.Abs(want) > math.MaxFloat32 {
		return math.Abs(got-want) / 0x1p104
	}
	w := float32(math.Max(math.Abs(want), 0x1p-126))
	return math.Abs(got-want) / float64(math.Nextafter32(w, float32(math.Inf(1)))-w)
}

// narrowULP is the spacing of the 16-bit type's values at |want| (that of
// its normal range's bottom below it, of its top above it).
func narrowULP(want float64, dt ssm.DType) float64 {
	bits, minNormal := 11, ssm.Float16MinNormal
	if dt == ssm.BF16 {
		bits, minNormal = 8, 0x1p-126
	}
	_, e := math.Frexp(math.Min(math.Max(math.Abs(want), minNormal), dt.OutputLargest())) // ∈ [2^(e−1), 2^e)
	return math.Ldexp(1, e-bits)
}

// ULPsOf is |diff| in units of the last place of mag (≥ 0) in the dtype:
// ULPs's measure with the error taken against a magnitude rather than a
// value.
func ULPsOf(diff, mag float64, dt ssm.DType) float64 {
	if diff == 0 {
		return 0
	}
	if math.IsNaN(diff) || math.IsInf(diff, 0) || math.IsInf(mag, 0) || math.IsNaN(mag) {
		return math.Inf(1)
	}
	return ULPs(mag+math.Abs(diff), mag, dt)
}

// CompareScan compares a kernel's scan of p (in dtype dt) with the float64
// reference and its error scale. The reference output and the scale may be
// passed in to avoid recomputing them (nil: computed here, the scale by
// mamba1.ErrorScaleIn in dt's precision).
func CompareScan(p *ssm.Problem, got *ssm.Output, dt ssm.DType, ref *ssm.Output, sc *mamba1.Scale) (c Comparison, err error) {
	defer func() {
		if e := contain.Recovered(recover(), "judge.CompareScan", p.Shape); e != nil {
			c, err = Comparison{}, e
		}
	}()
	return compareScan(p, got, dt, ref, sc)
}

func compareScan(p *ssm.Problem, got *ssm.Output, dt ssm.DType, ref *ssm.Output, sc *mamba1.Scale) (Comparison, error) {
	var err error
	if ref == nil {
		if ref, err = mamba1.Scan(p, ssm.Float64); err != nil {
			return Comparison{}, err
		}
	}
	prec := dt.Precision()
	if sc == nil {
		// in dt's precision: where x's rounding can reach bilinear's pole
		// the first-order scale is not a bound (mamba1.ErrorScaleIn)
		if sc, err = mamba1.ErrorScaleIn(p, prec); err != nil {
			return Comparison{}, err
		}
	}
	if got == nil {
		return Comparison{}, fmt.Errorf("judge: the kernel returned no output")
	}
	if len(got.Out) != len(ref.Out) || len(got.LastState) != len(ref.LastState) {
		return Comparison{}, fmt.Errorf("judge: the kernel returned %d outputs and %d state words, want %d and %d", len(got.Out), len(got.LastState), len(ref.Out), len(ref.LastState))
	}
	states := len(ref.LastState) / p.ElemWords()
	if len(sc.Out) != len(ref.Out) || len(sc.TinyOut) != len(ref.Out) || len(sc.MagOut) != len(ref.Out) ||
		len(sc.LastState) != states || len(sc.TinyState) != states || len(sc.MagState) != states {
		return Comparison{}, fmt.Errorf("judge: the error scale is not of the reference's problem (%d outputs, want %d): a caller's inconsistency", len(sc.Out), len(ref.Out))
	}
	var c Comparison
	note := func(r, g, w, ulp float64, array string, idx []int, overflowOK bool) {
		c.Elements++
		if math.IsNaN(w) || math.IsInf(w, 0) {
			if !(math.IsNaN(w) && math.IsNaN(g)) && g != w {
				c.Unmatched++
				if c.Unmatched == 1 {
					c.Worst = Worst{Ratio: math.Inf(1), ULP: math.Inf(1), Array: array, Index: idx, Got: g, Want: w,
						Note: "the reference is not finite here and the kernel does not match it"}
				}
			}
			return
		}
		if math.IsNaN(r) || (math.IsInf(g, 0) && !overflowOK) { // a non-finite kernel value; the reference is finite here
			c.NonFinite++
			r = math.Inf(1)
		}
		if r > c.Worst.Ratio || (c.Worst.Array == "" && c.Elements == 1) {
			c.Worst = Worst{Ratio: r, ULP: ulp, Array: array, Index: idx, Got: g, Want: w}
		}
	}
	L, N := p.Seqlen, p.Dstate
	for i := range ref.Out {
		g, w := got.Out[i], ref.Out[i]
		r := OutputRatio(g-w, w, sc.Out[i], sc.TinyOut[i], dt)
		if math.IsNaN(g) {
			r = math.NaN()
		}
		ok := outputMayOverflow(g, w, sc.Out[i], sc.TinyOut[i], dt)
		if ok {
			r = 0
		}
		note(r, g, w, ULPsOf(g-w, math.Max(math.Abs(w), sc.MagOut[i]), dt), "out", []int{i / (p.Dim * L), i / L % p.Dim, i % L}, ok)
	}
	for i := range sc.LastState {
		var d, g, w, mag float64
		if p.Complex {
			gc := complex(got.LastState[2*i], got.LastState[2*i+1])
			wc := complex(ref.LastState[2*i], ref.LastState[2*i+1])
			d, g, w, mag = cmplx.Abs(gc-wc), real(gc), real(wc), cmplx.Abs(wc)
		} else {
			g, w = got.LastState[i], ref.LastState[i]
			d, mag = g-w, math.Abs(w)
		}
		r := mamba1.Ratio(d, sc.LastState[i], sc.TinyState[i], prec)
		if math.IsNaN(d) {
			r = math.NaN()
		}
		note(r, g, w, ULPsOf(d, math.Max(mag, sc.MagState[i]), dt.Weight()), "last_state", []int{i / (p.Dim * N), i / N % p.Dim, i % N}, false)
	}
	largest, name := prec.Largest(), prec.String()
	// PathMagState is at least MagState (the state's own terms): no need to read both.
	for _, bounds := range [][]float64{sc.MagOut, sc.PathMagOut, sc.PathMagState, sc.DecayOut, sc.DecayState} {
		for _, v := range bounds {
			if v > largest && v > c.Beyond {
				c.Beyond = v
			}
		}
	}
	if c.Beyond > 0 {
		c.Worst.Note = fmt.Sprintf("the problem may leave %s's range (the error scale bounds an intermediate by %.3g > %.3g): "+
			"a %s kernel may overflow where the reference does not; suspect the problem or its generator before the kernel", name, c.Beyond, largest, name)
	}
	return c, nil
}

// DiscretizePoint is one (Δ, a) of ssmk_discretize judged against the
// reference: the kernel's Ā and Bcoef = Δ·g beside the reference's, their
// scaled error ratios (mamba1.DiscretizeScale; +Inf where the kernel
// gives NaN) and the larger normwise ulp error (against the modulus, and
// for bilinear's Ā, which cancels to 0 at x = −2, against its terms'
// (1 + |x|/2)/|1 − x/2|).
type DiscretizePoint struct {
	Delta                            float64
	A, X                             complex128
	Abar, Bcoef, WantAbar, WantBcoef complex128
	RatioAbar, RatioBcoef, ULP       float64
}

// Ratio is the point's larger ratio, which decides.
func (p DiscretizePoint) Ratio() float64 { return math.Max(p.RatioAbar, p.RatioBcoef) }

func (p DiscretizePoint) String() string {
	return fmt.Sprintf("x = %.6g: Ā kernel %v ref %v, Δg kernel %v ref %v", p.X, p.Abar, p.WantAbar, p.Bcoef, p.WantBcoef)
}

// CompareDiscretize judges ssmk_discretize's outputs abar and bcoef at
// (delta[i], a[i]) (complex a, abar and bcoef interleaved). Points whose
// reference value is not finite or beyond the dtype's range are left out:
// the fuzzers' non-finite policy covers them.
func CompareDiscretize(m ssm.Method, dt ssm.DType, isComplex bool, delta, a, abar, bcoef []float64) []DiscretizePoint {
	prec := dt.Precision()
	limit := prec.Largest()
	at := func(s []float64, i int) complex128 {
		if isComplex {
			return complex(s[2*i], s[2*i+1])
		}
		return complex(s[i], 0)
	}
	var pts []DiscretizePoint
	for i := range delta {
		p := DiscretizePoint{Delta: delta[i], A: at(a, i), Abar: at(abar, i), Bcoef: at(bcoef, i)}
		p.X = complex(p.Delta, 0) * p.A
		var wg complex128
		if isComplex {
			p.WantAbar, wg = mamba1.Complex(m, p.X)
		} else {
			ra, rg := mamba1.Real(m, real(p.X))
			p.WantAbar, wg = complex(ra, 0), complex(rg, 0)
		}
		p.WantBcoef = complex(p.Delta, 0) * wg
		if cmplx.Abs(p.WantAbar) > limit || cmplx.Abs(p.WantBcoef) > limit || cmplx.IsNaN(p.WantAbar) || cmplx.IsInf(p.WantAbar) {
			continue
		}
		sA, sB := mamba1.DiscretizeScale(m, p.Delta, p.A, isComplex)
		p.RatioAbar = mamba1.Ratio(cmplx.Abs(p.Abar-p.WantAbar), sA, 2, prec)
		p.RatioBcoef = mamba1.Ratio(cmplx.Abs(p.Bcoef-p.WantBcoef), sB, 2, prec)
		if cmplx.IsNaN(p.Abar) || cmplx.IsNaN(p.Bcoef) {
			p.RatioAbar = math.Inf(1)
		}
		magA := cmplx.Abs(p.WantAbar)
		if m == ssm.Bilinear {
			magA = math.Max(magA, (1+cmplx.Abs(p.X)/2)/cmplx.Abs(1-p.X/2))
		}
		p.ULP = math.Max(ULPsOf(cmplx.Abs(p.Abar-p.WantAbar), magA, dt), ULPsOf(cmplx.Abs(p.Bcoef-p.WantBcoef), cmplx.Abs(p.WantBcoef), dt))
		pts = append(pts, p)
	}
	return pts
}

// WorstByArray says each array's worst ratio (of CompareArrays' ratios), in
// the arrays' order: "dx 0.0035, ddt 0.0011" — a NaN ratio is the worst.
func WorstByArray(arrays []Array, ratios map[string][]float64) string {
	parts := make([]string, 0, len(arrays))
	for _, a := range arrays {
		var w float64
		for _, r := range ratios[a.Name] {
			if r > w || math.IsNaN(r) {
				w = r
			}
		}
		parts = append(parts, fmt.Sprintf("%s %.3g", a.Name, w))
	}
	return strings.Join(parts, ", ")
}
