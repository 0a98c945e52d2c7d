package diagnose

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"ssmverify/contain"
	"ssmverify/mamba1"
	"ssmverify/mamba2"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// The diagnoses meet whatever a wrong kernel returns. These properties hand
// every exported diagnosis a kernel whose every call returns something
// drawn from the ways a result can be wrong (the right numbers, nil, an
// error, an array empty, short or long, NaN, ±Inf, zeros, doubled, noise,
// one element broken) on problems drawn with the edges a caller can pass (a
// sequential evaluation's chunk of 0, one step, packed sequences), and
// require that each diagnosis returns without a panic: a finding tagged
// contain.Tag is the panic contained, and fails the property.

// mangler draws, per call, what a wrong kernel returns for an array whose
// right value is v. Most kernels keep the problem's shape (a result of
// another shape ends a diagnosis at its first check), so that the deeper
// steps meet wrong values.
type mangler struct {
	r         *rand.Rand
	keepShape bool
}

func newMangler(t *rapid.T) mangler {
	return mangler{rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "kernel"), 7)), rapid.IntRange(0, 3).Draw(t, "shape") > 0}
}

func (m mangler) array(v []float64) []float64 {
	out := append([]float64(nil), v...)
	k := m.r.IntN(12)
	if m.keepShape {
		k = 4 + m.r.IntN(8)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return []float64{}
	case 2:
		if len(out) > 0 {
			return out[:m.r.IntN(len(out))]
		}
	case 3:
		return append(out, 1, 2, 3)
	case 4, 5, 6:
		fill := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, 2, -1, math.MaxFloat64}[m.r.IntN(7)]
		for i := range out {
			if m.r.IntN(2) == 0 || fill == 0 {
				out[i] = fill
			}
		}
	case 7:
		for i := range out {
			out[i] *= 2
		}
	case 8:
		for i := range out {
			out[i] = m.r.NormFloat64() * math.Pow(10, float64(m.r.IntN(40)-20))
		}
	case 9:
		if len(out) > 0 {
			out[m.r.IntN(len(out))] = math.NaN()
		}
	}
	return out // cases 10, 11: right
}

// fails is nil, or an error the kernel returns instead of a result.
func (m mangler) fails() error {
	if m.r.IntN(10) == 0 {
		return errors.New("the kernel refuses (drawn)")
	}
	return nil
}

func (m mangler) nothing() bool { return !m.keepShape && m.r.IntN(12) == 0 }

// anyKernel is a Scanner, Declarer-free, and a Differentiator that returns
// mangled reference results.
type anyKernel struct{ m mangler }

func (k anyKernel) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	if err := k.m.fails(); err != nil {
		return nil, err
	}
	if k.m.nothing() {
		return nil, nil
	}
	ref, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		return nil, err
	}
	return &ssm.Output{Out: k.m.array(ref.Out), LastState: k.m.array(ref.LastState)}, nil
}

func (k anyKernel) Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error) {
	if err := k.m.fails(); err != nil {
		return nil, err
	}
	if k.m.nothing() {
		return nil, nil
	}
	g, err := mamba1.ScanGrad(p, ct, withInitial || k.m.r.IntN(8) == 0)
	if err != nil {
		return nil, err
	}
	return &ssm.Grads{U: k.m.array(g.U), Delta: k.m.array(g.Delta), A: k.m.array(g.A), B: k.m.array(g.B), C: k.m.array(g.C),
		D: k.m.array(g.D), Z: k.m.array(g.Z), DeltaBias: k.m.array(g.DeltaBias), InitialState: k.m.array(g.InitialState)}, nil
}

// noPanic fails t when f is a contained panic.
func noPanic(t *rapid.T, what string, f Finding) {
	if f.Tag == contain.Tag || strings.Contains(f.Cause, "internal error of ssmverify") {
		t.Fatalf("%s panicked: %s", what, f)
	}
}

func scanProblem(t *rapid.T) *ssm.Problem {
	m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
	s := mamba1.MambaBlock(m, rapid.IntRange(1, 2).Draw(t, "batch"), rapid.IntRange(1, 2).Draw(t, "dim"), rapid.IntRange(1, 40).Draw(t, "seqlen"), rapid.IntRange(1, 3).Draw(t, "dstate"))
	s.Complex = rapid.Bool().Draw(t, "complex")
	p := mamba1.Generate(s, rapid.Uint64().Draw(t, "seed"))
	if rapid.Bool().Draw(t, "initial") {
		mamba1.SetInitialState(p, 3)
	}
	return p
}

func TestScanTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := scanProblem(t)
		dt := rapid.SampledFrom([]ssm.DType{ssm.F64, ssm.F32, ssm.BF16}).Draw(t, "dtype")
		noPanic(t, "Scan", Scan(anyKernel{newMangler(t)}, p, dt))
	})
}

func TestBackwardTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := scanProblem(t)
		withInitial := p.InitialState != nil && rapid.Bool().Draw(t, "withInitial")
		ct := mamba1.NewCotangent(p, 5, rapid.Bool().Draw(t, "dlast"))
		dt := rapid.SampledFrom([]ssm.DType{ssm.F64, ssm.F32}).Draw(t, "dtype")
		noPanic(t, "BackwardInitial", BackwardInitial(anyKernel{newMangler(t)}, p, ct, dt, withInitial))
	})
}

func TestResumptionTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := scanProblem(t)
		k := anyKernel{newMangler(t)}
		got, _ := k.Scan(p, ssm.F64)
		cuts := rapid.SliceOfN(rapid.IntRange(-2, p.Seqlen+2), 0, 3).Draw(t, "cuts")
		noPanic(t, "Resumption", Resumption(p, got, ssm.F64, cuts))
	})
}

func TestDiscretizedTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMangler(t)
		n := rapid.IntRange(0, 6).Draw(t, "points")
		delta, a, abar, bcoef := make([]float64, n), make([]complex128, n), make([]complex128, n), make([]complex128, n)
		failed := make([]bool, rapid.IntRange(0, n+1).Draw(t, "failed"))
		for i := range delta {
			delta[i] = []float64{0.01, 0, -1, math.NaN(), math.Inf(1), 1e30}[m.r.IntN(6)]
		}
		for i := range n {
			a[i], abar[i], bcoef[i] = complex(-1, 0.5), complex(m.r.NormFloat64(), 0), complex(math.NaN(), 0)
		}
		for i := range failed {
			failed[i] = m.r.IntN(2) == 0
		}
		f := Discretized(rapid.SampledFrom(ssm.Methods()).Draw(t, "method"), ssm.F32, rapid.Bool().Draw(t, "complex"), delta, a, abar, bcoef, failed)
		noPanic(t, "Discretized", f)
	})
}

func ssdDrawn(t *rapid.T) *mamba2.Problem {
	o := mamba2.Options{Batch: rapid.IntRange(1, 2).Draw(t, "batch"), Seqlen: rapid.IntRange(1, 24).Draw(t, "seqlen"), Heads: 2, Headdim: 2,
		Groups: rapid.SampledFrom([]int{1, 2}).Draw(t, "groups"), Dstate: 2, Chunk: rapid.SampledFrom([]int{0, 1, 4, 8}).Draw(t, "chunk"),
		D: rapid.Bool().Draw(t, "D"), Z: rapid.Bool().Draw(t, "Z"), DtBias: true, Softplus: rapid.Bool().Draw(t, "softplus"),
		InitialStates: rapid.Bool().Draw(t, "initial"), DType: ssm.F32, StateDType: ssm.F32}
	if rapid.Bool().Draw(t, "packed") && o.Seqlen > 2 {
		o.Batch, o.CuSeqlens = 1, []int{0, o.Seqlen / 2, o.Seqlen}
	}
	return mamba2.Generate(o, rapid.Uint64().Draw(t, "seed")).Rounded()
}

func TestSSDPrefillTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := ssdDrawn(t)
		m := newMangler(t)
		mangled := func(q *mamba2.Problem) (*mamba2.Output, error) {
			if err := m.fails(); err != nil {
				return nil, err
			}
			if m.nothing() {
				return nil, nil
			}
			want, _ := mamba2.Prefill(q)
			return &mamba2.Output{Y: m.array(want.Y), FinalStates: m.array(want.FinalStates), SeqStates: m.array(want.SeqStates)}, nil
		}
		got, _ := mangled(p)
		var run SSDRunner
		if rapid.Bool().Draw(t, "runner") {
			run = mangled
		}
		noPanic(t, "SSDPrefill", SSDPrefill(p, got, run))
	})
}

// TestSSDBackwardTakesAnyResult: a backward's diagnosis, its slices'
// probes given mangled gradients too, never panics.
func TestSSDBackwardTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := ssdDrawn(t)
		m := newMangler(t)
		ct := mamba2.GenerateCotangent(p, 3, rapid.Bool().Draw(t, "states"))
		runBwd := func(q *mamba2.Problem, c *mamba2.Cotangent) (*mamba2.Output, *mamba2.Grads, error) {
			if err := m.fails(); err != nil {
				return nil, nil, err
			}
			out, _ := mamba2.Prefill(q)
			w := mamba2.Grad(q, c)
			return out, &mamba2.Grads{X: m.array(w.X), Dt: m.array(w.Dt), A: m.array(w.A), B: m.array(w.B), C: m.array(w.C), D: m.array(w.D),
				Z: m.array(w.Z), DtBias: m.array(w.DtBias), InitialStates: m.array(w.InitialStates)}, nil
		}
		out, g, err := runBwd(p, ct)
		if err != nil || g == nil {
			return
		}
		noPanic(t, "SSDBackward", SSDBackward(p, ct, out, g, nil, runBwd))
	})
}

func TestSSDStepTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batch := rapid.IntRange(1, 3).Draw(t, "batch")
		s := mamba2.GenerateStep(mamba2.StepOptions{Batch: batch, Slots: batch + 1, Heads: 2, Headdim: 2, Groups: 1, Dstate: 2, D: true, Z: rapid.Bool().Draw(t, "Z"),
			DtBias: true, Softplus: true, DType: ssm.F32, StateDType: ssm.F32}, rapid.Uint64().Draw(t, "seed")).Rounded()
		m := newMangler(t)
		var got *mamba2.StepOutput
		if !m.nothing() {
			want, _ := mamba2.Decode(s)
			got = &mamba2.StepOutput{Y: m.array(want.Y), State: m.array(want.State)}
		}
		noPanic(t, "SSDStep", SSDStep(s, got))
	})
}

func mamba3Drawn(t *rapid.T) *mamba3.Problem {
	o := mamba3.Options{Batch: 1, Seqlen: rapid.IntRange(1, 12).Draw(t, "seqlen"), HeadsQK: 1, Heads: 2, N: 2, P: 2, AngleDim: 1,
		D: rapid.Bool().Draw(t, "D"), Z: rapid.Bool().Draw(t, "Z"), State: rapid.Bool().Draw(t, "state")}
	p := mamba3.Generate(o, rapid.Uint64().Draw(t, "seed"))
	p.DType = ssm.F32
	return p.Rounded()
}

func mangledState(m mangler, s *mamba3.State) *mamba3.State {
	if s == nil || m.nothing() {
		return nil
	}
	return &mamba3.State{Angle: m.array(s.Angle), SSM: m.array(s.SSM), K: m.array(s.K), V: m.array(s.V)}
}

func TestMamba3TakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := mamba3Drawn(t)
		m := newMangler(t)
		y, st := mamba3.Forward(p)
		// the operator's probes get mangled results too
		run := func(q *mamba3.Problem) ([]float64, *mamba3.State, error) {
			y, st := mamba3.Forward(q)
			return m.array(y), mangledState(m, st), nil
		}
		noPanic(t, "Mamba3", Mamba3(p, m.array(y), mangledState(m, st), run))
	})
}

func TestMamba3BackwardTakesAnyResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := mamba3Drawn(t)
		m := newMangler(t)
		ct := mamba3.GenerateCotangent(p, rapid.Bool().Draw(t, "dstate"), 3)
		y, st := mamba3.Forward(p)
		var g *mamba3.Grads
		mangled := func(w *mamba3.Grads) *mamba3.Grads {
			return &mamba3.Grads{Q: m.array(w.Q), K: m.array(w.K), V: m.array(w.V), ADT: m.array(w.ADT), DT: m.array(w.DT), Trap: m.array(w.Trap),
				QBias: m.array(w.QBias), KBias: m.array(w.KBias), Angles: m.array(w.Angles), D: m.array(w.D), Z: m.array(w.Z), State: mangledState(m, w.State)}
		}
		if !m.nothing() {
			g = mangled(mamba3.Grad(p, ct))
		}
		// the slices' probes get mangled gradients too
		runBwd := func(q *mamba3.Problem, c *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error) {
			y, st := mamba3.Forward(q)
			return m.array(y), mangledState(m, st), mangled(mamba3.Grad(q, c)), nil
		}
		noPanic(t, "Mamba3Backward", Mamba3Backward(p, ct, m.array(y), mangledState(m, st), g, nil, runBwd))
	})
}
