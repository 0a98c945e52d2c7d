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

// m3OperatorProblem is a packed row of three sequences over four chunks
// of 16, with D, z and initial states: every region of the operator.
func m3OperatorProblem() *mamba3.Problem {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 64, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true,
		CuSeqlens: []int{0, 37, 38, 64}}, 5)
	p.DType, p.Arithmetic = ssm.F64, mamba3.Arithmetic{Chunk: 16, U: 0x1p-53}
	return p
}

// TestMamba3OperatorFormula holds the operator's formula (m3Family.entry)
// to the sequential reference it is measured from, entry by entry; and
// the knobs that have a variant of the reference (package mamba3's) to
// the operator measured from that variant.
func TestMamba3OperatorFormula(t *testing.T) {
	p := m3OperatorProblem()
	for _, c := range []struct {
		name string
		v    mamba3.Variant
		k    m3Knob
	}{
		{"reference", mamba3.Variant{}, m3Knob{}},
		{"no previous", mamba3.Variant{NoPrevious: true}, m3Knob{noPrevious: true}},
		{"beta without dt", mamba3.Variant{BetaNoDt: true}, m3Knob{betaNoDt: true}},
		{"gamma without dt", mamba3.Variant{GammaNoDt: true}, m3Knob{gammaNoDt: true}},
		{"lambda raw", mamba3.Variant{Lambda: func(x float64) float64 { return x }}, m3Knob{lambdaRaw: true}},
		{"lambda swapped", mamba3.Variant{Lambda: func(x float64) float64 { return 1 - 1/(1+math.Exp(-x)) }}, m3Knob{lambdaSwapped: true}},
		{"previous key at the next angle", mamba3.Variant{PrevCurrentAngle: true}, m3Knob{prevKeyNx: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			op, err := measureMamba3Operator(p, variantRunner(c.v))
			if err != nil {
				t.Fatal(err)
			}
			f := op.fam.(*m3Family)
			regions := map[opRegion]int{}
			for _, e := range op.entries {
				w := f.entry(op, e, c.k)
				if d := math.Abs(w - e.got); !(d <= 1e-9*(math.Abs(e.got)+1e-3)) {
					t.Fatalf("entry %+v: formula %g, measured %g", e, w, e.got)
				}
				regions[e.region]++
			}
			for r := opRegion(0); r < numRegions; r++ {
				if regions[r] == 0 {
					t.Errorf("no entry of region %s measured", regionNames[r])
				}
			}
		})
	}
}

// m3OperatorKernel is a fake Mamba-3 forward written in the operator's
// form: y_t = Σ_s M_k[t,s]·v_s + the initial state's maps, with knob k
// applied to the entries of the regions in on (the reference's elsewhere)
// and the final states the reference's, as a chunked kernel with a slip
// in one path computes.
func m3OperatorKernel(k m3Knob, on ...opRegion) Mamba3Runner {
	return func(p *mamba3.Problem) ([]float64, *mamba3.State, error) {
		_, st := mamba3.Forward(p)
		op := newMamba3Operator(p, 1)
		f := op.fam.(*m3Family)
		L, H, P, N := p.Seqlen, p.Heads, p.P, p.N
		y := make([]float64, L*H*P)
		entry := func(e opEntry) float64 {
			if containsRegion(on, e.region) {
				return f.entry(op, e, k)
			}
			return f.entry(op, e, m3Knob{})
		}
		for h := 0; h < H; h++ {
			for pp := 0; pp < P; pp++ {
				for t := 0; t < L; t++ {
					var v float64
					for s := 0; s <= t; s++ {
						v += entry(opEntry{h: h, p: pp, t: t, s: s, region: op.regionOf(t, s)}) * p.V[(s*H+h)*P+pp]
					}
					if p.State != nil {
						seq := f.seqID[t]
						for n := 0; n < N; n++ {
							v += entry(opEntry{h: h, p: pp, t: t, s: n, region: regionInit}) * p.State.SSM[((seq*H+h)*P+pp)*N+n]
						}
						v += entry(opEntry{h: h, p: pp, t: t, region: regionInitPrev, prev: true}) * p.State.V[(seq*H+h)*P+pp]
					}
					y[(t*H+h)*P+pp] = v
				}
			}
		}
		return y, st, nil
	}
}

// TestMamba3OperatorRelations: slips planted in one path of the operator,
// none of them in the catalogue, are named by their relation and region;
// a right operator has none.
func TestMamba3OperatorRelations(t *testing.T) {
	p := m3OperatorProblem()
	across := []opRegion{regionNextChunk, regionFar}
	offDiag := []opRegion{regionInChunk, regionNextChunk, regionFar}
	for _, c := range []struct {
		name string
		run  Mamba3Runner
		tag  string
	}{
		{"right", m3OperatorKernel(m3Knob{}), ""},
		{"previous input undecayed within a chunk", m3OperatorKernel(m3Knob{prevUndecayed: true}, regionInChunk), "op:in-chunk:previous-undecayed"},
		{"rotation's sign flipped", m3OperatorKernel(m3Knob{angleQ: angleNegated, angleK: angleNegated}, offDiag...), "op:in-chunk+next-chunk+far:angle-negated"},
		{"λ swapped across chunks", m3OperatorKernel(m3Knob{lambdaSwapped: true}, across...), "op:next-chunk+far:lambda-swapped"},
		{"previous term dropped across chunks", m3OperatorKernel(m3Knob{noPrevious: true}, across...), "op:next-chunk+far:no-previous"},
		{"Q and K swapped within a chunk", m3OperatorKernel(m3Knob{qkSwapped: true}, regionInChunk), "op:in-chunk:swapped(Q,K)"},
		{"angle lagged by a step", m3OperatorKernel(m3Knob{angleQ: angleLagged, angleK: angleLagged}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-lagged"},
		{"angle's increment without Δ", m3OperatorKernel(m3Knob{angleQ: angleNoDt, angleK: angleNoDt}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-no-dt"},
		{"angle's increment with Δ twice", m3OperatorKernel(m3Knob{angleQ: angleDtTwice, angleK: angleDtTwice}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-dt-twice"},
		{"angle's increment divided by Δ", m3OperatorKernel(m3Knob{angleQ: angleOverDt, angleK: angleOverDt}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-over-dt"},
		{"previous weighed by its own step", m3OperatorKernel(m3Knob{prevOwnStep: true}, offDiag...), "op:in-chunk+next-chunk+far:previous-own-step"},
		{"initial v_prev without its decay", m3OperatorKernel(m3Knob{prevUndecayed: true}, regionInitPrev), "op:initial-previous-input:previous-undecayed"},
		{"query's bias negated", m3OperatorKernel(m3Knob{qk: &m3QK{qBias: -1, kBias: 1}}, append(offDiag, regionDiagonal, regionInit, regionInitPrev)...), "op:diagonal+in-chunk+next-chunk+far+initial-state+initial-previous-input:q-bias-negated"},
		{"key's bias left out", m3OperatorKernel(m3Knob{qk: &m3QK{qBias: 1, kBias: 0}}, offDiag...), "op:in-chunk+next-chunk+far:no-k-bias"},
		{"angle wrapped with period 2/π", m3OperatorKernel(m3Knob{qk: &m3QK{wrap: 2 / math.Pi, qBias: 1, kBias: 1}}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-wrap(0.63662)"},
		{"angle wrapped with period 0.9 (fitted, in no list)", m3OperatorKernel(m3Knob{qk: &m3QK{wrap: 0.9, qBias: 1, kBias: 1}}, append(offDiag, regionInit)...), "op:in-chunk+next-chunk+far+initial-state:angle-wrap(0.9)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			op, err := measureMamba3Operator(p, c.run)
			wantOperatorTag(t, op, err, p.DType, c.tag)
		})
	}
}

// TestMustBeZeroRegions: entries that must be zero and fail (their ratio
// not a number, as a kernel's 0/0 gives) are not explained by a factor,
// which leaves zero at zero: no relation fits them.
func TestMustBeZeroRegions(t *testing.T) {
	p := m3OperatorProblem()
	op, err := measureMamba3Operator(p, m3OperatorKernel(m3Knob{}))
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for i := range op.entries {
		if op.entries[i].region == regionStateCross {
			op.entries[i].ratio = math.NaN()
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no entry across sequences")
	}
	f, ok := op.diagnose(judge.Threshold(p.DType))
	if !ok || f.Tag != "op:state-cross-sequence:unrelated" {
		t.Errorf("diagnosed [%s] %s, want op:state-cross-sequence:unrelated", f.Tag, f.Cause)
	}
}

// TestAngleWrapAlike: where a problem's angles all lie in [−π, π), a wrap
// with the period 3π rotates as one with π does; the fit names a period
// and says which others fit alike.
func TestAngleWrapAlike(t *testing.T) {
	p := m3OperatorProblem()
	p.State.Angle = make([]float64, len(p.State.Angle))
	for i := range p.DT {
		p.DT[i] *= 0.01 // φ = Σ tanh(θ)·π·Δ stays within (−π, π)
	}
	op, err := measureMamba3Operator(p, m3OperatorKernel(m3Knob{qk: &m3QK{wrap: 3 * math.Pi, qBias: 1, kBias: 1}}, regionInChunk, regionNextChunk, regionFar, regionInit))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := op.diagnose(judge.Threshold(p.DType))
	if !ok || !strings.Contains(f.Tag, ":angle-wrap(") || !strings.Contains(f.Cause, "which wrap this problem's angles") {
		t.Fatalf("diagnosed [%s] %s, want angle-wrap with the periods that fit alike", f.Tag, f.Cause)
	}
	t.Logf("[%s] %s", f.Tag, f.Cause)
}

// TestMamba3OperatorAngleCarried: a chunked kernel that stores its
// running angle negated at each chunk's end (generated mutant 685 of
// upstream's angle_dt.py, 2026-12-04: `state = -(state - 2π·floor(state /
// 2π))`), written here as the reference run chunk by chunk with each
// chunk's final angle state negated for the next, not through the
// operator's knob, is named by that relation where the operator differs:
// across chunks and from the initial state, not within a chunk.
func TestMamba3OperatorAngleCarried(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 64, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 7)
	p.DType, p.Arithmetic = ssm.F64, mamba3.Arithmetic{Chunk: 16, U: 0x1p-53}
	carried := func(q *mamba3.Problem) ([]float64, *mamba3.State, error) {
		C := q.Arithmetic.Chunk
		st, y := q.State, []float64{}
		for c := 0; c < q.Seqlen; c += C {
			part := q.Slice(c, min(c+C, q.Seqlen))
			part.State = st
			yc, next := mamba3.Forward(part)
			y = append(y, yc...)
			next.Angle = slices.Clone(next.Angle)
			for i := range next.Angle {
				next.Angle[i] = -next.Angle[i]
			}
			st = next
		}
		return y, st, nil
	}
	op, err := measureMamba3Operator(p, carried)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := op.diagnose(judge.Threshold(p.DType))
	regions := strings.Split(strings.TrimSuffix(strings.TrimPrefix(f.Tag, "op:"), ":angle-carry-negated"), "+")
	if !ok || !strings.HasSuffix(f.Tag, ":angle-carry-negated") || !slices.Contains(regions, "next-chunk") || slices.Contains(regions, "in-chunk") {
		t.Fatalf("diagnosed [%s] %s (where %s), want the angle carried negated, across chunks and not within one", f.Tag, f.Cause, f.Where)
	}
	t.Logf("[%s] %s", f.Tag, f.Cause)
}

// betaWithSecondFault is a float32 kernel with β without Δ (mamba3's
// slip) and a second fault beside it: the last key's term added to the
// final state with a small weight (upstream's mutated line also weighs
// the sequence's last key where the next step's Δ is masked to 0), and a
// relative rounding of 1e-5 on every output, that of a kernel computing
// the slip's larger terms in float32.
func betaWithSecondFault(p *mamba3.Problem) ([]float64, *mamba3.State, error) {
	y, st := mamba3.ForwardVariant(p, mamba3.Variant{BetaNoDt: true})
	sign := func(i, k int) float64 { return float64((i*k)%7-3) / 3 }
	for i := range y {
		y[i] = float64(float32(y[i] * (1 + 1e-5*sign(i, 2654435761))))
	}
	L, H, P, N, Hqk := p.Seqlen, p.Heads, p.P, p.N, p.HeadsQK
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			for pp := 0; pp < P; pp++ {
				for n := 0; n < N; n++ {
					i := ((b*H+h)*P+pp)*N + n
					st.SSM[i] += 0.002 * p.V[((b*L+L-1)*H+h)*P+pp] * p.K[((b*L+L-1)*Hqk+h/(H/Hqk))*N+n]
					st.SSM[i] = float64(float32(st.SSM[i] * (1 + 1e-5*sign(i, 2246822519))))
				}
			}
		}
	}
	return y, st, nil
}

// TestMamba3SlipIsTheOperatorsRelation: a slip of the catalogue beside a
// second fault, whose rounding makes a free factor per column the
// operator's simplest relation (upstream's β without Δ on the GPU), is
// named as the slip where the slip's own operator is the kernel's; the
// agreement that decides it fails for another slip's operator and for
// one measured on other entries.
func TestMamba3SlipIsTheOperatorsRelation(t *testing.T) {
	const B, L, Hqk, H, N, P, A = 1, 128, 1, 2, 16, 8, 4
	p := mamba3.Generate(mamba3.Options{Batch: B, Seqlen: L, HeadsQK: Hqk, Heads: H, N: N, P: P, AngleDim: A}, 100)
	p.DType, p.Arithmetic = ssm.F32, mamba3.Arithmetic{Chunk: 32, U: 0x1p-24}
	p = p.Rounded()
	y, st, _ := betaWithSecondFault(p)
	op, err := measureMamba3Operator(p, betaWithSecondFault)
	if err != nil {
		t.Fatal(err)
	}
	th := judge.Threshold(p.DType)
	if of, ok := op.diagnose(th); !ok || !strings.HasSuffix(of.Tag, ":column-factor") {
		t.Fatalf("the operator alone: [%s] %s, want a column factor (the case this test is about)", of.Tag, of.Cause)
	}
	f := Mamba3(p, y, st, betaWithSecondFault)
	ev := strings.Join(f.Evidence, "; ")
	if f.Tag != "m3:beta-no-dt" || !strings.Contains(f.Cause, "a second fault") || !strings.Contains(ev, "the kernel's operator is the slip's") || !strings.Contains(ev, ":column-factor]") {
		t.Errorf("diagnosis [%s] %s; evidence %s", f.Tag, f.Cause, ev)
	}
	if held, failing, ok := slipOperatorAgrees(p, op, mamba3.Variant{BetaNoDt: true}, th); !ok {
		t.Errorf("β without Δ's operator gives %d of the %d failing entries, want nine in ten", held, failing)
	}
	if held, failing, ok := slipOperatorAgrees(p, op, mamba3.Variant{GammaNoDt: true}, th); failing == 0 || ok {
		t.Errorf("γ without Δ's operator gives %d of the %d failing entries, want fewer than nine in ten", held, failing)
	}
	short := mamba3.Generate(mamba3.Options{Batch: B, Seqlen: L / 2, HeadsQK: Hqk, Heads: H, N: N, P: P, AngleDim: A}, 100)
	short.DType, short.Arithmetic = p.DType, p.Arithmetic
	if held, _, _ := slipOperatorAgrees(short.Rounded(), op, mamba3.Variant{BetaNoDt: true}, th); held != 0 {
		t.Errorf("an operator of other entries gives %d entries, want none", held)
	}
}
