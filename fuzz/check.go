package fuzz

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"ssmverify/cudalib"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// HangLimit is how long one library call may take before the fuzzers call it
// a hang: inputs are at most a few thousand elements, so any correct kernel
// answers in milliseconds.
var HangLimit = 20 * time.Second

// withDeadline runs call, failing if it has not returned within HangLimit.
// A hung call leaves its goroutine behind; the failure ends the run.
func withDeadline(what string, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(HangLimit):
		return fmt.Errorf("%s did not return within %v (a hang)", what, HangLimit)
	}
}

// Failure lists what one fuzz input made a kernel do wrong.
type Failure struct {
	Input    string   // the decoded input, for the report
	Problems []string // one line each, at most maxProblems
	More     int      // problems not listed
}

const maxProblems = 8

func (f *Failure) add(format string, args ...any) {
	if len(f.Problems) < maxProblems {
		f.Problems = append(f.Problems, fmt.Sprintf(format, args...))
	} else {
		f.More++
	}
}

func (f *Failure) err() error {
	if len(f.Problems) == 0 {
		return nil
	}
	s := f.Input + ":\n  " + strings.Join(f.Problems, "\n  ")
	if f.More > 0 {
		s += fmt.Sprintf("\n  … and %d more", f.More)
	}
	return fmt.Errorf("%s", s)
}

// String describes a decoded discretize input.
func (in DiscretizeInput) String() string {
	kind := ssm.AKind(in.IsComplex)
	return fmt.Sprintf("discretize %v %v %s, %d elements", in.Method, in.DType, kind, len(in.Delta))
}

// element returns (Δ, a) of element i.
func (in DiscretizeInput) element(i int) (float64, complex128) {
	if in.IsComplex {
		return in.Delta[i], complex(in.A[2*i], in.A[2*i+1])
	}
	return in.Delta[i], complex(in.A[i], 0)
}

// CheckDiscretize runs ssmk_discretize on the input once, with guarded,
// unwritten outputs (guardedCall), and judges every output by the
// non-finite policy. A method the library declares as a complex-A fallback
// to zoh is judged against zoh.
func CheckDiscretize(lib *cudalib.Library, in DiscretizeInput) error {
	n := len(in.Delta)
	delta, a := cudalib.NewArray(in.Delta, in.DType), cudalib.NewArray(in.A, in.DType)
	ab, bc := cudalib.Unwritten(len(in.A), in.DType), cudalib.Unwritten(len(in.A), in.DType)
	f := &Failure{Input: in.String()}
	if !guardedCall(f, lib, "ssmk_discretize", in.Method, in.DType, in.IsComplex, func() error {
		return lib.DiscretizeInto(in.Method, in.IsComplex, delta, a, ab, bc)
	}) {
		return f.err()
	}
	m := in.Method
	if in.IsComplex && lib.Capabilities(m, in.DType, true).ComplexZOHFallback() {
		m = ssm.ZOH
	}
	prec := natural(in.DType)
	kab, kbc := ab.Float64s(), bc.Float64s()
	for i := 0; i < n; i++ {
		d, av := in.element(i)
		wa, wb := mamba1.DiscretizeAt(m, ssm.Float64, in.IsComplex, d, av)
		sa, sb := mamba1.DiscretizeAt(m, prec, in.IsComplex, d, av)
		scA, scB := mamba1.DiscretizeScale(m, d, av, in.IsComplex)
		var ga, gb complex128
		if in.IsComplex {
			ga, gb = complex(kab[2*i], kab[2*i+1]), complex(kbc[2*i], kbc[2*i+1])
		} else {
			ga, gb = complex(kab[i], 0), complex(kbc[i], 0)
		}
		for _, o := range []struct {
			name          string
			got, want, in complex128
			scale         float64
		}{{"Abar", ga, wa, sa, scA}, {"Bcoef", gb, wb, sb, scB}} {
			v := judge.Element{Kernel: o.got, Exact: o.want, InDtype: o.in, Scale: o.scale, Tiny: 2, IsComplex: in.IsComplex,
				OnInfinity: onInfinity(d, av, in.IsComplex, in.DType)}
			if why := judge.Judge(v, in.DType, policyOf(lib, in.Method, in.DType, in.IsComplex)); why != "" {
				f.add("%s[%d] at Δ = %v, a = %v: %s", o.name, i, d, fmtA(av, in.IsComplex), why)
			}
		}
	}
	return f.err()
}

func fmtA(a complex128, isComplex bool) string {
	if isComplex {
		return fmt.Sprint(a)
	}
	return fmt.Sprint(real(a))
}

// CheckScan runs ssmk_scan_fwd on p in dtype dt once (last_state NULL
// unless withState), with guarded, unwritten outputs (guardedCall), and
// judges every output element by the non-finite policy.
func CheckScan(lib *cudalib.Library, p *ssm.Problem, dt ssm.DType, withState bool) error {
	// A library that declares what its scan takes (ssmk_scan_features) is
	// given the input as it takes it; one it cannot take is not judged.
	decl, err := lib.Features(p.Method, dt, p.Complex)
	if err != nil {
		return err
	}
	if p.InitialState != nil && !(lib.Capabilities(p.Method, dt, p.Complex).InitialState() && lib.HasInitialState()) {
		return nil // a scan from a state is not declared: not judged
	}
	if p, _, err = decl.Fit(p); err != nil {
		return nil
	}
	f := &Failure{Input: fmt.Sprintf("scan %s %v last_state=%t", p.Shape(), dt, withState)}
	b, err := lib.NewScanBuffers(p, dt)
	if err != nil { // the decoder makes valid problems: a rejection is a binding or decoder bug
		f.add("library error: %v", err)
		return f.err()
	}
	// the state's buffer is kept back, and the library passed NULL, unless withState
	state := cudalib.Unwritten(p.StateLen(), dt.Weight())
	b.Out, b.LastState = cudalib.Unwritten(p.OutLen(), dt), cudalib.Array{}
	if withState {
		b.LastState = state
	}
	if !guardedCall(f, lib, "ssmk_scan_fwd", p.Method, dt, p.Complex, func() error { return lib.RunScan(b) }) {
		return f.err()
	}
	if !withState && !state.Untouched() {
		f.add("last_state was NULL but the library wrote the buffer kept for it")
	}
	ref := p
	if p.Complex && lib.Capabilities(p.Method, dt, p.Complex).ComplexZOHFallback() {
		ref = p.Clone()
		ref.Method = ssm.ZOH
	}
	var gs []float64
	if withState {
		gs = b.LastState.Float64s()
	}
	pol := policyOf(lib, p.Method, dt, p.Complex)
	if pol == judge.FiniteOnly && !finiteInputs(p) {
		return f.err() // NaN and ±Inf inputs are the policy's alone: the guards above still hold
	}
	if err := judgeScan(f, p, ref, dt, b.Out.Float64s(), gs, pol); err != nil {
		if ref == p {
			return fmt.Errorf("%w\n  diagnosis: %s", err, diagnoseFuzz(lib, p, dt))
		}
		return err
	}
	return nil
}

// PolicyEnv names the environment variable that holds every library to the
// non-finite policy (SSMK_NONFINITE_POLICY=1; the gate's -nonfinite sets
// it), whatever it declares.
const PolicyEnv = "SSMK_NONFINITE_POLICY"

// policyOf is how much of the non-finite policy a call of lib for (m, dt,
// real/complex A) is held to: all of it where the library declares
// SSMK_CAP_NONFINITE for the combination or the run asks for it
// (PolicyEnv), else what the error model covers (judge.FiniteOnly).
func policyOf(lib *cudalib.Library, m ssm.Method, dt ssm.DType, isComplex bool) judge.Policy {
	if os.Getenv(PolicyEnv) == "1" || lib.Capabilities(m, dt, isComplex).NonFinitePolicy() {
		return judge.NonFinitePolicy
	}
	return judge.FiniteOnly
}

// diagnoseFuzz is the diagnosis of a failing fuzz scan (package diagnose).
// The error model behind a diagnosis holds for finite inputs: an input
// with NaN or ±Inf is diagnosed with those values set to 0, where it still
// fails, and otherwise said to fail only through them.
func diagnoseFuzz(lib *cudalib.Library, p *ssm.Problem, dt ssm.DType) string {
	if finiteInputs(p) {
		return diagnose.Scan(lib, p, dt).String()
	}
	q := p.Clone()
	for _, s := range [][]float64{q.U, q.Delta, q.A, q.B, q.C, q.D, q.Z, q.DeltaBias} {
		for i, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				s[i] = 0
			}
		}
	}
	f := diagnose.Scan(lib, q, dt)
	if f.Tag == "" {
		return "none fits: the failure needs the input's NaN or ±Inf (with them set to 0 the kernel passes); the non-finite policy judged it"
	}
	return f.String() + "; diagnosed on the input with its NaN and ±Inf set to 0"
}

func finiteInputs(p *ssm.Problem) bool {
	for _, s := range [][]float64{p.U, p.Delta, p.A, p.B, p.C, p.D, p.Z, p.DeltaBias} {
		for _, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

// judgeScan judges a kernel's scan outputs got and, unless nil, its last
// state gs against the references of ref (p itself, or p as zoh where the
// library declares complex A's fallback), adding what it finds to f.
func judgeScan(f *Failure, p, ref *ssm.Problem, dt ssm.DType, got, gs []float64, pol judge.Policy) error {
	exact, err := mamba1.Scan(ref, ssm.Float64)
	if err != nil {
		return err
	}
	stateBad := firstNonFiniteState(p)
	reached := reachedByNonFinite(p, stateBad)
	if err := unboundRows(ref, exact, reached, stateBad); err != nil {
		return err
	}
	inDtype, err := mamba1.Scan(ref, natural(dt))
	if err != nil {
		return err
	}
	sc, err := mamba1.ErrorScaleIn(ref, natural(dt))
	if err != nil {
		return err
	}
	// Rows in which the dtype's evaluation overflowed an intermediate: an
	// output beyond the dtype's range, or non-finite in the dtype only; and
	// (below) elements whose terms' magnitude exceeds the range, where the
	// kernel's order of summation may overflow although the reference's
	// does not (the H200 kernel's butterfly reduction did, at an output of
	// −3.29e38 = 0.97·FLT_MAX).
	prec := dt.Precision()
	max := prec.Largest()
	// A state within its error bound of the range on the way to an element:
	// a kernel's rounding may carry it over, as rule 1b says of the element
	// itself (mamba1.Scale's PathMagOut).
	margin := judge.Margin(dt)
	edge := func(mag, scale float64) bool { return mag+margin*scale >= max }
	overflowed := make([]bool, p.Batch*p.Dim)
	xOver := firstXOverflow(p, max)
	for i, e := range exact.Out {
		finite := !nonFinite(e)
		if finite && (math.Abs(e) > max || nonFinite(inDtype.Out[i])) {
			overflowed[i/p.Seqlen] = true
		}
	}
	// Where every input an element depends on is finite, a NaN scale can
	// only come from an overflowed bound (∞·0 inside it): say so, so that
	// Judge does not read it as "an unreached NaN input".
	for i := range sc.Out {
		if math.IsNaN(sc.Out[i]) && !reached[i] {
			sc.Out[i] = math.Inf(1)
		}
	}
	for i := range sc.LastState {
		if math.IsNaN(sc.LastState[i]) && stateBad[i] == p.Seqlen {
			sc.LastState[i] = math.Inf(1)
		}
	}
	// Where every input an element reads is finite but its terms' magnitude
	// overflows float64 itself, the reference's own sums may overflow where
	// the true value does not (FuzzScan on the H200: u = DBL_MAX made
	// 2·Re Σ C·h overflow in the reference, while the kernel's order gave
	// the finite 8.7e306): such an element is not judged.
	unjudged := func(magnitude float64, bad bool) bool { return !bad && math.IsInf(magnitude, 1) }
	// A time-parallel scan's products of Ā may flush below η, losing part of
	// an element's decayed terms: min(η·Peak, Reach) more (mamba1.Scale's
	// PeakOut, ReachOut), in units of η.
	eta := prec.Tiny()
	tiny := func(t, peak, reach float64) float64 { return t + math.Min(peak, reach/eta) }
	for i := range got {
		if unjudged(sc.MagOut[i], reached[i]) {
			continue
		}
		v := judge.Element{Kernel: complex(got[i], 0), Exact: complex(exact.Out[i], 0), InDtype: complex(inDtype.Out[i], 0),
			Scale: sc.Out[i], Tiny: tiny(sc.TinyOut[i], sc.PeakOut[i], sc.ReachOut[i]), Sum: true, Rounded: dt.Narrow(),
			OnInfinity: overflowed[i/p.Seqlen] || sc.MagOut[i] > max || sc.DecayOut[i] > max || i%p.Seqlen >= xOver[i/p.Seqlen] ||
				edge(sc.PathMagOut[i], sc.PathScaleOut[i])}
		if why := judge.Judge(v, dt, pol); why != "" {
			f.add("out[%d %d %d]: %s", i/(p.Dim*p.Seqlen), i/p.Seqlen%p.Dim, i%p.Seqlen, why)
		}
	}
	if gs != nil {
		for i := range sc.LastState {
			if unjudged(sc.MagState[i], stateBad[i] < p.Seqlen) {
				continue
			}
			v := judge.Element{Scale: sc.LastState[i], Tiny: tiny(sc.TinyState[i], sc.PeakState[i], sc.ReachState[i]), IsComplex: p.Complex, Sum: true,
				OnInfinity: overflowed[i/p.Dstate] || sc.MagState[i] > max || sc.DecayState[i] > max || xOver[i/p.Dstate] < p.Seqlen ||
					edge(sc.PathMagState[i], sc.PathScaleState[i])}
			if p.Complex {
				v.Kernel = complex(gs[2*i], gs[2*i+1])
				v.Exact = complex(exact.LastState[2*i], exact.LastState[2*i+1])
				v.InDtype = complex(inDtype.LastState[2*i], inDtype.LastState[2*i+1])
			} else {
				v.Kernel, v.Exact, v.InDtype = complex(gs[i], 0), complex(exact.LastState[i], 0), complex(inDtype.LastState[i], 0)
			}
			if why := judge.Judge(v, dt, pol); why != "" {
				N := p.Dstate
				f.add("last_state[%d %d %d]: %s", i/(p.Dim*N), i/N%p.Dim, i%N, why)
			}
		}
	}
	return f.err()
}

// guardedCall runs one library call under the hang deadline and records
// in f what went wrong: a library error, or a write outside a buffer or
// into an input (the binding guards every array it makes and checksums the
// inputs around each call: cudalib.MemoryError). It reports whether the
// outputs are there to judge: not after an error, nor after a refusal the
// library declared (SSMK_EUNSUPPORTED for an unsupported combination, which
// is not a failure); after a memory fault they are, and judged too.
func guardedCall(f *Failure, lib *cudalib.Library, name string, m ssm.Method, dt ssm.DType, isComplex bool, call func() error) bool {
	err := withDeadline(name, call)
	if declaredUnsupported(lib, err, name, m, dt, isComplex) {
		return false
	}
	if _, ok := cudalib.IsMemoryError(err); ok {
		f.add("%v", err)
		return true
	}
	if err != nil {
		f.add("library error: %v", err)
		return false
	}
	return true
}

// declaredUnsupported reports whether err is SSMK_EUNSUPPORTED for a
// combination the library's capabilities declare unsupported (for a
// discretize call, also one declared scan only): an honest refusal, not a
// failure.
func declaredUnsupported(lib *cudalib.Library, err error, call string, m ssm.Method, dt ssm.DType, isComplex bool) bool {
	if !errors.Is(err, cudalib.EUnsupported) {
		return false
	}
	c := lib.Capabilities(m, dt, isComplex)
	return !c.Supported() || (c.ScanOnly() && strings.Contains(call, "discretize"))
}

// natural is the reference evaluation a plain kernel of dtype dt performs:
// Float32, or Float64Natural for float64.
func natural(dt ssm.DType) ssm.Precision {
	if dt.Precision() == ssm.Float32 { // F32, and the 16-bit inputs' float32 arithmetic
		return ssm.Float32
	}
	return ssm.Float64Natural
}

// onInfinity reports whether x = Δ·a in dtype dt has an infinite part
// although Δ and a are finite (overflow), or, for complex a, at all.
func onInfinity(delta float64, a complex128, isComplex bool, dt ssm.DType) bool {
	max := dt.Precision().Largest()
	inf := func(f float64) bool {
		p := delta * f
		if math.IsInf(delta, 0) || math.IsInf(f, 0) {
			return isComplex && !math.IsNaN(p)
		}
		return math.IsInf(p, 0) || math.Abs(p) > max
	}
	return inf(real(a)) || (isComplex && inf(imag(a)))
}

// reachedByNonFinite returns, for every output element of p, whether an
// input it reads is NaN or ±Inf: one its states have read by its step
// (stateBad, firstNonFiniteState), its row's D, or its own step's C and z,
// which no later step reads: a non-finite z or C at one step reaches no
// other step's output. GPU fuzzing of long problems found a row
// whose z was +Inf at one step and whose states overflowed float64 later on
// finite inputs, so that the reference's ∞·0 = NaN was held against the
// kernel's finite values as if the +Inf had reached them
// (FuzzScan/be8e0ea9e0613378, bilinear fp64).
func reachedByNonFinite(p *ssm.Problem, stateBad []int) []bool {
	cw := 1
	if p.Complex {
		cw = 2
	}
	N, L := p.Dstate, p.Seqlen
	reached := make([]bool, p.OutLen())
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			row := b*p.Dim + d
			t0 := slices.Min(stateBad[row*N : (row+1)*N])
			rowBad := p.D != nil && nonFinite(p.D[d])
			for t := 0; t < L; t++ {
				bad := rowBad || t >= t0 || (p.Z != nil && nonFinite(p.Z[row*L+t]))
				for n := 0; n < N && !bad; n++ {
					k := p.BCIndex(p.VariableC, b, d, n, t)
					for _, x := range p.C[k : k+cw] {
						bad = bad || nonFinite(x)
					}
				}
				reached[row*L+t] = bad
			}
		}
	}
	return reached
}

// firstNonFiniteState returns, for every state (batch, dim, n) of p, the
// first time step at which an input the state's recurrence reads is NaN or
// ±Inf (Seqlen if none): u, the step's Δ and B at that step, or (0) its a or
// constant B. It reads no C, D or z, nor the other states' a: a row's first
// non-finite input may leave a state's inputs all finite
// (FuzzScan on the H200, foh fp64: a = +Inf in one state of a row whose
// other state overflowed float64 and decayed back to 9.9e128). The step's Δ
// is the one the recurrence reads, after delta_bias and softplus: a raw
// Δ of −Inf under softplus is the finite step 0 (FuzzScan/02547bf9f1271ad2
// on the H200: zoh fp64, Δ = −Inf every tenth step of a row whose states
// left float64's range on finite inputs and came back, held the kernel's
// finite outputs to the sequential reference's ∞ as if the −Inf had reached
// them).
func firstNonFiniteState(p *ssm.Problem) []int {
	cw := 1
	if p.Complex {
		cw = 2
	}
	N := p.Dstate
	first := make([]int, p.Batch*p.Dim*N)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			row := b*p.Dim + d
			steps := p.Seqlen
			for t := 0; t < p.Seqlen && steps == p.Seqlen; t++ {
				if i := row*p.Seqlen + t; nonFinite(p.U[i]) || nonFinite(mamba1.StepDelta(p, i)) {
					steps = t
				}
			}
			for n := 0; n < N; n++ {
				t0 := steps
				for _, x := range p.A[(d*N+n)*cw : (d*N+n+1)*cw] {
					if nonFinite(x) {
						t0 = 0
					}
				}
				for t := 0; t < t0; t++ {
					k := p.BCIndex(p.VariableB, b, d, n, t)
					for _, x := range p.B[k : k+cw] {
						if nonFinite(x) {
							t0 = t
						}
					}
				}
				first[row*N+n] = t0
			}
		}
	}
	return first
}

// nonFinite reports whether x is ±Inf or NaN.
func nonFinite(x float64) bool { return judge.ClassOf(x) != judge.Finite }

// unboundRows replaces, in the float64 reference, every (batch, dim) row
// whose recurrence went non-finite on finite inputs (an output no
// non-finite input reaches, a state whose own inputs are finite: stateBad) with
// its evaluation of unbounded exponent range (mamba1.ScanRowUnbounded):
// there a state overflowed float64 and a later Ā of 0 met it as ∞·0 = NaN,
// while the value the kernel should compute is finite, and a time-parallel
// kernel, forming the product of the Ā first, computes it (FuzzScan on the
// H200: highorder, complex, fp64). The dtype's own evaluation keeps the
// overflow, so a sequential kernel's NaN there is still accepted (rule 2 of
// Judge).
func unboundRows(p *ssm.Problem, exact *ssm.Output, reached []bool, stateBad []int) error {
	L, S, N := p.Seqlen, p.StateLen()/(p.Batch*p.Dim), p.Dstate
	for row := 0; row < p.Batch*p.Dim; row++ {
		overflowed := false
		for t := 0; t < L; t++ {
			overflowed = overflowed || (!reached[row*L+t] && nonFinite(exact.Out[row*L+t]))
		}
		for k := 0; k < S; k++ {
			overflowed = overflowed || (stateBad[row*N+k/(S/N)] == L && nonFinite(exact.LastState[row*S+k]))
		}
		if !overflowed {
			continue
		}
		out, state, err := mamba1.ScanRowUnbounded(p, row/p.Dim, row%p.Dim)
		if err != nil {
			return err
		}
		copy(exact.Out[row*L:(row+1)*L], out)
		copy(exact.LastState[row*S:(row+1)*S], state)
	}
	return nil
}

// firstXOverflow returns, for every (batch, dim) row, the first time step
// at which some x = Δ·a (Δ after delta_bias and softplus) overflows the
// dtype although Δ and a are finite (Seqlen if never): from there on the
// dtype's evaluation runs on an infinity, and a correct kernel follows it
// rather than the exact value (FuzzScan on the H200: Δ = FLT_MAX made foh's
// B̄ 0 instead of 0.008 in float32, an error that decayed to ratio 4 seven
// steps later).
func firstXOverflow(p *ssm.Problem, max float64) []int {
	cw := 1
	if p.Complex {
		cw = 2
	}
	first := make([]int, p.Batch*p.Dim)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			row := b*p.Dim + d
			first[row] = p.Seqlen
			for t := 0; t < p.Seqlen && first[row] == p.Seqlen; t++ {
				dt := mamba1.StepDelta(p, row*p.Seqlen+t)
				for _, a := range p.A[d*p.Dstate*cw : (d+1)*p.Dstate*cw] {
					x := dt * a
					if !math.IsInf(dt, 0) && !math.IsInf(a, 0) && math.Abs(x) > max {
						first[row] = t
						break
					}
				}
			}
		}
	}
	return first
}
