package diagnose

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// TestSSDBackwardRelations: each structural relation of a wrong gradient
// to the reference — zero, a constant factor, a path of the chain rule cut
// or negated, a factor left out, a shift in time, another head's — is
// named for a gradient made so from the float64 adjoint, with the forward
// right and every other gradient exact.
func TestSSDBackwardRelations(t *testing.T) {
	p, ct, out := ssdBackwardCase()
	ref := mamba2.Grad(p, ct)
	clone := func() *mamba2.Grads {
		c := func(v []float64) []float64 { return append([]float64(nil), v...) }
		return &mamba2.Grads{X: c(ref.X), Dt: c(ref.Dt), A: c(ref.A), B: c(ref.B), C: c(ref.C), D: c(ref.D), Z: c(ref.Z), DtBias: c(ref.DtBias), InitialStates: c(ref.InitialStates)}
	}
	H, P, L := p.Heads, p.Headdim, p.Seqlen
	for _, c := range []struct {
		name, want string
		make       func() *mamba2.Grads
	}{
		{"dz zero", "bwd:dz:zero", func() *mamba2.Grads { g := clone(); clear(g.Z); return g }},
		{"dD doubled", "bwd:dD:factor(2)", func() *mamba2.Grads { g := clone(); g.D = ssm.Scaled(g.D, 2); return g }},
		{"ddt without the decay", "bwd:ddt:no-path:decay", func() *mamba2.Grads {
			g := clone()
			g.Dt = mamba2.GradWithout(p, ct, mamba2.PathDecay).Dt
			return g
		}},
		{"dB with the carry negated", "bwd:dB:negated-path:carry", func() *mamba2.Grads {
			g := clone()
			cut := mamba2.GradWithout(p, ct, mamba2.PathCarry).B
			for i := range g.B {
				g.B[i] = 2*cut[i] - ref.B[i]
			}
			return g
		}},
		{"ddt without σ", "bwd:ddt:lacks(σ)", func() *mamba2.Grads {
			g := clone()
			g.Dt = mamba2.GradLacking(p, ct, mamba2.FactorSoftplus).Dt
			return g
		}},
		{"dx a step late", "bwd:dx:shift(-1)", func() *mamba2.Grads {
			g := clone()
			n := H * P
			for b := 0; b < p.Batch; b++ {
				for s := L - 1; s >= 1; s-- {
					copy(g.X[(b*L+s)*n:(b*L+s+1)*n], ref.X[(b*L+s-1)*n:(b*L+s)*n])
				}
				clear(g.X[b*L*n : (b*L+1)*n])
			}
			return g
		}},
		{"dx's skip without D", "bwd:dx:lacks(D):skip", func() *mamba2.Grads {
			g := clone()
			cut := mamba2.GradWithout(p, ct, mamba2.PathSkip).X
			for i := range g.X {
				g.X[i] = cut[i] + (ref.X[i]-cut[i])/p.D[i/P%H]
			}
			return g
		}},
		{"dz with the gate derivative's sign changed", "bwd:dz:factor-of(z)", func() *mamba2.Grads {
			g := clone() // σ(1 − z(1 − σ)) for σ(1 + z(1 − σ))
			for i, z := range p.Z {
				sg := 1 / (1 + math.Exp(-z))
				g.Z[i] = ref.Z[i] * (1 - z*(1-sg)) / (1 + z*(1-sg)) // ref's dz over g′(z), times the slip's
			}
			return g
		}},
		{"ddt with σ divided for multiplied", "bwd:ddt:factor-of(dt + dt_bias)", func() *mamba2.Grads {
			g := clone()
			for i := range g.Dt {
				sg := 1 / (1 + math.Exp(-(p.Dt[i] + p.DtBias[i%H])))
				g.Dt[i] = ref.Dt[i] / (sg * sg)
			}
			return g
		}},
		{"dinitial_states of the next head", "bwd:dinitial_states:wrong-head(+1)", func() *mamba2.Grads {
			g := clone()
			blk := P * p.Dstate
			for i := range g.InitialStates {
				h := i / blk % H
				g.InitialStates[i] = ref.InitialStates[i+((h+1)%H-h)*blk]
			}
			return g
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := SSDBackward(p, ct, out, c.make(), nil, nil)
			if !strings.Contains(f.Tag, c.want) || strings.Count(f.Tag, "bwd:") != 1 {
				t.Errorf("diagnosis [%s] %s, want %s alone", f.Tag, f, c.want)
			}
		})
	}
	// a gradient exact at an axis' first index and wrong past it is an
	// offset scaled wrong along that axis; one wrong elsewhere is located
	q := *p
	q.Chunk = 16
	for _, c := range []struct {
		name, want string
		wrong      func(b, t, h int) bool
	}{
		{"past the first chunk", "bwd:dx:offset(chunks)", func(b, t, h int) bool { return t >= 16 }},
		{"past the first head", "bwd:dx:offset(heads)", func(b, t, h int) bool { return h > 0 }},
		{"past the first row and chunk", "bwd:dx:offset(rows,chunks)", func(b, t, h int) bool { return b > 0 && t >= 16 }},
		{"past each chunk's first step", "bwd:dx:offset(steps)", func(b, t, h int) bool { return t%16 != 0 }},
		{"from each chunk's step 8 on", "bwd:dx:offset(blocks-of-8)", func(b, t, h int) bool { return t%16 >= 8 }},
		{"in the second chunk alone", "bwd:dx:in(chunks(1))", func(b, t, h int) bool { return t >= 16 && t < 32 }},
		{"in the last head", "bwd:dx:in(last-head)", func(b, t, h int) bool { return h == H-1 }},
	} {
		g := clone()
		for b := 0; b < p.Batch; b++ {
			for t := 0; t < L; t++ {
				for h := 0; h < H; h++ {
					if !c.wrong(b, t, h) {
						continue
					}
					for pp := 0; pp < P; pp++ {
						i := ((b*L+t)*H+h)*P + pp
						g.X[i] += float64(i%7-3) * 0.5
					}
				}
			}
		}
		if f := SSDBackward(&q, ct, out, g, nil, nil); f.Tag != c.want {
			t.Errorf("dx wrong %s diagnosed [%s] %s, want %s", c.name, f.Tag, f, c.want)
		}
	}
	// a relation that holds where the gradient is wrong, the rest right,
	// is said with the place; noise there stays a place alone (above)
	decayCut := mamba2.GradWithout(&q, ct, mamba2.PathDecay)
	for _, c := range []struct {
		name, want string
		set        func(g *mamba2.Grads)
	}{
		{"dx zero in the second chunk", "bwd:dx:zero@in(chunks(1))", func(g *mamba2.Grads) {
			for b := 0; b < p.Batch; b++ {
				clear(g.X[(b*L+16)*H*P : (b*L+32)*H*P])
			}
		}},
		{"dx doubled in the last head", "bwd:dx:factor(2)@in(last-head)", func(g *mamba2.Grads) {
			for i := range g.X {
				if i/P%H == H-1 {
					g.X[i] *= 2
				}
			}
		}},
		{"ddt without the decay in the second chunk", "bwd:ddt:no-path:decay@in(chunks(1))", func(g *mamba2.Grads) {
			for b := 0; b < p.Batch; b++ {
				copy(g.Dt[(b*L+16)*H:(b*L+32)*H], decayCut.Dt[(b*L+16)*H:(b*L+32)*H])
			}
		}},
	} {
		g := clone()
		c.set(g)
		if f := SSDBackward(&q, ct, out, g, nil, nil); f.Tag != c.want {
			t.Errorf("%s diagnosed [%s] %s, want %s", c.name, f.Tag, f, c.want)
		}
	}
	if f := SSDBackward(p, ct, out, clone(), nil, nil); f.Tag != "" {
		t.Errorf("the reference's own gradients diagnosed [%s]", f.Tag)
	}
	// a wrong forward is the forward's finding, not the backward's
	bad := *out
	bad.Y = ssm.Scaled(out.Y, 2)
	if f := SSDBackward(p, ct, &bad, clone(), nil, nil); !strings.HasPrefix(f.Tag, "fwd:") || strings.Contains(f.Tag, "bwd:") {
		t.Errorf("a doubled y diagnosed [%s]", f.Tag)
	}
}

// TestSSDBackwardPastUnreachedStates: a forward wrong only in a packed
// row's per-sequence states, which the cotangent leaves out, does not hide
// a wrong gradient: both are named, the forward's first.
func TestSSDBackwardPastUnreachedStates(t *testing.T) {
	o := mamba2.Options{Batch: 1, Seqlen: 30, Heads: 2, Headdim: 4, Groups: 1, Dstate: 4, D: true, InitialStates: true,
		CuSeqlens: []int{0, 10, 30}, DType: ssm.F32, StateDType: ssm.F32}
	p := mamba2.Generate(o, 92).Rounded()
	ct := mamba2.GenerateCotangent(p, 93, true)
	ct.SeqStates = nil
	out, _ := mamba2.Prefill(p)
	bad := *out
	bad.SeqStates = ssm.Scaled(out.SeqStates, 3)
	g := mamba2.Grad(p, ct)
	clear(g.D)
	f := SSDBackward(p, ct, &bad, g, nil, nil)
	if !strings.HasPrefix(f.Tag, "fwd:") || !strings.Contains(f.Tag, "+bwd:dD:zero") {
		t.Errorf("diagnosis [%s] %s, want the forward's then bwd:dD:zero", f.Tag, f)
	}
	// with the sequences' states in the cotangent the gradients depend on
	// them: the forward's finding alone
	ct2 := mamba2.GenerateCotangent(p, 93, true)
	if f := SSDBackward(p, ct2, &bad, g, nil, nil); strings.Contains(f.Tag, "bwd:") {
		t.Errorf("with d_seq_states: diagnosis [%s]", f.Tag)
	}
}

// TestSSDBackwardRecomputedForward: a backward whose forward is wrong
// while the kernel's own prefill of the problem is right recomputes the
// forward by a path of its own: "fwd:recomputed", and its gradients are
// judged past it.
func TestSSDBackwardRecomputedForward(t *testing.T) {
	o := mamba2.Options{Batch: 1, Seqlen: 20, Heads: 2, Headdim: 2, Groups: 1, Dstate: 4, D: true, DType: ssm.F32, StateDType: ssm.F32}
	p := mamba2.Generate(o, 94).Rounded()
	ct := mamba2.GenerateCotangent(p, 95, false)
	out, _ := mamba2.Prefill(p)
	bad := *out
	bad.Y = ssm.Scaled(out.Y, -1)
	g := mamba2.Grad(p, ct)
	g.D = ssm.Scaled(g.D, 2)
	prefill := func(q *mamba2.Problem) (*mamba2.Output, error) { o, _ := mamba2.Prefill(q); return o, nil }
	if f := SSDBackward(p, ct, &bad, g, prefill, nil); f.Tag != "fwd:recomputed+bwd:dD:factor(2)" {
		t.Errorf("diagnosis [%s] %s", f.Tag, f)
	}
}

// TestFactorOfNeedsAFunction: factorOf names a gradient whose own factor
// is another function of its variable, and not one wrong by a factor that
// is noise, nor one wrong at a few elements only, nor one scaled by a
// quantity other than the variable.
func TestFactorOfNeedsAFunction(t *testing.T) {
	o := mamba2.Options{Batch: 2, Seqlen: 40, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, D: true, Z: true, DtBias: true, Softplus: true,
		DType: ssm.F32, StateDType: ssm.F32}
	p := mamba2.Generate(o, 92).Rounded()
	ref := mamba2.Grad(p, mamba2.GenerateCotangent(p, 93, true))
	what, u, h0 := factorVariable(p, "dz")
	rng := rand.New(rand.NewPCG(94, 95))
	for _, c := range []struct {
		name string
		f    func(i int) float64 // the factor on ref's dz at element i
		want bool
	}{
		{"σ(z)·(2 + z(1 − σ)) for g′(z)", func(i int) float64 {
			z := p.Z[i]
			s := 1 / (1 + math.Exp(-z))
			return s * (2 + z*(1-s)) / h0[i]
		}, true},
		{"noise", func(int) float64 { return 1 + 0.1*rng.NormFloat64() }, false},
		{"a few elements", func(i int) float64 {
			if i%97 == 0 {
				return 3
			}
			return 1
		}, false},
		{"a factor of x, not z", func(i int) float64 { return 1 + 0.5*p.X[i] }, false},
	} {
		got := make([]float64, len(ref.Z))
		for i, v := range ref.Z {
			got[i] = v * c.f(i)
		}
		scale := make([]float64, len(ref.Z))
		for i, v := range ref.Z {
			scale[i] = math.Abs(v) + 1e-3
		}
		a := judge.Array{Name: "dz", Got: got, Want: ref.Z, Scale: scale, Tiny: make([]float64, len(got)), Stored: ssm.F32, Computed: ssm.F32}
		if _, ok := factorOf(a, what, u, h0, judge.Threshold(ssm.F32)); ok != c.want {
			t.Errorf("%s: factorOf %v, want %v", c.name, ok, c.want)
		}
	}
}

// TestSSDBackwardChunkDecay: dx whose term through the state at its
// chunk's end lacks the decay from the step to that end (upstream's
// generated backward mutant 1469, 2026-12-03: dA_cumsum's chunk end
// negated in _chunk_scan_chunk_state_bwd_dx_kernel, which the clamp
// min(·, 0) makes e^0 = 1) is named by that relation, and dx without
// that term at all (a chunk state masked off) by the path cut; the rows,
// heads and chunks of a chunked problem with D, z and an initial state.
func TestSSDBackwardChunkDecay(t *testing.T) {
	o := mamba2.Options{Batch: 2, Seqlen: 40, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, D: true, Z: true, DtBias: true, Softplus: true,
		InitialStates: true, Chunk: 16, DType: ssm.F32, StateDType: ssm.F32}
	p := mamba2.Generate(o, 92).Rounded()
	ct := mamba2.GenerateCotangent(p, 93, true)
	ct.SeqStates = nil
	out, _ := mamba2.Prefill(p)
	g := mamba2.Grad(p, ct)
	g.X = mamba2.GradLacking(p, ct, mamba2.FactorChunkDecay).X
	f := SSDBackward(p, ct, out, g, nil, nil)
	if f.Tag != "bwd:dx:lacks(chunk-decay)" {
		t.Fatalf("diagnosis [%s] %s, want bwd:dx:lacks(chunk-decay) alone", f.Tag, f)
	}
	g.X = mamba2.GradWithout(p, ct, mamba2.PathChunkState).X
	if f := SSDBackward(p, ct, out, g, nil, nil); f.Tag != "bwd:dx:no-path:chunk-state" {
		t.Fatalf("dx without the chunk's state path: [%s] %s, want bwd:dx:no-path:chunk-state", f.Tag, f)
	}
	q := *p
	q.Chunk = 0 // no chunks: no such relation to state
	if f := SSDBackward(&q, ct, out, mamba2.Grad(&q, ct), nil, nil); f.Tag != "" {
		t.Fatalf("a right backward without chunks: [%s] %s", f.Tag, f)
	}
}

// ssdBackwardCase is a backward's problem with every feature (two rows,
// two groups of two heads, initial states), a cotangent of y and the
// final states, and the exact prefill.
func ssdBackwardCase() (*mamba2.Problem, *mamba2.Cotangent, *mamba2.Output) {
	o := mamba2.Options{Batch: 2, Seqlen: 40, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, D: true, Z: true, DtBias: true, Softplus: true,
		InitialStates: true, DType: ssm.F32, StateDType: ssm.F32}
	p := mamba2.Generate(o, 90).Rounded()
	ct := mamba2.GenerateCotangent(p, 91, true)
	ct.SeqStates = nil
	out, _ := mamba2.Prefill(p)
	return p, ct, out
}
