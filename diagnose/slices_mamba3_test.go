package diagnose

import (
	"math"
	"slices"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// slicedProblem has two batch rows, four heads in two groups of Q and K
// and initial states: every slice relation has another slice to show in.
func slicedProblem() *mamba3.Problem {
	p := mamba3.Generate(mamba3.Options{Batch: 2, Seqlen: 40, HeadsQK: 2, Heads: 4, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 19)
	p.Arithmetic = mamba3.Arithmetic{U: 0x1p-24}
	return p.Rounded()
}

// misindexed is a forward that computes the reference on the problem as
// read wrong (read rewrites a copy of it): a kernel whose offsets into an
// input are wrong, for any data it is given.
func misindexed(read func(q *mamba3.Problem)) Mamba3Runner {
	return func(p *mamba3.Problem) ([]float64, *mamba3.State, error) {
		q := copyProblem(p)
		read(q)
		y, st := mamba3.Forward(q)
		return y, st, nil
	}
}

// TestMamba3SliceRelations: kernels that read an input at another slice's
// offset, none of them in the catalogue, are named by the slice relation
// their runs show and by the input; a fault the same in every slice shows
// none.
func TestMamba3SliceRelations(t *testing.T) {
	p := slicedProblem()
	cases := []struct {
		name, want string
		read       func(q *mamba3.Problem)
	}{
		// the batch offset negated: rows past the first read what lies
		// before the array (here a constant)
		{"trap at −batch", "op:trap-input:batch-ignored", func(q *mamba3.Problem) {
			B, L, H := q.Batch, q.Seqlen, q.Heads
			tr := append([]float64(nil), q.Trap...)
			for i := H * L; i < B*H*L; i++ {
				tr[i] = 0.7
			}
			q.Trap = tr
		}},
		// the sequence stride dropped: sequence s reads from element s,
		// the first sequence's state but one element (a change of that
		// state moves the others')
		{"initial v state without its sequence stride", "op:initial-v-state-input:batch-crossed", func(q *mamba3.Problem) {
			B, H, P := q.NumSeqs(), q.Heads, q.P
			s := *q.State
			v := append([]float64(nil), s.V...)
			for sq := 1; sq < B; sq++ {
				copy(v[sq*H*P:(sq+1)*H*P], s.V[sq:sq+H*P])
			}
			s.V = v
			q.State = &s
		}},
		// the angles' head stride dropped in their write: head 0 reads
		// what the last head wrote over it
		{"angles of the last head in head 0", "op:angles-input:head-crossed", func(q *mamba3.Problem) {
			B, L, H, A := q.Batch, q.Seqlen, q.Heads, q.AngleDim
			an := append([]float64(nil), q.Angles...)
			for r := 0; r < B*L; r++ {
				copy(an[r*H*A:r*H*A+A], q.Angles[(r*H+H-1)*A:(r*H+H)*A])
			}
			q.Angles = an
		}},
	}
	for _, c := range cases {
		run := misindexed(c.read)
		y, st, _ := run(p)
		f := Mamba3(p, y, st, run)
		if f.Tag != c.want {
			t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
		}
	}

	// the initial SSM state's sequence stride dropped in a kernel that also keeps its angles
	// in bf16 (upstream's property, failing by a little wherever the data
	// round so): the fault's bulk still keeps to its batch row
	q := mamba3.Generate(mamba3.Options{Batch: 2, Seqlen: 40, HeadsQK: 2, Heads: 4, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 19)
	q.DType = ssm.BF16
	q.Arithmetic = mamba3.Arithmetic{Chunk: 16, Approx: true, U: ssm.BF16.Precision().UnitRoundoff(), OperandU: ssm.BF16.OutputRoundoff()}
	// no angle in batch row 1: the property fails in row 0 alone, and
	// moves with its data when the rows are reversed
	L, H, A := q.Seqlen, q.Heads, q.AngleDim
	for i := L * H * A; i < 2*L*H*A; i++ {
		q.Angles[i] = 0
	}
	for i := H * A; i < 2*H*A; i++ {
		q.State.Angle[i] = 0
	}
	q = q.Rounded()
	bf16Angles := func(r *mamba3.Problem) ([]float64, *mamba3.State, error) {
		r = copyProblem(r)
		S, w := r.NumSeqs(), r.Heads*r.P*r.N
		s := *r.State
		v := append([]float64(nil), s.SSM...)
		for sq := 1; sq < S; sq++ {
			copy(v[sq*w:(sq+1)*w], s.SSM[sq:sq+w])
		}
		s.SSM = v
		r.State = &s
		y, st := mamba3.ForwardVariant(r, mamba3.Variant{AngleStoredBF16: true})
		return y, st, nil
	}
	y, st, _ := bf16Angles(q)
	if f := Mamba3(q, y, st, bf16Angles); f.Tag != "op:initial-ssm-state-input:batch-crossed" {
		t.Errorf("the initial SSM state's sequence stride dropped beside bf16 angles: diagnosis [%s] %s", f.Tag, f)
	}

	// the same fault in every slice (every Trap read as 0.7): no slice
	// relation, whatever else the diagnosis says
	run := misindexed(func(q *mamba3.Problem) {
		tr := make([]float64, len(q.Trap))
		for i := range tr {
			tr[i] = 0.7
		}
		q.Trap = tr
	})
	y, st, _ = run(p)
	if f := Mamba3(p, y, st, run); strings.Contains(f.Tag, "-input:") || strings.Contains(f.Tag, "slices:") {
		t.Errorf("a fault alike in every slice: diagnosis [%s] %s", f.Tag, f)
	}
}

// TestMamba3BackwardSliceRelations: a backward whose forward is right and
// whose dV is wrong past head 0 (the forward kept what the backward reads
// at −head), or whose dK takes the last group's data in group 0, is named
// by the slice relation; without a runner of the backward it stays
// "none".
func TestMamba3BackwardSliceRelations(t *testing.T) {
	p := slicedProblem()
	ct := mamba3.GenerateCotangent(p, true, 5)
	y, st := mamba3.Forward(p)
	P, N := p.P, p.N
	var ctUsed *mamba3.Cotangent // the cotangent the fake backward runs with
	cases := []struct {
		name, want string
		slip       func(q *mamba3.Problem, g *mamba3.Grads)
	}{
		{"dV past head 0 from a store at −head", "bwd:dV:head-index", func(q *mamba3.Problem, g *mamba3.Grads) {
			for i := range g.V {
				if (i/P)%q.Heads > 0 {
					g.V[i] = 0.25 * math.Cos(float64(i))
				}
			}
		}},
		{"dK of group 0 from group 1's keys", "bwd:dK:k-input-head-crossed", func(q *mamba3.Problem, g *mamba3.Grads) {
			Hq := q.HeadsQK
			for r := 0; r < q.Batch*q.Seqlen; r++ {
				for n := 0; n < N; n++ {
					k := q.K[(r*Hq+Hq-1)*N+n]
					g.K[(r*Hq)*N+n] = 0.3 * k * k
				}
			}
		}},
		// dV from the cotangent of the batch row before its own (a
		// pointer into dy with its batch offset one row short): only a
		// change of the first row's dy shows it
		{"dV from the row before's dy", "bwd:dV:dy-input-batch-crossed", func(q *mamba3.Problem, g *mamba3.Grads) {
			c := *ctUsed
			w := q.Seqlen * q.Heads * q.P
			c.Y = make([]float64, len(ctUsed.Y))
			copy(c.Y[w:], ctUsed.Y)
			g.V = mamba3.Grad(q, &c).V
		}},
	}
	for _, c := range cases {
		runBwd := func(q *mamba3.Problem, qct *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error) {
			yq, sq := mamba3.Forward(q)
			g := mamba3.Grad(q, qct)
			ctUsed = qct
			c.slip(q, g)
			return yq, sq, g, nil
		}
		_, _, g, _ := runBwd(p, ct)
		if f := Mamba3Backward(p, ct, y, st, g, nil, runBwd); f.Tag != c.want {
			t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
		}
		if f := Mamba3Backward(p, ct, y, st, g, nil, nil); !strings.HasSuffix(f.Tag, ":none") {
			t.Errorf("%s without a backward runner: diagnosis [%s] %s", c.name, f.Tag, f)
		}
	}
}

// TestM3SlicerPermutes: moving every input's slices and then moving them
// back is the identity, and the reference's y moves with its data: the
// index relation's permutation is the layer's symmetry; so is a group of
// Q and K per head.
func TestM3SlicerPermutes(t *testing.T) {
	p := slicedProblem()
	sl := newM3Slices(p)
	B, H, Hq := p.Batch, p.Heads, p.HeadsQK
	ax := sliceAxis{"head", true, H, func(b int) int { return B - 1 - b }, func(h int) int { return (h + H/Hq) % H }, func(k int) int { return (k + 1) % Hq }, ""}
	back := sliceAxis{"head", true, H, func(b int) int { return B - 1 - b }, func(h int) int { return (h + H - H/Hq) % H }, func(k int) int { return (k + Hq - 1) % Hq }, ""}
	q := permutedProblem(sl, ax).(*m3Slices).p
	r := permutedProblem(newM3Slices(q), back).(*m3Slices)
	for _, in := range sl.inputs() {
		a, b := sl.input(in.name), r.input(in.name)
		if a == nil {
			continue
		}
		if !slices.Equal(a, b) {
			t.Fatalf("%s: moved and moved back is not itself", in.name)
		}
	}
	y, _ := mamba3.Forward(p)
	yq, _ := mamba3.Forward(q)
	if moved := sl.dims().permuted(y, layTokenHead, ax); !slices.Equal(moved, yq) {
		t.Error("the reference's y of the permuted problem is not its y permuted")
	}
	if yu, _ := mamba3.Forward(ungrouped(p)); !slices.Equal(y, yu) {
		t.Error("a group of Q and K per head changes the reference's y")
	}
}

// TestMamba3StaleRelation: a backward whose dV of head 2 is the slot an
// earlier call left (its store went elsewhere) depends on that call: the
// relation is stale, in head 2; a backward without memory has none, nor
// one whose NaN stays where it was.
func TestMamba3StaleRelation(t *testing.T) {
	p := slicedProblem()
	ct := mamba3.GenerateCotangent(p, true, 5)
	P := p.P
	var left []float64
	stale := func(q *mamba3.Problem, qct *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error) {
		yq, sq := mamba3.Forward(q)
		g := mamba3.Grad(q, qct)
		was := left
		left = append([]float64(nil), g.V...)
		for i := range g.V {
			if (i/P)%q.Heads == 2 {
				g.V[i] = 0
				if was != nil {
					g.V[i] = was[i]
				}
			}
		}
		return yq, sq, g, nil
	}
	probe := func(q *mamba3.Problem, qct *mamba3.Cotangent) ([]judge.Array, error) {
		_, _, g, _ := stale(q, qct)
		return judge.Mamba3GradArrays(q, g, mamba3.Grad(q, qct), mamba3.GradErrorScale(q, qct))
	}
	base, err := probe(p, ct)
	if err != nil {
		t.Fatal(err)
	}
	sp := newM3Slices(p)
	sprobe := func(q sliceProblem, c any) ([]judge.Array, error) {
		return probe(q.(*m3Slices).p, c.(*mamba3.Cotangent))
	}
	f := staleRelation(sp, ct, base, sprobe, judge.Threshold(p.DType))
	if f == nil || f.relation != "head-stale" || !strings.Contains(f.cause, "heads [2] of 4") {
		t.Fatalf("dV of head 2 from the earlier call: %+v", f)
	}
	fresh := func(q *mamba3.Problem, qct *mamba3.Cotangent) ([]judge.Array, error) {
		return judge.Mamba3GradArrays(q, mamba3.Grad(q, qct), mamba3.Grad(q, qct), mamba3.GradErrorScale(q, qct))
	}
	base, _ = fresh(p, ct)
	sfresh := func(q sliceProblem, c any) ([]judge.Array, error) {
		return fresh(q.(*m3Slices).p, c.(*mamba3.Cotangent))
	}
	if f := staleRelation(sp, ct, base, sfresh, judge.Threshold(p.DType)); f != nil {
		t.Errorf("a backward without memory: %+v", f)
	}
	// dK of the last three tokens of each sequence left by the earlier
	// call (a store at −token: the chunk's last positions never written)
	var leftK []float64
	tokens := func(q sliceProblem, c any) ([]judge.Array, error) {
		r, rc := q.(*m3Slices).p, c.(*mamba3.Cotangent)
		g := mamba3.Grad(r, rc)
		was := leftK
		leftK = append([]float64(nil), g.K...)
		w := r.HeadsQK * r.N
		for i := range g.K {
			if (i/w)%r.Seqlen >= r.Seqlen-3 {
				g.K[i] = 0
				if was != nil {
					g.K[i] = was[i]
				}
			}
		}
		return judge.Mamba3GradArrays(r, g, mamba3.Grad(r, rc), mamba3.GradErrorScale(r, rc))
	}
	base, _ = tokens(sp, ct)
	if f := staleRelation(sp, ct, base, tokens, judge.Threshold(p.DType)); f == nil || f.relation != "token-stale" || !strings.Contains(f.cause, "positions [37, 40) of each sequence") {
		t.Errorf("dK of the last three tokens from the earlier call: %+v", f)
	}
	// NaN in head 2 every time (a NaN's ratio is no number): not stale
	nan := func(q sliceProblem, c any) ([]judge.Array, error) {
		r, rc := q.(*m3Slices).p, c.(*mamba3.Cotangent)
		g := mamba3.Grad(r, rc)
		for i := range g.V {
			if (i/P)%r.Heads == 2 {
				g.V[i] = math.NaN()
			}
		}
		return judge.Mamba3GradArrays(r, g, mamba3.Grad(r, rc), mamba3.GradErrorScale(r, rc))
	}
	base, _ = nan(sp, ct)
	if f := staleRelation(sp, ct, base, nan, judge.Threshold(p.DType)); f != nil {
		t.Errorf("a backward with NaN in one head, the same each call: %+v", f)
	}
}
