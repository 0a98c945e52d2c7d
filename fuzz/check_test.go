package fuzz

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestGuardedCallReportsMemoryFaults: a call the binding finds writing
// outside a buffer or into an input (cudalib.MemoryError) is a finding with
// its outputs still judged; another error is a library error, and nothing
// to judge.
func TestGuardedCallReportsMemoryFaults(t *testing.T) {
	lib, err := cudalib.OpenDefault()
	if err != nil {
		t.Skip(err)
	}
	f := &Failure{Input: "x"}
	fault := &cudalib.MemoryError{Func: "ssmk_scan_fwd", Array: "out", Kind: "overrun", Offset: 1, Element: 1}
	if !guardedCall(f, lib, "ssmk_scan_fwd", ssm.ZOH, ssm.F32, false, func() error { return fault }) ||
		len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "wrote past the end of out") {
		t.Errorf("a memory fault: judged further %v, problems %q", len(f.Problems) == 1, f.Problems)
	}
	f = &Failure{Input: "x"}
	if guardedCall(f, lib, "ssmk_scan_fwd", ssm.ZOH, ssm.F32, false, func() error { return errors.New("boom") }) ||
		len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "library error: boom") {
		t.Errorf("a library error: problems %q", f.Problems)
	}
}

// TestJudgeScanAfterStateOverflow: a state that overflows float64 on finite
// inputs and is then multiplied by an Ā of 0 (zoh, x = −1e30) is NaN in the
// sequential float64 recurrence, but the value is finite (Δ·B·u = 1e30 at
// the last step), and a time-parallel kernel computes it (FuzzScan on the
// H200, corpus entry ab74c4a62db06962). Both answers are accepted; any other
// finite value is not.
func TestJudgeScanAfterStateOverflow(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 3, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		VariableB: true, VariableC: true,
		U: []float64{1e300, 0, 1}, Delta: []float64{1, -700, 1e30}, A: []float64{-1},
		B: []float64{1, 1, 1}, C: []float64{1, 1, 1}}
	h0 := 1e300 // Δ·B·u at step 0; step 1 multiplies it by e^700 (2^1010 > MaxFloat64)
	for _, c := range []struct {
		name string
		out  []float64
		ok   bool
	}{
		{"the sequential order", []float64{h0, math.Inf(1), math.NaN()}, true},
		{"the time-parallel order", []float64{h0, math.Inf(1), 1e30}, true},
		{"the time-parallel order, one rounding off", []float64{h0, math.Inf(1), math.Nextafter(1e30, 0)}, true},
		{"a wrong finite value", []float64{h0, math.Inf(1), 1.001e30}, false},
		{"a wrong first step", []float64{1.001 * h0, math.Inf(1), 1e30}, false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F64, c.out, nil, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// TestJudgeScanFlushedDecay: a float32 state of 1e26 decays by e^-12.5 a
// step (zoh, a = −1, Δ = 12.5, no further input) to 5e-29 after ten steps.
// A time-parallel kernel forms the product of those Ā, e^-125, which flushes
// to 0 in float32, and so returns 0 for the later steps, where the
// sequential recurrence keeps 5e-29 (FuzzScan on the H200, foh, corpus
// entry 4a8c36b616e4b2ef: 1.3e-43 for −4.7e-29). The policy accepts both
// (mamba1.Scale's PeakOut and ReachOut); a value 200 times the decayed
// state is still wrong, and so is a flushed early step, whose products are
// normal.
func TestJudgeScanFlushedDecay(t *testing.T) {
	const L = 11
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: L, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		VariableB: true, VariableC: true, A: []float64{-1}}
	for i := 0; i < L; i++ {
		u, dt := 0.0, 12.5
		if i == 0 {
			u, dt = 1e26, 1
		}
		p.U, p.Delta = append(p.U, u), append(p.Delta, dt)
		p.B, p.C = append(p.B, 1), append(p.C, 1)
	}
	p.RoundToFloat32()
	exact, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(out []float64)) []float64 {
		out := make([]float64, L)
		for i, e := range exact.Out {
			out[i] = float64(float32(e))
		}
		f(out)
		return out
	}
	for _, c := range []struct {
		name string
		out  []float64
		ok   bool
	}{
		{"the sequential order", with(func([]float64) {}), true},
		{"products below FLT_MIN flushed", with(func(o []float64) {
			for i := 7; i < L; i++ { // e^(−12.5·7) < FLT_MIN
				o[i] = 0
			}
		}), true},
		{"200 times the decayed state", with(func(o []float64) { o[L-1] *= 200 }), false},
		{"a flushed early step", with(func(o []float64) { o[3] = 0 }), false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F32, c.out, nil, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// TestJudgeScanStateAtTheEdge: a state that comes within rounding of the
// dtype's largest number and then decays. Bilinear, float32, a = −2: at
// step 0, Δ = 4.3e24 gives Δ·g = 1 − 2.3·10⁻²⁵ and Ā = −1 + 4.7·10⁻²⁵, so the input
// term Δ·g·B·u with B·u = FLT_MAX is FLT_MAX·(1 − 2.3·10⁻²⁵): the CPU build rounds
// it to FLT_MAX, the GPU's reciprocal (within 2 ulp) to ∞, and the ∞ carries
// on through step 1 (Δ = 1/3, Ā = 1/2), where the exact state is
// FLT_MAX/2 (FuzzScan on the H200, corpus entry 2e51a3c231d0bf7a:
// last_state −Inf for −1.76e38). MagOut and MagState bound only the last
// step's terms; mamba1.Scale's PathMag says that a state on the way was
// at the edge. Both answers are accepted; a wrong finite value is not.
func TestJudgeScanStateAtTheEdge(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 2, Dstate: 1, Groups: 1, Method: ssm.Bilinear,
		VariableB: true, VariableC: true,
		U: []float64{-1, 1e-30}, Delta: []float64{4.3e24, 1.0 / 3}, A: []float64{-2},
		B: []float64{-math.MaxFloat32, 1}, C: []float64{1, 1}}
	p.RoundToFloat32()
	f32, err := mamba1.Scan(p, ssm.Float32)
	if err != nil {
		t.Fatal(err)
	}
	inf := math.Inf(1)
	for _, c := range []struct {
		name  string
		out   []float64
		state float64
		ok    bool
	}{
		{"the CPU build's rounding", f32.Out, f32.LastState[0], true},
		{"the GPU's rounding: ∞ from step 0", []float64{inf, inf}, inf, true},
		{"∞ in the state only", f32.Out, inf, true},
		{"a wrong finite state", f32.Out, 0.6 * math.MaxFloat32, false},
		{"a wrong finite output", []float64{f32.Out[0], 0.6 * math.MaxFloat32}, f32.LastState[0], false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F32, c.out, []float64{c.state}, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// TestJudgeScanStateReadsItsOwnInputs: a state is judged by the inputs it
// reads, not by its row's. zoh, float64, two states: state 0 has a = +Inf
// (a non-finite input of the row from step 0), state 1 has a = 20 and
// finite inputs, overflows float64 at step 1 (1e300·e^20) and comes back at
// step 2 (Ā = e^-400) to about 9e134. The sequential float64 reference
// keeps ∞ (∞·e^-400 = ∞); a time-parallel kernel, forming the product of
// the Ā first, gives the finite value (FuzzScan on the H200, foh fp64,
// corpus entry 769ec12f49387ef1: last_state 9.88e128 where the reference
// overflowed, in a row with a = +Inf in another state). State 1's inputs
// are finite and its magnitude bound overflows float64 itself, so it is not
// judged, as an output whose terms overflow float64 is not; before, the
// row's a = +Inf made it judged against the sequential ∞.
func TestJudgeScanStateReadsItsOwnInputs(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 3, Dstate: 2, Groups: 1, Method: ssm.ZOH,
		VariableB: true, VariableC: true,
		U: []float64{1e300, 0, 0}, Delta: []float64{1, 1, -20}, A: []float64{math.Inf(1), 20},
		B: []float64{1, 1, 1, 1, 1, 1}, C: []float64{1, 1, 1, 1, 1, 1}}
	exact, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	unbounded := 1e300 * math.Exp(20-400)
	for _, c := range []struct {
		name  string
		state float64
		ok    bool
	}{
		{"the sequential order", math.Inf(1), true},
		{"the time-parallel order", unbounded, true},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F64, exact.Out, []float64{exact.LastState[0], c.state}, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// A non-finite z (or C) reaches only its own step's output. Here z = +Inf
// at step 0, the state overflows float64 at step 1 on finite inputs
// (Ā = e^20 times 10^300) and decays back at step 2 (Ā = e^-400), where a
// time-parallel kernel gives the finite 10^300·e^-380·σ(1) and the
// sequential reference ∞, and u = NaN at step 3 reaches the state from
// there. Output 2 reads no non-finite input and its terms overflow float64,
// so it is not judged, as such outputs are not; output 0 reads z's +Inf and
// must be non-finite. Before, the row's +Inf z made every output of the row answer
// to the sequential reference (FuzzScan/be8e0ea9e0613378 on the H200:
// bilinear fp64, a long problem whose z was +Inf at one step of each
// period).
func TestJudgeScanOwnStepInputs(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 4, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		VariableB: true, VariableC: true,
		U: []float64{1e300, 0, 0, math.NaN()}, Delta: []float64{1, 1, -20, 1}, A: []float64{20},
		B: []float64{1, 1, 1, 1}, C: []float64{1, 1, 1, 1}, Z: []float64{math.Inf(1), 1, 1, 1}}
	exact, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	unbounded := 1e300 * math.Exp(20-400) / (1 + math.Exp(-1))
	seq := exact.Out
	for _, c := range []struct {
		name string
		out  []float64
		ok   bool
	}{
		{"the sequential order", seq, true},
		{"the time-parallel order", []float64{seq[0], seq[1], unbounded, seq[3]}, true},
		{"a finite output where z is +Inf", []float64{0, seq[1], unbounded, seq[3]}, false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F64, c.out, exact.LastState, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// A raw Δ of −Inf under softplus is the finite step Δ = 0 (Ā = 1, no
// input), not a non-finite input that reaches the row's later outputs. Here
// it opens a row whose state leaves float64's range at step 3 on finite
// inputs (Δ·u ≈ 1.3·10^308 at steps 2 and 3) and comes back at step 4
// (Ā = e^-20), where a time-parallel kernel gives the finite value and the
// sequential reference ∞: both are accepted, as in a row without the −Inf.
// Before, the −Inf counted as reaching every later output, which then had to
// be non-finite like the sequential reference's (FuzzScan/02547bf9f1271ad2
// on the H200: zoh fp64, Δ = −Inf every tenth step). The error scale of the
// step was σ(−∞)·∞ = 0·∞ = NaN, which would have left every output of the
// row unjudged once the −Inf no longer reached them; it is the limit 0 now
// (reference's deltaScale), and a wrong step 0 or 1 is rejected.
func TestJudgeScanSoftplusOfMinusInf(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 5, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		VariableB: true, VariableC: true, Softplus: true,
		U: []float64{1, 1, 1e308, 1.3e308, 0}, Delta: []float64{math.Inf(-1), 1, 1, 1, 20}, A: []float64{-1},
		B: []float64{1, 1, 1, 1, 1}, C: []float64{1, 1, 1, 1, 1}}
	exact, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	unbounded, _, err := mamba1.ScanRowUnbounded(p, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq := exact.Out
	if seq[0] != 0 || math.Abs(seq[1]-math.Log1p(math.E)) > 1e-15 || !math.IsInf(seq[3], 1) || !math.IsInf(seq[4], 1) ||
		math.IsInf(unbounded[4], 0) || unbounded[4] <= 0 {
		t.Fatalf("the problem is not the one described: sequential %v, unbounded %v", seq, unbounded)
	}
	tp := []float64{0, seq[1], seq[2], seq[3], unbounded[4]}
	tpWith := func(i int, v float64) []float64 { // the time-parallel order with step i off
		out := slices.Clone(tp)
		out[i] = v
		return out
	}
	for _, c := range []struct {
		name string
		out  []float64
		ok   bool
	}{
		{"the sequential order", seq, true},
		{"the time-parallel order", tp, true},
		{"a wrong step 1", tpWith(1, 1.001*seq[1]), false},
		{"a wrong step 0", tpWith(0, 1e-3), false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, ssm.F64, c.out, nil, judge.NonFinitePolicy)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}

// TestDiagnoseFuzzNonFinite: a failure that needs its input's NaN is said
// to, rather than diagnosed on the error model's terms.
func TestDiagnoseFuzzNonFinite(t *testing.T) {
	p := mamba1.Generate(mamba1.Spec{Batch: 1, Dim: 2, Seqlen: 5, Dstate: 2, Groups: 1, Method: ssm.ZOH, Dist: mamba1.Realistic}, 1)
	p.U[3] = math.NaN()
	if got := diagnoseFuzz(lib, p, ssm.F64); !strings.Contains(got, "needs the input's NaN") {
		t.Fatalf("diagnoseFuzz = %q", got)
	}
}
