package mamba1

import (
	"math"
	"math/cmplx"

	"ssmverify/ssm"
)

// A Slip is one of the known ways a kernel of the ABI's scan goes wrong,
// written as an alternative formula for the whole scan: the reference with
// one usual mistake made on purpose. A kernel that fails against the
// reference and passes against a slip computes that slip (package
// diagnose compares a failing kernel with each).
//
// Where the slip is the ABI's scan of another problem (D dropped, Δ
// computed otherwise, C conjugated, …), Transform gives that problem (on a
// copy) and the comparison uses its reference and its own error scale.
// Otherwise EditedScan evaluates the Edit, and Rescale adapts the original
// problem's error scale to the slip's magnitudes.
type Slip struct {
	Tag, Cause string
	Applies    func(p *ssm.Problem) bool
	Transform  func(p *ssm.Problem) *ssm.Problem
	// TransformIn is Transform for a slip made in the kernel's dtype (nil
	// from it: the slip is not one of that dtype).
	TransformIn func(p *ssm.Problem, dt ssm.DType) *ssm.Problem
	Edit        Edit
	Rescale     func(p *ssm.Problem, sc *Scale)
}

// Edit lists the mistakes EditedScan makes.
type Edit struct {
	OutBeforeUpdate bool // y read from the state before this step's update
	GateNoZ         bool // y·σ(z) instead of y·z·σ(z)
	NoFactor2       bool // complex y = Re(Σ C·h)
	StateWithoutB   bool // last state h/B (constant B applied at the output only)
	// Coef, where set, replaces the method's (Ā, g): tests plant
	// coefficient bugs with it.
	Coef func(x complex128) (complex128, complex128)
	// BCoef, where set, replaces Bcoef = Δ·g, and Extra adds a term to the
	// state update that u does not multiply (tests of the diagnosis' probe).
	BCoef, Extra func(x complex128, dt float64) complex128
}

func always(*ssm.Problem) bool { return true }

func edited(p *ssm.Problem, f func(q *ssm.Problem)) *ssm.Problem {
	q := p.Clone()
	f(q)
	return q
}

// Slips is the catalogue of method m's scan, most specific first: a method
// swap explains everything a coefficient slip does, so it comes last.
func Slips(m ssm.Method) []Slip {
	s := []Slip{
		{Tag: "no-D", Cause: "the D·u skip term is missing", Applies: func(p *ssm.Problem) bool { return p.D != nil },
			Transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.D = nil }) }},
		{Tag: "no-bias", Cause: "delta_bias is ignored", Applies: func(p *ssm.Problem) bool { return p.DeltaBias != nil },
			Transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.DeltaBias = nil }) }},
		{Tag: "softplus-before-bias", Cause: "Δ = softplus(δ) + delta_bias: softplus is applied before the bias is added",
			Applies: func(p *ssm.Problem) bool { return p.Softplus && p.DeltaBias != nil }, Transform: softplusFirst},
		{Tag: "softplus-cancellation", Cause: "softplus is computed as log(1 + e^x) in the dtype: 1 + e^x rounds e^x's digits away, so Δ loses its relative accuracy for pre-activations x below about −3 and is 0 below about −17 in fp32 (log1p(e^x) keeps it)",
			Applies: func(p *ssm.Problem) bool { return p.Softplus }, TransformIn: softplusCancelled},
		{Tag: "delta-16bit", Cause: "Δ is rounded to the 16-bit input type after the bias and softplus: the step a mixed-precision kernel keeps in float32 is stored in 16 bits",
			Applies: func(p *ssm.Problem) bool { return p.Softplus || p.DeltaBias != nil }, TransformIn: deltaNarrowed},
		{Tag: "group-index", Cause: "variable B/C are read from group d mod n_groups instead of d / (dim / n_groups)",
			Applies: func(p *ssm.Problem) bool { return p.Groups > 1 && p.Groups < p.Dim && (p.VariableB || p.VariableC) }, Transform: groupsModulo},
		{Tag: "conj-C", Cause: "the complex output uses conj(C)·h instead of C·h", Applies: func(p *ssm.Problem) bool { return p.Complex },
			Transform: func(p *ssm.Problem) *ssm.Problem {
				return edited(p, func(q *ssm.Problem) {
					for i := 1; i < len(q.C); i += 2 {
						q.C[i] = -q.C[i]
					}
				})
			}},
		{Tag: "complex-factor-2", Cause: "the complex output is Re(Σ C·h), without the factor 2", Applies: func(p *ssm.Problem) bool { return p.Complex },
			Edit: Edit{NoFactor2: true}},
		{Tag: "output-before-update", Cause: "y is read from the state before this step's update (C·h[t−1] instead of C·h[t])",
			Applies: always, Edit: Edit{OutBeforeUpdate: true}},
		{Tag: "gate-no-z", Cause: "the SiLU gate is y·σ(z) instead of y·z·σ(z)", Applies: func(p *ssm.Problem) bool { return p.Z != nil },
			Edit: Edit{GateNoZ: true}, Rescale: func(p *ssm.Problem, sc *Scale) {
				for i, z := range p.Z {
					f := math.Max(1, 1/math.Abs(z))
					sc.Out[i], sc.TinyOut[i] = sc.Out[i]*f, sc.TinyOut[i]*f
				}
			}},
		{Tag: "no-gate", Cause: "z is ignored: the output is not gated", Applies: func(p *ssm.Problem) bool { return p.Z != nil },
			Transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.Z = nil }) }},
		{Tag: "state-without-B", Cause: "the last state is h / B: with constant B the kernel keeps the state without B and applies B at the output",
			Applies: func(p *ssm.Problem) bool { return !p.VariableB }, Edit: Edit{StateWithoutB: true},
			Rescale: func(p *ssm.Problem, sc *Scale) {
				for i := range sc.LastState {
					d, n := i/p.Dstate%p.Dim, i%p.Dstate
					b := cmplx.Abs(bAt(p, d*p.Dstate+n))
					f := math.Max(1, 1/b)
					sc.LastState[i], sc.TinyState[i] = sc.LastState[i]*f, sc.TinyState[i]*f
				}
			}},
	}
	for _, o := range ssm.Methods() {
		if o != m {
			o := o
			s = append(s, Slip{Tag: "method:" + o.String(), Cause: "it computes " + o.String() + "'s coefficients, not " + m.String() + "'s",
				Applies: always, Transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.Method = o }) }})
		}
	}
	return s
}

func bAt(p *ssm.Problem, i int) complex128 {
	if p.Complex {
		return complex(p.B[2*i], p.B[2*i+1])
	}
	return complex(p.B[i], 0)
}

// softplusFirst is p with Δ = softplus(δ) + bias given directly (softplus
// off, no bias).
func softplusFirst(p *ssm.Problem) *ssm.Problem {
	if !p.Softplus || p.DeltaBias == nil {
		return p.Clone()
	}
	return edited(p, func(q *ssm.Problem) {
		for i, v := range q.Delta {
			q.Delta[i] = ssm.Softplus(v) + p.DeltaBias[i/p.Seqlen%p.Dim]
		}
		q.Softplus, q.DeltaBias = false, nil
	})
}

// softplusCancelled is p with Δ given directly (softplus off, no bias) as
// log(1 + e^x) evaluated in dt: x = δ + bias, e^x and 1 + e^x and the log
// each rounded to dt, x itself above 20.
func softplusCancelled(p *ssm.Problem, dt ssm.DType) *ssm.Problem {
	return edited(p, func(q *ssm.Problem) {
		for i, v := range q.Delta {
			b := 0.0
			if p.DeltaBias != nil {
				b = p.DeltaBias[i/p.Seqlen%p.Dim]
			}
			if dt == ssm.F32 {
				x := float32(v) + float32(b)
				if x <= 20 {
					x = float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
				}
				q.Delta[i] = float64(x)
				continue
			}
			if x := v + b; x <= 20 {
				q.Delta[i] = math.Log(1 + math.Exp(x))
			} else {
				q.Delta[i] = x
			}
		}
		q.Softplus, q.DeltaBias = false, nil
	})
}

// groupsModulo is p with one group per channel holding the values of group
// d mod n_groups.
func groupsModulo(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	if p.Groups == 1 || !(p.VariableB || p.VariableC) {
		return q
	}
	q.Groups = p.Dim
	per := p.Dstate * p.Seqlen * p.ElemWords()
	regroup := func(s []float64) []float64 {
		out := make([]float64, 0, p.Batch*p.Dim*per)
		for b := 0; b < p.Batch; b++ {
			for d := 0; d < p.Dim; d++ {
				out = append(out, s[(b*p.Groups+d%p.Groups)*per:][:per]...)
			}
		}
		return out
	}
	if p.VariableB {
		q.B = regroup(p.B)
	}
	if p.VariableC {
		q.C = regroup(p.C)
	}
	return q
}

// EditedScan is a plain float64 scan of p with the mistakes of e: its own
// code, sharing with the reference only the method coefficients.
func EditedScan(p *ssm.Problem, e Edit) *ssm.Output {
	o := &ssm.Output{Out: make([]float64, p.OutLen()), LastState: make([]float64, p.StateLen())}
	L, N, cw := p.Seqlen, p.Dstate, p.ElemWords()
	val := func(s []float64, i int) complex128 {
		if p.Complex {
			return complex(s[2*i], s[2*i+1])
		}
		return complex(s[i], 0)
	}
	h := make([]complex128, N)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			grp := d / (p.Dim / p.Groups)
			bc := func(s []float64, variable bool, n, t int) complex128 {
				if variable {
					return val(s, ((b*p.Groups+grp)*N+n)*L+t)
				}
				return val(s, d*N+n)
			}
			for n := range h {
				h[n] = 0
			}
			for t := 0; t < L; t++ {
				i := (b*p.Dim+d)*L + t
				dt := StepDelta(p, i)
				u := p.U[i]
				var acc complex128
				for n := 0; n < N; n++ {
					x := complex(dt, 0) * val(p.A, d*N+n)
					ab, g := Coef(p.Method, p.Complex, x)
					if e.Coef != nil {
						ab, g = e.Coef(x)
					}
					c := bc(p.C, p.VariableC, n, t)
					if e.OutBeforeUpdate {
						acc += c * h[n]
					}
					bcoef := complex(dt, 0) * g
					if e.BCoef != nil {
						bcoef = e.BCoef(x, dt)
					}
					h[n] = ab*h[n] + bcoef*bc(p.B, p.VariableB, n, t)*complex(u, 0)
					if e.Extra != nil {
						h[n] += e.Extra(x, dt)
					}
					if !e.OutBeforeUpdate {
						acc += c * h[n]
					}
				}
				y := real(acc)
				if p.Complex && !e.NoFactor2 {
					y *= 2
				}
				if p.D != nil {
					y += p.D[d] * u
				}
				if p.Z != nil {
					z := p.Z[i]
					if e.GateNoZ {
						y /= 1 + math.Exp(-z)
					} else {
						y = y * z / (1 + math.Exp(-z))
					}
				}
				o.Out[i] = y
			}
			for n := 0; n < N; n++ {
				v := h[n]
				if e.StateWithoutB {
					v /= bc(p.B, false, n, 0)
				}
				j := ((b*p.Dim+d)*N + n) * cw
				o.LastState[j] = real(v)
				if p.Complex {
					o.LastState[j+1] = imag(v)
				}
			}
		}
	}
	return o
}

// Coef is (Ā, g) of method m at x, real A (x's real part) or complex.
func Coef(m ssm.Method, isComplex bool, x complex128) (complex128, complex128) {
	if isComplex {
		return Complex(m, x)
	}
	ab, g := Real(m, real(x))
	return complex(ab, 0), complex(g, 0)
}

// deltaNarrowed is p with Δ as a mixed-precision kernel that stores its
// step in its 16-bit input type computes it: δ + bias and softplus in
// float32, then rounded to dt; nil for a full-precision dt.
func deltaNarrowed(p *ssm.Problem, dt ssm.DType) *ssm.Problem {
	if !dt.Narrow() {
		return nil
	}
	return edited(p, func(q *ssm.Problem) {
		for i, v := range q.Delta {
			x := float32(v)
			if p.DeltaBias != nil {
				x += float32(p.DeltaBias[i/p.Seqlen%p.Dim])
			}
			if p.Softplus && x <= 20 {
				x = float32(math.Log1p(math.Exp(float64(x))))
			}
			q.Delta[i] = dt.Round(float64(x))
		}
		q.DeltaBias, q.Softplus = nil, false
	})
}
