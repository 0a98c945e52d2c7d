package mamba1

import (
	"fmt"
	"math"
	"math/rand/v2"

	"ssmverify/ssm"
)

// Dist is an input distribution.
type Dist int

const (
	Realistic Dist = iota
	Stress
)

func (d Dist) String() string {
	if d == Stress {
		return "stress"
	}
	return "realistic"
}

// Spec describes a problem without its data.
type Spec struct {
	Batch, Dim, Seqlen, Dstate, Groups int

	Method               ssm.Method
	Complex              bool
	VariableB, VariableC bool
	Softplus             bool
	HasD, HasZ, HasBias  bool
	Dist                 Dist
}

func (s Spec) String() string {
	kind := ssm.AKind(s.Complex)
	return fmt.Sprintf("%v/%s/%v b%d d%d l%d n%d g%d varB=%t varC=%t softplus=%t D=%t z=%t bias=%t",
		s.Method, kind, s.Dist, s.Batch, s.Dim, s.Seqlen, s.Dstate, s.Groups,
		s.VariableB, s.VariableC, s.Softplus, s.HasD, s.HasZ, s.HasBias)
}

// MambaBlock is the configuration of a Mamba block's scan: variable B and
// C in one group, D, z, delta_bias and softplus, realistic inputs.
func MambaBlock(m ssm.Method, batch, dim, seqlen, dstate int) Spec {
	return Spec{Batch: batch, Dim: dim, Seqlen: seqlen, Dstate: dstate, Groups: 1, Method: m,
		VariableB: true, VariableC: true, Softplus: true, HasD: true, HasZ: true, HasBias: true}
}

// ForAnyMethod reports whether Generate(s, seed) draws the same values whatever
// s.Method is: the method bounds only the positive real parts of A, which
// Realistic never draws. A caller that times every method on one problem
// (Check7) may then draw it once and set Method on copies.
func (s Spec) ForAnyMethod() bool { return s.Dist == Realistic }

// Generate returns the problem of spec s drawn from seed: the same on every
// machine and Go version (PCG with a fixed stream).
func Generate(s Spec, seed uint64) *ssm.Problem {
	r := rand.New(rand.NewPCG(seed, 0x5eed5ca9))
	p := &ssm.Problem{
		Batch: s.Batch, Dim: s.Dim, Seqlen: s.Seqlen, Dstate: s.Dstate, Groups: s.Groups,
		Method: s.Method, Complex: s.Complex, VariableB: s.VariableB, VariableC: s.VariableC,
		Softplus: s.Softplus,
	}
	want := p.Lens()
	seq := want["U"]
	g := drawer{r: r, dist: s.Dist, method: s.Method}

	// Δ first: A's bound for positive real parts depends on the largest step.
	p.Delta = make([]float64, seq)
	if s.HasBias {
		p.DeltaBias = make([]float64, s.Dim)
	}
	maxDt := g.deltas(p, s)

	p.A = make([]float64, want["A"])
	for d := 0; d < s.Dim; d++ {
		for n := 0; n < s.Dstate; n++ {
			re, im := g.a(n, s.Complex, maxDt, s.Seqlen)
			if s.Complex {
				p.A[2*(d*s.Dstate+n)], p.A[2*(d*s.Dstate+n)+1] = re, im
			} else {
				p.A[d*s.Dstate+n] = re
			}
		}
	}
	p.U = g.values(seq)
	p.B = g.values(want["B"])
	p.C = g.values(want["C"])
	if s.HasZ {
		p.Z = g.values(seq)
	}
	if s.HasD {
		p.D = make([]float64, s.Dim)
		for i := range p.D {
			p.D[i] = 1 + 0.25*r.NormFloat64()
			if s.Dist == Stress {
				p.D[i] = g.value()
			}
		}
	}
	return p
}

type drawer struct {
	r      *rand.Rand
	dist   Dist
	method ssm.Method
}

// unstableX is the largest step x = Δ·a that a positive real part of A may
// take at any step of a sequence of seqlen steps, so that the state grows by
// at most e^40 over the sequence and the scan stays finite in float32
// (every Δ·a of a row lies in [0, maxDt·a]; |Ā| grows with x there).
//
// Ā = e^x gives x ≤ 40/seqlen. Bilinear's Ā = (1 + x/2)/(1 − x/2) =
// e^{2·atanh(x/2)} grows faster and has a pole at x = 2 (so does its
// g = 1/(1 − x/2) = (Ā + 1)/2): x ≤ 2·tanh(20/seqlen) bounds the growth by
// e^40 as well, and x ≤ 2 − 2⁻⁹ keeps 1 − x/2 ≥ 2⁻¹⁰, so that float32's
// rounding of x (relative 2⁻²⁴) moves Ā by a first-order amount the error
// model covers instead of across the pole. Without it, Δ·a landed within
// 0.01 of the pole step after step and the float64 reference reached
// 6.6e38 (the accuracy suite in CI; gen_test.go keeps the cases).
func (g drawer) unstableX(seqlen int) float64 {
	if g.method == ssm.Bilinear {
		return math.Min(2*math.Tanh(20/float64(seqlen)), 2-0x1p-9)
	}
	return 40 / float64(seqlen)
}

func (g drawer) logUniform(lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + g.r.Float64()*(math.Log(hi)-math.Log(lo)))
}

func (g drawer) sign() float64 {
	if g.r.IntN(2) == 0 {
		return -1
	}
	return 1
}

// value is one entry of u, B, C, z (or D under Stress).
func (g drawer) value() float64 {
	if g.dist == Stress {
		return g.sign() * g.logUniform(1e-3, 1e3)
	}
	return g.r.NormFloat64()
}

func (g drawer) values(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = g.value()
	}
	return v
}

// deltas fills Delta (and DeltaBias) and returns the largest step dt the
// problem can take after bias and softplus.
func (g drawer) deltas(p *ssm.Problem, s Spec) float64 {
	maxDt := 0.0
	note := func(v float64) {
		if s.Softplus && v <= 20 {
			v = math.Log1p(math.Exp(v))
		}
		maxDt = math.Max(maxDt, math.Abs(v))
	}
	for d := 0; d < s.Dim; d++ {
		var bias float64
		switch {
		case s.Dist == Realistic && s.Softplus:
			bias = ssm.InverseSoftplus(g.logUniform(1e-3, 1e-1))
		case s.Dist == Stress && s.Softplus:
			bias = g.sign() * g.logUniform(1e-2, 30) // crosses the threshold at 20
		case s.Dist == Stress:
			bias = g.logUniform(1e-4, 1)
		}
		if s.HasBias {
			p.DeltaBias[d] = bias
		}
		for b := 0; b < s.Batch; b++ {
			for t := 0; t < s.Seqlen; t++ {
				i := (b*s.Dim+d)*s.Seqlen + t
				var v float64
				switch {
				case s.Dist == Realistic && s.Softplus:
					// Mamba's projection output around the bias.
					v = 0.1 * g.r.NormFloat64()
					if !s.HasBias {
						v += ssm.InverseSoftplus(g.logUniform(1e-3, 1e-1))
					}
				case s.Dist == Realistic:
					v = g.logUniform(1e-3, 1e-1)
				case s.Softplus:
					v = g.sign() * g.logUniform(1e-3, 10)
				default:
					v = g.logUniform(1e-4, 10)
				}
				p.Delta[i] = v
				if s.HasBias {
					v += bias
				}
				note(v)
			}
		}
	}
	return maxDt
}

// a returns A[d][n] (real part, imaginary part).
func (g drawer) a(n int, complexA bool, maxDt float64, seqlen int) (re, im float64) {
	if g.dist == Realistic {
		if complexA {
			return -0.5, math.Pi * float64(n)
		}
		return -float64(n + 1), 0
	}
	posMax := g.unstableX(seqlen) / math.Max(maxDt, 1e-6)
	switch g.r.IntN(4) {
	case 0: // near zero: foh's 0/0 and the Δ → 0 limits
		re = g.sign() * g.logUniform(1e-8, 1e-3)
	case 1: // strongly stable: e^x underflows
		re = -g.logUniform(1, 1e3)
	case 2: // unstable
		re = g.r.Float64() * math.Min(posMax, 2)
	default:
		re = -g.logUniform(1e-4, 1e2)
	}
	if re > posMax {
		re = posMax
	}
	if complexA {
		im = g.sign() * g.logUniform(1e-4, 1e2)
	}
	return re, im
}

// UnstableProducts is a problem whose sequential state stays finite while
// the products of Ā over runs of steps overflow: a time-parallel scan forms
// such products (the sequential recurrence never does), and ∞·0 = NaN where
// the state is 0 made this project's CUDA build return NaN (FuzzScan on the
// H200: poly, complex, fp64). Each row's state is 0 until step 100 (u = 0),
// and steps 20–83 have |Ā| far above 1 (softplus off, Δ < 0, a = −1 or
// −1 + i·n·10⁻⁹) — e^60 in float32, e^400 in float64, for bilinear 2/ε at
// x = 2(1 − ε) — so that two or more of them overflow the dtype while each
// is finite; the later steps are a realistic stable problem. A correct
// kernel of any design matches the reference here.
func UnstableProducts(m ssm.Method, dt ssm.DType, isComplex bool) *ssm.Problem {
	const seqlen, from, to, quiet = 300, 20, 84, 100
	s := Spec{Batch: 2, Dim: 3, Seqlen: seqlen, Dstate: 4, Groups: 1, Method: m, Complex: isComplex,
		VariableB: true, VariableC: true, HasD: true, Dist: Realistic}
	p := Generate(s, 5)
	cw := 1
	if isComplex {
		cw = 2
	}
	for i := 0; i < len(p.A)/cw; i++ {
		p.A[cw*i] = -1
		if isComplex {
			p.A[cw*i+1] = float64(i%s.Dstate) * 1e-9
		}
	}
	big := 60.0 // x of the unstable steps: e^x finite, e^{2x} not
	if dt == ssm.F64 {
		big = 400
	}
	if m == ssm.Bilinear {
		eps := 0x1p-20 // Ā = (2 − ε)/ε
		if dt == ssm.F64 {
			eps = 0x1p-40
		}
		big = 2 * (1 - eps)
	}
	for r := 0; r < s.Batch*s.Dim; r++ {
		for step := 0; step < quiet; step++ {
			p.U[r*seqlen+step] = 0
			if step >= from && step < to {
				p.Delta[r*seqlen+step] = -big
			}
		}
	}
	return p
}

// SweepGrid is (Δ, a) for x = Δ·a over log-spaced magnitudes 1e-8 … 1e3
// (24 per decade), both signs, and 0; Δ is drawn in [0.5, 2] and a = x/Δ,
// both rounded to the dtype, so that a kernel's own product Δ·a is
// exercised. For complex A, a is interleaved (re, im), the same modulus at
// a random angle in the left and right half-planes.
func SweepGrid(dt ssm.DType, isComplex bool, seed uint64) (delta, a []float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	var xs []float64
	for k := 0; k <= 11*24; k++ {
		mag := math.Pow(10, -8+float64(k)/24)
		xs = append(xs, mag, -mag)
	}
	xs = append(xs, 0)
	round := func(v float64) float64 {
		if dt == ssm.F32 {
			return float64(float32(v))
		}
		return v
	}
	for _, x := range xs {
		d := round(0.5 + 1.5*r.Float64())
		delta = append(delta, d)
		if isComplex {
			th := math.Pi * (2*r.Float64() - 1)
			a = append(a, round(x/d*math.Cos(th)), round(math.Abs(x)/d*math.Sin(th)))
		} else {
			a = append(a, round(x/d))
		}
	}
	return delta, a
}

// SetInitialState gives p a seeded initial state: every state drawn
// uniformly from [−1, 1] (real and imaginary part), the magnitudes a
// trained model's state reaches after a prefill.
func SetInitialState(p *ssm.Problem, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	p.InitialState = make([]float64, p.StateLen())
	for i := range p.InitialState {
		p.InitialState[i] = 2*r.Float64() - 1
	}
}

// TrainedDeltas gives p the Δ that trained Mamba models feed their scan:
// softplus on, no separate bias, and pre-activations spread uniformly over
// [−20, 20] — the range in which trained models keep Δ's pre-activation
// (ports to new hardware have lost accuracy there), where softplus runs from
// 2·10⁻⁹ to its pass-through at 20.
func TrainedDeltas(p *ssm.Problem, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 13))
	p.Softplus, p.DeltaBias = true, nil
	for i := range p.Delta {
		p.Delta[i] = 40*r.Float64() - 20
	}
}

// Within returns s with its sizes moved to the nearest that f declares
// (ssm.Features.Sizes) and its B/C made variable where f takes no constant
// B/C, constant where it takes no variable: a problem drawn from the result
// can be fitted (ssm.Features.Fit applies the options and the heads).
func (s Spec) Within(f ssm.Features) Spec {
	if f.All() {
		return s
	}
	s.Dim, s.Dstate, s.Groups = f.Sizes(s.Dim, s.Dstate, s.Groups)
	if f.Options&ssm.OptConstantBC == 0 {
		s.VariableB, s.VariableC = true, true
	}
	if f.Options&ssm.OptVariableBC == 0 {
		s.VariableB, s.VariableC = false, false
	}
	return s
}

// NewCotangent returns a seeded cotangent for p's backward pass: dout drawn
// from N(0, 1) (the gradient a loss sends back is of order one per
// element), and with withLast a gradient of the last state drawn likewise
// (a loss that reads the state, as a chunked training step does).
func NewCotangent(p *ssm.Problem, seed uint64, withLast bool) *ssm.Cotangent {
	r := rand.New(rand.NewPCG(seed, 17))
	c := &ssm.Cotangent{Out: make([]float64, p.OutLen())}
	for i := range c.Out {
		c.Out[i] = r.NormFloat64()
	}
	if withLast {
		c.LastState = make([]float64, p.StateLen())
		for i := range c.LastState {
			c.LastState[i] = r.NormFloat64()
		}
	}
	return c
}
