package mamba2

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

// objective is J = ⟨ct, the prefill's outputs⟩, the scalar Grad
// differentiates.
func objective(p *Problem, ct *Cotangent) float64 {
	out, _ := Prefill(p)
	var j float64
	for _, pr := range [][2][]float64{{ct.Y, out.Y}, {ct.FinalStates, out.FinalStates}, {ct.SeqStates, out.SeqStates}} {
		for i, c := range pr[0] {
			j += c * pr[1][i]
		}
	}
	return j
}

func randomCotangent(p *Problem, seed uint64) *Cotangent { return GenerateCotangent(p, seed, true) }

// TestGradCentralDifferences holds the float64 adjoint to central
// differences of the reference, every element of every gradient, on
// problems with packed sequences and an initial state, groups, D, z,
// the bias and softplus (above and below its threshold of 20), and the
// clamp with Δs on both sides of it. The step is 10⁻⁶ of the element
// (10⁻⁶ absolute near zero); the truncation error of the difference is
// O(step²·|J‴|), the rounding's O(ε·|J|/step), both below 10⁻⁷ of the
// gradient here: the agreement asked is 10⁻⁶ relative to the gradient's
// largest element (measured: 4·10⁻¹⁰ to 8·10⁻⁸, the worst with packed
// sequences).
func TestGradCentralDifferences(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		mod  func(p *Problem)
	}{
		{"plain", Options{Batch: 2, Seqlen: 9, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3}, nil},
		{"all", Options{Batch: 2, Seqlen: 9, Heads: 4, Headdim: 2, Groups: 2, Dstate: 3, D: true, Z: true, DtBias: true, Softplus: true, InitialStates: true}, nil},
		{"packed+initial", Options{Batch: 1, Seqlen: 11, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3, D: true, Softplus: true, DtBias: true, InitialStates: true, CuSeqlens: []int{0, 4, 5, 11}}, nil},
		{"D per channel+z", Options{Batch: 2, Seqlen: 8, Heads: 2, Headdim: 3, Groups: 1, Dstate: 2, D: true, DPerChannel: true, Z: true, InitialStates: true}, nil},
		{"clamped", Options{Batch: 1, Seqlen: 10, Heads: 2, Headdim: 2, Groups: 2, Dstate: 2, Softplus: true, DtBias: true, DtMin: 0.004, DtMax: 0.05}, nil},
		{"softplus threshold", Options{Batch: 1, Seqlen: 6, Heads: 1, Headdim: 2, Groups: 1, Dstate: 2, Softplus: true, DtBias: true}, func(p *Problem) {
			// dt + bias above 20 (the identity) and below it
			p.Dt[0], p.Dt[1], p.Dt[2] = 25-p.DtBias[0], 19.5-p.DtBias[0], -3
			for h := range p.A {
				p.A[h] = -0.01 // a decay the large Δ does not erase
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.DType, c.o.StateDType = ssm.F64, ssm.F64
			p := Generate(c.o, 3)
			if c.mod != nil {
				c.mod(p)
			}
			lo, hi := p.Limits()
			ct := randomCotangent(p, 5)
			g := Grad(p, ct)
			clamped, worst := 0, 0.0
			for _, f := range []struct {
				name string
				v, d []float64
			}{{"X", p.X, g.X}, {"Dt", p.Dt, g.Dt}, {"A", p.A, g.A}, {"B", p.B, g.B}, {"C", p.C, g.C}, {"D", p.D, g.D},
				{"Z", p.Z, g.Z}, {"DtBias", p.DtBias, g.DtBias}, {"InitialStates", p.InitialStates, g.InitialStates}} {
				if (f.v == nil) != (f.d == nil) || len(f.v) != len(f.d) {
					t.Fatalf("d%s: %d elements for %d", f.name, len(f.d), len(f.v))
				}
				var big float64
				for _, d := range f.d {
					big = math.Max(big, math.Abs(d))
				}
				for i := range f.v {
					x := f.v[i]
					step := 1e-6 * math.Max(math.Abs(x), 1)
					if f.name == "Dt" && c.o.DtMax > 0 {
						// a Δ within a step of the clamp's edge has no derivative
						bias := 0.0
						if p.DtBias != nil {
							bias = p.DtBias[i%p.Heads]
						}
						sp := math.Log1p(math.Exp(x + bias))
						if sp < lo || sp > hi {
							clamped++
						}
						if math.Abs(sp-lo) < 1e-4 || math.Abs(sp-hi) < 1e-4 {
							continue
						}
					}
					f.v[i] = x + step
					jp := objective(p, ct)
					f.v[i] = x - step
					jm := objective(p, ct)
					f.v[i] = x
					num := (jp - jm) / (2 * step)
					d := math.Abs(num - f.d[i])
					worst = math.Max(worst, d/math.Max(big, 1e-3))
					if !(d <= 1e-6*math.Max(big, 1e-3)) {
						t.Errorf("d%s[%d] = %.12g, central difference %.12g (|Δ| %.3g, largest element %.3g)", f.name, i, f.d[i], num, d, big)
					}
				}
			}
			t.Logf("worst |central difference − adjoint| / the gradient's largest element: %.2g", worst)
			if c.o.DtMax > 0 && clamped == 0 {
				t.Error("no Δ clamped: the clamp's zero derivative is not tested")
			}
		})
	}
}

// TestGradCatchesSlips: the central-difference check fails an adjoint
// with a slip (dA without Δ, dx without the skip), so that it can fail.
func TestGradCatchesSlips(t *testing.T) {
	p := Generate(Options{Batch: 1, Seqlen: 8, Heads: 2, Headdim: 2, Groups: 1, Dstate: 2, D: true, DType: ssm.F64, StateDType: ssm.F64}, 9)
	ct := randomCotangent(p, 1)
	g := Grad(p, ct)
	worst := func(v, d []float64) float64 {
		var w float64
		for i := range v {
			x := v[i]
			v[i] = x + 1e-6
			jp := objective(p, ct)
			v[i] = x - 1e-6
			jm := objective(p, ct)
			v[i] = x
			w = math.Max(w, math.Abs((jp-jm)/2e-6-d[i]))
		}
		return w
	}
	for _, c := range []struct {
		name string
		v, d []float64
		slip func([]float64) []float64
	}{
		{"dA doubled", p.A, g.A, func(d []float64) []float64 { return ssm.Scaled(d, 2) }},
		{"dX without the skip", p.X, g.X, func(d []float64) []float64 {
			out := append([]float64(nil), d...)
			for i := range out {
				out[i] -= ct.Y[i] * p.D[(i/p.Headdim)%p.Heads]
			}
			return out
		}},
	} {
		if w := worst(c.v, c.slip(c.d)); w <= 1e-6 {
			t.Errorf("%s: the check passed (worst difference %g)", c.name, w)
		}
	}
	if w := worst(p.A, g.A); w > 1e-6 {
		t.Fatalf("the adjoint itself fails: %g", w)
	}
}

// TestMagnitudeAdjointBoundsTheGradient: the error model's magnitude
// adjoint (every value and partial at its absolute value) bounds the
// gradient element by element, sequentially and chunked (where the
// decay's part is summed over each chunk), so that the model's scale is
// never below the size of what it scales.
func TestMagnitudeAdjointBoundsTheGradient(t *testing.T) {
	o := Options{Batch: 2, Seqlen: 37, Heads: 4, Headdim: 3, Groups: 2, Dstate: 4, D: true, Z: true, DtBias: true, Softplus: true,
		InitialStates: true, DType: ssm.F32, StateDType: ssm.F32}
	for _, chunk := range []int{0, 8} {
		o.Chunk = chunk
		p := Generate(o, 11)
		ct := randomCotangent(p, 12)
		g, m := Grad(p, ct).Fields(), adjoint(p, ct, variant{mag: true}).Fields()
		for i, f := range g {
			for j, v := range f.Values {
				if !(math.Abs(v) <= m[i].Values[j]*(1+1e-12)+1e-300) {
					t.Fatalf("chunk %d: |%s[%d]| = %.6g above its magnitude %.6g", chunk, f.Name, j, math.Abs(v), m[i].Values[j])
				}
			}
		}
	}
}

// TestEveryPathCarriesGradient: cutting each path of the chain rule, or
// leaving out each factor, changes some gradient of a problem with every
// option on (chunks of 4, for the chunk's state path) — none is dead, so
// each can be a diagnosis' candidate.
func TestEveryPathCarriesGradient(t *testing.T) {
	p := Generate(Options{Batch: 1, Seqlen: 12, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3, D: true, Z: true, DtBias: true, Softplus: true,
		InitialStates: true, CuSeqlens: []int{0, 5, 12}, Chunk: 4, DType: ssm.F64, StateDType: ssm.F64}, 13)
	ct := randomCotangent(p, 14)
	full := Grad(p, ct)
	changed := func(g *Grads) bool {
		for i, f := range g.Fields() {
			for j, v := range f.Values {
				if v != full.Fields()[i].Values[j] {
					return true
				}
			}
		}
		return false
	}
	for _, path := range Paths() {
		if !changed(GradWithout(p, ct, path)) {
			t.Errorf("cutting %s changes no gradient", path)
		}
	}
	for _, f := range Factors() {
		if !changed(GradLacking(p, ct, f)) {
			t.Errorf("leaving out %s changes no gradient", f)
		}
	}
}

// TestGradLackingChunkDecay holds FactorChunkDecay to the chunked
// backward's own form, written out here: dx_s's term through the state
// at its chunk's end e is Δ_s·Σ_n B_s[n]·e^{cum_e − cum_s}·Ŝ_e[n], Ŝ_e the
// cotangent of that state from beyond the chunk (the later outputs' and
// the final state's, summed directly: the row is one sequence, whose
// state's cotangent is the final one's too); without the factor, that term
// lacks e^{cum_e − cum_s} and every other term stays; with the chunk's
// state path cut (PathChunkState), dx lacks that term.
func TestGradLackingChunkDecay(t *testing.T) {
	const Q = 4
	p := Generate(Options{Batch: 1, Seqlen: 11, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3, D: true, Chunk: Q,
		DType: ssm.F64, StateDType: ssm.F64}, 21)
	ct := randomCotangent(p, 22)
	L, H, P, N := p.Seqlen, p.Heads, p.Headdim, p.Dstate
	lo, hi := p.Limits()
	full, got, cut := Grad(p, ct), GradLacking(p, ct, FactorChunkDecay), GradWithout(p, ct, PathChunkState)
	for h := 0; h < H; h++ {
		delta, cum := make([]float64, L), make([]float64, L)
		for s := 0; s < L; s++ {
			delta[s] = p.delta(p.Dt[s*H+h], 0, lo, hi)
			cum[s] = delta[s] * p.A[h]
			if s > 0 {
				cum[s] += cum[s-1]
			}
		}
		for pp := 0; pp < P; pp++ {
			for s := 0; s < L; s++ {
				e := min((s/Q+1)*Q, L) - 1 // the chunk's last step
				var want, through float64
				for n := 0; n < N; n++ {
					// Ŝ_e[n]: ∂J/∂h after step e, from the steps after e and the
					// final state (a row's one sequence: its state's cotangent too)
					k := (h*P+pp)*N + n
					sh := (ct.FinalStates[k] + ct.SeqStates[k]) * math.Exp(cum[L-1]-cum[e])
					for t2 := e + 1; t2 < L; t2++ {
						sh += ct.Y[(t2*H+h)*P+pp] * p.C[t2*N+n] * math.Exp(cum[t2]-cum[e])
					}
					want += delta[s] * p.B[s*N+n] * (1 - math.Exp(cum[e]-cum[s])) * sh
					through += delta[s] * p.B[s*N+n] * math.Exp(cum[e]-cum[s]) * sh
				}
				i := (s*H+h)*P + pp
				if d := full.X[i] - cut.X[i]; math.Abs(d-through) > 1e-12*(1+math.Abs(through)) {
					t.Fatalf("dx[step %d, head %d, channel %d] through its chunk's end state: %.15g, want %.15g", s, h, pp, d, through)
				}
				if d := got.X[i] - full.X[i]; math.Abs(d-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("dx[step %d, head %d, channel %d] lacking the chunk's decay: %.15g more than the reference's, want %.15g", s, h, pp, d, want)
				}
			}
		}
	}
}
