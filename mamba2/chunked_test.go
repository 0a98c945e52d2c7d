package mamba2

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

type f32 = float32

func exp32(x f32) f32 { return f32(math.Exp(float64(x))) }

// chunked is the SSD algorithm in float32 as upstream's Triton kernels
// order it: within-chunk cumulative sums of Δ·A, chunk states, states
// passed between chunks (rounded to the state type), outputs from the
// previous chunk's state and the chunk's own quadratic form. slip plants
// one of the chunked algebra's known bugs.
func chunked(p *Problem, slip string) *Output {
	H, P, N, G, L, Q := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen, p.Chunk
	lo, hi := p.Limits()
	seqOf := make([]int, L)
	for i, sq := range p.Sequences() {
		for t := sq[0]; t < sq[1]; t++ {
			seqOf[t] = i
		}
	}
	out := &Output{Y: make([]float64, p.XLen()), FinalStates: make([]float64, p.StateLen()), SeqStates: make([]float64, p.NumSeqs()*p.HeadStateLen())}
	store := func(v f32) f32 { return f32(p.StateDType.Round(float64(v))) }
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			g := h / (H / G)
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			dt, cs := make([]f32, L), make([]f32, L)
			for t := 0; t < L; t++ {
				dt[t] = f32(Delta(p.Dt[(b*L+t)*H+h], bias, p.Softplus, lo, hi))
				prev := f32(0)
				if t%Q != 0 {
					prev = cs[t-1]
				}
				cs[t] = prev + dt[t]*f32(p.A[h])
			}
			bv := func(t, n int) f32 { return f32(p.B[((b*L+t)*G+g)*N+n]) }
			cv := func(t, n int) f32 { return f32(p.C[((b*L+t)*G+g)*N+n]) }
			for pp := 0; pp < P; pp++ {
				xv := func(t int) f32 { return f32(p.X[((b*L+t)*H+h)*P+pp]) }
				prev := make([]f32, N) // the state at the end of the previous chunk
				prevSeq := 0
				if p.InitialStates != nil && slip != "drop-init" {
					for n := range prev {
						prev[n] = store(f32(p.InitialStates[((b*H+h)*P+pp)*N+n]))
					}
				}
				for c0 := 0; c0 < L; c0 += Q {
					c1 := min(c0+Q, L)
					for t := c0; t < c1; t++ {
						var y f32
						if seqOf[t] == prevSeq || slip == "no-reset" {
							var cs0 f32
							for n := 0; n < N; n++ {
								cs0 += cv(t, n) * prev[n]
							}
							y += exp32(cs[t]) * cs0
						}
						for s := c0; s <= t; s++ {
							if seqOf[s] != seqOf[t] && slip != "no-reset" {
								continue
							}
							var cb f32
							for n := 0; n < N; n++ {
								cb += cv(t, n) * bv(s, n)
							}
							y += cb * exp32(cs[t]-cs[s]) * dt[s] * xv(s)
						}
						i := ((b*L+t)*H+h)*P + pp
						if p.D != nil {
							y += f32(p.D[p.DIndex(h, pp)]) * xv(t)
						}
						if p.Z != nil {
							z := f32(p.Z[i])
							y *= z / (1 + exp32(-z))
						}
						out.Y[i] = p.DType.Round(float64(y))
						// a sequence ending here: its final state
						if t+1 == L || seqOf[t+1] != seqOf[t] {
							si := seqOf[t]
							for n := 0; n < N; n++ {
								var v f32
								if seqOf[t] == prevSeq {
									v = exp32(cs[t]) * prev[n]
								}
								for s := c0; s <= t; s++ {
									if seqOf[s] == seqOf[t] {
										v += bv(s, n) * exp32(cs[t]-cs[s]) * dt[s] * xv(s)
									}
								}
								k := ((si*H+h)*P+pp)*N + n
								if p.CuSeqlens == nil {
									k = ((b*H+h)*P+pp)*N + n
								}
								out.SeqStates[k] = p.StateDType.Round(float64(v))
								if t+1 == L {
									out.FinalStates[((b*H+h)*P+pp)*N+n] = out.SeqStates[k]
								}
							}
						}
					}
					// pass the state to the next chunk
					last := c1 - 1
					for n := 0; n < N; n++ {
						var st f32
						for s := c0; s < c1; s++ {
							if seqOf[s] == seqOf[last] {
								st += bv(s, n) * exp32(cs[last]-cs[s]) * dt[s] * xv(s)
							}
						}
						if seqOf[last] == prevSeq || slip == "no-reset" {
							st += exp32(cs[last]) * prev[n]
						}
						prev[n] = store(st)
					}
					prevSeq = seqOf[last]
				}
			}
		}
	}
	return out
}

func worstRatio(p *Problem, got, want *Output, sc *Scale) (float64, string) {
	prec := ssm.F32.Precision()
	if p.DType == ssm.F64 {
		prec = ssm.F64.Precision()
	}
	var worst float64
	var where string
	check := func(name string, g, w, s, tiny []float64, stored ssm.DType) {
		for i := range g {
			d := math.Abs(g[i] - w[i])
			if stored.Narrow() {
				d = math.Max(0, d-stored.OutputRoundoff()*math.Abs(w[i])*1.01)
			}
			if r := d / (prec.UnitRoundoff()*s[i] + prec.Tiny()*tiny[i]); r > worst || math.IsNaN(r) {
				worst, where = r, name
			}
		}
	}
	check("y", got.Y, want.Y, sc.Y, sc.TinyY, p.DType)
	check("final_states", got.FinalStates, want.FinalStates, sc.FinalStates, sc.TinyFinal, p.StateDType)
	return worst, where
}

// TestErrorModelCoversChunkedFloat32: the chunked algebra in float32 stays
// within the model over many draws (long chunks of strong decay
// included), and each of its planted slips is far beyond it.
func TestErrorModelCoversChunkedFloat32(t *testing.T) {
	cases := []Options{
		{Batch: 1, Seqlen: 200, Heads: 2, Headdim: 2, Groups: 1, Dstate: 8, Chunk: 64, D: true, Z: true, DtBias: true, Softplus: true, InitialStates: true},
		{Batch: 1, Seqlen: 130, Heads: 4, Headdim: 2, Groups: 2, Dstate: 4, Chunk: 32, InitialStates: true, CuSeqlens: []int{0, 17, 90, 130}},
		{Batch: 2, Seqlen: 96, Heads: 2, Headdim: 2, Groups: 1, Dstate: 16, Chunk: 256, DtMin: 0.05, DtMax: 0.5},
		{Batch: 1, Seqlen: 160, Heads: 2, Headdim: 2, Groups: 1, Dstate: 8, Chunk: 32, InitialStates: true, DType: ssm.BF16, StateDType: ssm.BF16},
		{Batch: 1, Seqlen: 160, Heads: 2, Headdim: 2, Groups: 1, Dstate: 8, Chunk: 32, InitialStates: true, DType: ssm.F16},
	}
	var worst float64
	for i, o := range cases {
		if o.DType == ssm.F32 && o.StateDType == ssm.F32 {
			o.DType, o.StateDType = ssm.F32, ssm.F32
		}
		for seed := uint64(1); seed <= 6; seed++ {
			p := Generate(o, seed).Rounded()
			want, sc := Prefill(p)
			r, where := worstRatio(p, chunked(p, ""), want, sc)
			if testing.Verbose() {
				t.Logf("case %d seed %d: %.3g (%s)", i, seed, r, where)
			}
			if r > 1.5 {
				t.Errorf("case %d seed %d (%s): a correct chunked float32 evaluation at %.3g of the model (%s), want ≤ 1.5", i, seed, p.Shape(), r, where)
			}
			worst = math.Max(worst, r)
		}
	}
	t.Logf("correct chunked float32: worst ratio %.3g", worst)
	for _, c := range []struct {
		slip string
		o    Options
	}{
		{"drop-init", cases[0]},
		{"no-reset", cases[1]},
	} {
		p := Generate(c.o, 1).Rounded()
		want, sc := Prefill(p)
		if r, _ := worstRatio(p, chunked(p, c.slip), want, sc); r < 1000 {
			t.Errorf("slip %s: ratio %.3g, want ≫ 4", c.slip, r)
		}
	}
}
