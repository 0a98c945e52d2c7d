package mamba3

import (
	"fmt"
	"slices"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// stepAt returns the one-token problem of step t of a one-row problem,
// from the given state.
func stepAt(p *mamba3.Problem, t int, st *mamba3.State) *mamba3.Problem {
	q := p.Slice(t, t+1)
	q.State = st
	return q
}

// sumScales returns a scale whose every element is the sum of a's and b's.
func sumScales(a, b *mamba3.Scale) *mamba3.Scale {
	add := func(x, y []float64) []float64 {
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] + y[i]
		}
		return out
	}
	return &mamba3.Scale{Y: add(a.Y, b.Y), TinyY: add(a.TinyY, b.TinyY), Angle: add(a.Angle, b.Angle), SSM: add(a.SSM, b.SSM), K: add(a.K, b.K), V: add(a.V, b.V),
		TinyAngle: add(a.TinyAngle, b.TinyAngle), TinySSM: add(a.TinySSM, b.TinySSM), TinyK: add(a.TinyK, b.TinyK), TinyV: add(a.TinyV, b.TinyV)}
}

func compareTo(t *testing.T, what, op string, p *mamba3.Problem, y, wantY []float64, st, want *mamba3.State, sc *mamba3.Scale) bool {
	t.Helper()
	c, _, err := judge.CompareArrays(judge.Mamba3Arrays(p, y, wantY, st, want, sc))
	if err != nil {
		t.Fatal(err)
	}
	passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(p.DType)
	rep.AddKernel(t.Name(), op, p.DType, p.DType.Weight(), c.Worst.Ratio, passed, what+": "+c.Worst.String())
	if !passed {
		t.Errorf("%s (%v): ratio %.3g > %g at %s", what, p.DType, c.Worst.Ratio, judge.Threshold(p.DType), c.Worst)
	}
	return passed
}

// TestMamba3StepsEqualForward: a chain of decode steps, each from the
// state the previous one returned, equals the forward of the sequence (the
// kernel's forward against its steps, within the sum of both models).
func TestMamba3StepsEqualForward(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		t.Run(dt.String(), func(t *testing.T) {
			o := base(dt)
			o.Batch, o.Seqlen, o.D, o.Z, o.State = 1, 48, true, true, true
			p := prepare(t, bridge.OpMamba3Forward, mamba3.Generate(o, 200), dt)
			fy, fst, ok := run(t, bridge.OpMamba3Forward, p)
			if !ok {
				return
			}
			st := p.State
			var y []float64
			for i := 0; i < p.Seqlen; i++ {
				s := stepAt(p, i, st)
				a, err := kernel.Arithmetic(bridge.OpMamba3Step, dt)
				if err != nil {
					t.Skip(err)
				}
				s.Arithmetic = a
				sy, sst, ok := run(t, bridge.OpMamba3Step, s)
				if !ok {
					return
				}
				y, st = append(y, sy...), sst
			}
			q := *p
			q.Arithmetic.Chunk, q.Arithmetic.HandoffKV = 0, true
			sc := sumScales(mamba3.ErrorScale(p), mamba3.ErrorScale(&q))
			if !compareTo(t, fmt.Sprintf("%d steps against the forward", p.Seqlen), bridge.OpMamba3Step, p, y, fy, st, fst, sc) {
				f := diagnose.Mamba3(&q, y, st, nil) // a chain of steps: no one call to probe
				rep.AddKernelDiagnosis(t.Name(), bridge.OpMamba3Step, dt, dt.Weight(), f)
				t.Logf("the steps against the reference: [%s] %s", f.Tag, f)
			}
		})
	}
}

// TestMamba3SplitResume: a forward split and resumed from its own
// four-part state equals one pass: after the first step, at each position
// of the second chunk (bridgetest.SplitPoints: its first, second, middle,
// second-to-last and last token) and one step before the end.
func TestMamba3SplitResume(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		o := base(dt)
		o.Batch, o.D, o.Z, o.State = 1, true, true, true
		p := prepare(t, bridge.OpMamba3Forward, mamba3.Generate(o, 210), dt)
		want, wst := mamba3.Forward(p)
		ks := append([]int{1, 63, 64, 65}, bridgetest.SplitPoints(p.Arithmetic.Chunk, p.Seqlen)...)
		ks = append(ks, p.Seqlen-1)
		slices.Sort(ks)
		for _, k := range slices.Compact(ks) {
			if k <= 0 || k >= p.Seqlen {
				continue
			}
			t.Run(fmt.Sprintf("%v/k=%d", dt, k), func(t *testing.T) {
				head := p.Slice(0, k)
				head.State = p.State
				_, hst, ok := run(t, bridge.OpMamba3Forward, head)
				if !ok {
					return
				}
				_, exact := mamba3.Forward(head)
				tail := p.Slice(k, p.Seqlen)
				tail.State = hst
				y, st, ok := run(t, bridge.OpMamba3Forward, tail)
				if !ok {
					return
				}
				// the continuation's model from the exact state (whose terms
				// carry the handed state's magnitude) plus the whole pass's
				tail.State = exact
				tail.Arithmetic.HandoffKV = true
				full := mamba3.ErrorScale(p)
				own := mamba3.ErrorScale(tail)
				hp := p.Heads * p.P
				sc := sumScales(own, &mamba3.Scale{Y: full.Y[k*hp:], TinyY: full.TinyY[k*hp:], Angle: full.Angle, SSM: full.SSM, K: full.K, V: full.V,
					TinyAngle: full.TinyAngle, TinySSM: full.TinySSM, TinyK: full.TinyK, TinyV: full.TinyV})
				compareTo(t, fmt.Sprintf("resumed at %d", k), bridge.OpMamba3Forward, p, y, want[k*hp:], st, wst, sc)
			})
		}
	}
}

// TestMamba3PackedEqualsAlone: a packed row equals each sequence alone.
func TestMamba3PackedEqualsAlone(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		t.Run(dt.String(), func(t *testing.T) {
			o := base(dt)
			o.Batch, o.CuSeqlens, o.State, o.D = 1, []int{0, 50, 51, 200}, true, true
			p := prepare(t, bridge.OpMamba3Forward, mamba3.Generate(o, 220), dt)
			py, pst, ok := run(t, bridge.OpMamba3Forward, p)
			if !ok {
				return
			}
			psc := mamba3.ErrorScale(p)
			H, N, P, A := p.Heads, p.N, p.P, p.AngleDim
			for i, sq := range p.Sequences() {
				q := p.Slice(sq[1], sq[2])
				s := p.State
				q.State = &mamba3.State{Angle: s.Angle[i*H*A : (i+1)*H*A], SSM: s.SSM[i*H*P*N : (i+1)*H*P*N], K: s.K[i*H*N : (i+1)*H*N], V: s.V[i*H*P : (i+1)*H*P]}
				y, st, ok := run(t, bridge.OpMamba3Forward, q)
				if !ok {
					return
				}
				hp := H * P
				one := &mamba3.State{Angle: pst.Angle[i*H*A : (i+1)*H*A], SSM: pst.SSM[i*H*P*N : (i+1)*H*P*N], K: pst.K[i*H*N : (i+1)*H*N], V: pst.V[i*H*P : (i+1)*H*P]}
				ps := &mamba3.Scale{Y: psc.Y[sq[1]*hp : sq[2]*hp], TinyY: psc.TinyY[sq[1]*hp : sq[2]*hp], Angle: psc.Angle[i*H*A : (i+1)*H*A], SSM: psc.SSM[i*H*P*N : (i+1)*H*P*N],
					K: psc.K[i*H*N : (i+1)*H*N], V: psc.V[i*H*P : (i+1)*H*P], TinyAngle: psc.TinyAngle[i*H*A : (i+1)*H*A], TinySSM: psc.TinySSM[i*H*P*N : (i+1)*H*P*N],
					TinyK: psc.TinyK[i*H*N : (i+1)*H*N], TinyV: psc.TinyV[i*H*P : (i+1)*H*P]}
				compareTo(t, fmt.Sprintf("sequence %d alone against packed", i), bridge.OpMamba3Forward, q, y, py[sq[1]*hp:sq[2]*hp], st, one, sumScales(mamba3.ErrorScale(q), ps))
			}
		})
	}
}

// TestMamba3DiagnosisOfPlantedSlips plants each slip of the numpy path
// (bridge/python/adapters/numpy_mamba3.py, slip=NAME) and requires that the
// judgement fails it and the diagnosis names it.
func TestMamba3DiagnosisOfPlantedSlips(t *testing.T) {
	track(t)
	for _, c := range []struct{ slip, want string }{
		{"no-previous", "m3:no-previous"},
		{"lambda-fixed", "m3:lambda-fixed"},
		{"prev-key-current-angle", "m3:prev-key-current-angle"},
		{"rotate-halves", "m3:rotate-halves"},
		{"gamma-no-dt", "m3:gamma-no-dt"},
		{"angle-no-dt", "m3:angle-no-dt"},
		{"angle-stored-bf16", "m3:angle-stored-bf16"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			// an initial state's angles, spread over [0, 2π), make a bf16 angle tell
			o := mamba3.Options{Batch: 1, Seqlen: 60, HeadsQK: 1, Heads: 2, N: 8, P: 4, AngleDim: 2, D: true, State: true}
			k, p := plantedSlip(t, c.slip, bridge.OpMamba3Forward, mamba3.Generate(o, 230))
			y, st, err := k.Forward(bridge.OpMamba3Forward, p)
			if err != nil {
				t.Fatal(err)
			}
			want, wst := mamba3.Forward(p)
			cmp, _, _ := judge.CompareArrays(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
			if cmp.Worst.Ratio <= judge.Threshold(ssm.F32) {
				t.Fatalf("slip %s passed the judgement (ratio %.3g)", c.slip, cmp.Worst.Ratio)
			}
			f := diagnose.Mamba3(p, y, st, func(q *mamba3.Problem) ([]float64, *mamba3.State, error) { return k.Forward(bridge.OpMamba3Forward, q) })
			if f.Tag != c.want {
				t.Errorf("slip %s (ratio %.3g): diagnosis [%s] %s, want %s", c.slip, cmp.Worst.Ratio, f.Tag, f, c.want)
			} else {
				t.Logf("slip %s: ratio %.3g, [%s] %s", c.slip, cmp.Worst.Ratio, f.Tag, f)
			}
		})
	}
}
