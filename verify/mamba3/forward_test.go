package mamba3

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// dtypes are the input types judged: the adapter's, in the order float32,
// bf16, float64; a wrapper that casts its inputs (casts_to) is judged on
// inputs of that type.
func dtypes(op string) []ssm.DType {
	c, ok := kernel.W.Hello().Capabilities[op]
	if !ok {
		return nil
	}
	if dt, ok := bridge.DTypeOf(c.CastsTo); ok {
		return []ssm.DType{dt}
	}
	var out []ssm.DType
	for _, dt := range []ssm.DType{ssm.F32, ssm.BF16, ssm.F64} {
		if c.HasDType(bridge.Tag(dt)) {
			out = append(out, dt)
		}
	}
	return out
}

func base(dt ssm.DType) mamba3.Options {
	return mamba3.Options{Batch: 2, Seqlen: 200, HeadsQK: 2, Heads: 4, N: 32, P: 16, AngleDim: 8}
}

// prepare rounds p to dt and gives it the arithmetic the adapter declares
// for op.
func prepare(t *testing.T, op string, p *mamba3.Problem, dt ssm.DType) *mamba3.Problem {
	t.Helper()
	p.DType = dt
	a, err := kernel.Arithmetic(op, dt)
	if err != nil {
		t.Fatal(err)
	}
	p.Arithmetic = a
	return p.Rounded()
}

// run calls the kernel, telling a crash and a refusal apart.
func run(t *testing.T, op string, p *mamba3.Problem) ([]float64, *mamba3.State, bool) {
	t.Helper()
	var y []float64
	var st *mamba3.State
	ok := call(t, kernel, op, p, func() (err error) {
		y, st, err = kernel.Forward(op, p)
		return err
	})
	return y, st, ok
}

// call runs f, a call of op on p by k, unless k does not declare p; a
// crash, a refusal and an exception are recorded in the report as such
// (and the first and last fail the test). ok says f returned results.
func call(t *testing.T, k *bridge.Mamba3, op string, p *mamba3.Problem, f func() error) bool {
	t.Helper()
	if why := k.Supports(op, p); why != "" {
		rep.KernelUnsupported(t.Name(), op, p.DType, p.DType.Weight(), why)
		return false
	}
	err := f()
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		rep.KernelCrash(t.Name(), op, p.DType, p.DType.Weight(), crash.Cause)
		rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.DType.Weight(), report.Finding{Tag: "crash", Cause: "the kernel ended its worker: " + crash.Cause})
		t.Errorf("%s: crash: %s", op, crash.Cause)
		return false
	case bridge.Unsupported(err):
		rep.KernelUnsupported(t.Name(), op, p.DType, p.DType.Weight(), err.Error())
		return false
	case err != nil:
		rep.AddKernel(t.Name(), op, p.DType, p.DType.Weight(), math.Inf(1), false, err.Error())
		rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.DType.Weight(), report.Finding{Tag: "raises", Cause: "the kernel raised on a problem it declares: " + err.Error()})
		t.Errorf("%s: %v", op, err)
		return false
	}
	return true
}

// plantedSlip starts the numpy path with a slip planted, for the tests of
// the diagnosis, and prepares p (float32) for op's declared arithmetic.
func plantedSlip(t *testing.T, slip, op string, p *mamba3.Problem) (*bridge.Mamba3, *mamba3.Problem) {
	t.Helper()
	w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_mamba3", Args: []string{"slip=" + slip}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	k := &bridge.Mamba3{W: w}
	p.DType = ssm.F32
	a, err := k.Arithmetic(op, ssm.F32)
	if err != nil {
		t.Fatal(err)
	}
	p.Arithmetic = a
	return k, p.Rounded()
}

// judgeForward runs op on p and judges y and the final states against
// the reference; a failure is diagnosed.
func judgeForward(t *testing.T, op string, p *mamba3.Problem) ([]float64, *mamba3.State) {
	t.Helper()
	y, st, ok := run(t, op, p)
	if !ok {
		return nil, nil
	}
	want, wst := mamba3.Forward(p)
	c, _, err := judge.CompareArrays(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
	if err != nil {
		t.Fatal(err)
	}
	passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(p.DType)
	rep.AddKernel(t.Name(), op, p.DType, p.DType.Weight(), c.Worst.Ratio, passed, c.Worst.String())
	if !passed {
		f := diagnose.Mamba3(p, y, st, func(q *mamba3.Problem) ([]float64, *mamba3.State, error) { return kernel.Forward(op, q) })
		rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.DType.Weight(), f)
		t.Errorf("%s %v: ratio %.3g > %g at %s; diagnosis [%s] %s", op, p.DType, c.Worst.Ratio, judge.Threshold(p.DType), c.Worst, f.Tag, f)
	}
	return y, st
}

var forwardCases = []struct {
	name string
	mod  func(o *mamba3.Options)
}{
	{"plain", func(o *mamba3.Options) {}},
	{"D+z+state", func(o *mamba3.Options) { o.D, o.Z, o.State = true, true, true }},
	{"heads_share_qk", func(o *mamba3.Options) { o.HeadsQK = 1 }},
	{"no_rotation", func(o *mamba3.Options) { o.AngleDim = 0 }},
	{"all_pairs_rotate", func(o *mamba3.Options) { o.AngleDim = o.N / 2 }},
	{"seqlen_1", func(o *mamba3.Options) { o.Seqlen, o.State = 1, true }},
	{"packed", func(o *mamba3.Options) { o.Batch, o.CuSeqlens, o.State = 1, []int{0, 70, 71, 200}, true }},
	// head dimensions a kernel pads to its power-of-two blocks: a mask one
	// element too wide is invisible on every other case (the blocks fit
	// exactly) and here reads or writes the next row's first element
	{"headdims_not_powers_of_two", func(o *mamba3.Options) { o.N, o.P, o.State = 48, 24, true }},
}

func TestMamba3Forward(t *testing.T) {
	track(t)
	if c := kernel.W.Hello().Capabilities[bridge.OpMamba3Forward]; c.CastsTo != "" {
		rep.Fit(t.Name(), fmt.Sprintf("the kernel's wrapper converts Q, K, V, Trap, Angles and Z to %s itself: judged on inputs of that type", c.CastsTo))
	}
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		for i, c := range forwardCases {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				o := base(dt)
				c.mod(&o)
				judgeForward(t, bridge.OpMamba3Forward, prepare(t, bridge.OpMamba3Forward, mamba3.Generate(o, uint64(100+i)), dt))
			})
		}
	}
}

// TestMamba3Boundaries draws sequence boundaries systematically against
// the kernel's chunk (bridgetest.BoundaryRows): a sequence starting at a
// chunk's first, second, middle, second-to-last and last token, a
// sequence of one token at each, several boundaries in one chunk; each
// with and without an initial state.
func TestMamba3Boundaries(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		a, err := kernel.Arithmetic(bridge.OpMamba3Forward, dt)
		if err != nil {
			t.Fatal(err)
		}
		o := base(dt)
		// the gate too: Z's pointer is offset by each sequence's start
		// like the inputs' (a copy that drops its sequence stride is
		// right on every unpacked case)
		o.Batch, o.D, o.Z = 1, true, true
		o.Seqlen = max(o.Seqlen, 3*max(a.Chunk, 16))
		rows, err := bridgetest.BoundaryRows(a.Chunk, o.Seqlen)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			for _, state := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%s/state=%t", dt, r.Name, state), func(t *testing.T) {
					q := o
					q.CuSeqlens, q.State = r.CuSeqlens, state
					judgeForward(t, bridge.OpMamba3Forward, prepare(t, bridge.OpMamba3Forward, mamba3.Generate(q, uint64(700+i)), dt))
				})
			}
		}
	}
}

func TestMamba3Step(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Step) {
		for _, c := range []struct {
			name string
			mod  func(o *mamba3.Options)
		}{{"state", func(o *mamba3.Options) { o.State = true }}, {"D+z+state", func(o *mamba3.Options) { o.D, o.Z, o.State = true, true, true }}} {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				o := base(dt)
				o.Seqlen, o.Batch = 1, 3
				c.mod(&o)
				judgeForward(t, bridge.OpMamba3Step, prepare(t, bridge.OpMamba3Step, mamba3.Generate(o, 150), dt))
			})
		}
	}
}
