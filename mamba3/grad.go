package mamba3

import "math"

// Grads is the gradient of a real loss with respect to every input of a
// problem, shaped as the input (upstream's autograd conventions: the
// gradient of a q/k head sums over the value heads that read it; of a
// bias, over batch and time).
type Grads struct {
	Q, K, V, ADT, DT, Trap, QBias, KBias, Angles, D, Z []float64
	State                                              *State
}

// GradField is one gradient with its name ("dQ", …, "dstate_v") and
// whether what it differentiates is read in the problem's input type (Q,
// K, V, Trap, Angles, Z, the state's k and v; its gradient is stored in
// that type) or in the weight type.
type GradField struct {
	Name       string
	Values     []float64
	InputTyped bool
}

// Fields lists every gradient in a fixed order, nil Values for one g has
// not (D, Z, the state's without an initial state).
func (g *Grads) Fields() []GradField {
	var s State
	if g.State != nil {
		s = *g.State
	}
	return []GradField{{"dQ", g.Q, true}, {"dK", g.K, true}, {"dV", g.V, true}, {"dADT", g.ADT, false}, {"dDT", g.DT, false},
		{"dTrap", g.Trap, true}, {"dQ_bias", g.QBias, false}, {"dK_bias", g.KBias, false}, {"dAngles", g.Angles, true},
		{"dD", g.D, false}, {"dZ", g.Z, true}, {"dstate_angle", s.Angle, false}, {"dstate_ssm", s.SSM, false},
		{"dstate_k", s.K, true}, {"dstate_v", s.V, true}}
}

// Cotangent is the loss L = Σ Y·y + Σ State·(final state) whose gradients
// Grad returns (State may be nil: y alone).
type Cotangent struct {
	Y     []float64
	State *State
}

// tape is reverse-mode differentiation of a float64 evaluation: every
// value is a node with the partial derivatives to its operands; Grad
// replays it backwards. The float64 adjoint of the layer is the forward's
// own operations differentiated one by one, so that it shares the
// forward's definition and nothing else (TestGradMatchesDifferences holds
// it to central differences of Forward).
//
// Beside each value the tape keeps a magnitude (mag: the sum of the
// absolute values of the terms the value is made of, the size its
// rounding errors are relative to) and the partials evaluated at the
// operands' magnitudes (md), for GradErrorScale.
type tape struct {
	val  []float64
	args [][2]int32
	d    [][2]float64
	mag  []float64
	md   [][2]float64
	// lab is the path each node belongs to (GradWithout cuts one); cur is
	// the label of the nodes being recorded.
	lab []Path
	cur Path
}

// A Path is a part of the layer's computation through which gradients
// flow: GradWithout cuts one, so that a diagnosis can say "dADT lacks its
// path through β".
type Path uint8

// The paths GradWithout can cut.
const (
	NoPath       Path = iota
	PathAngle         // the angle's increments tanh(Angles)·π·DT
	PathAlpha         // α = exp(ADT) decaying the state
	PathBeta          // β = (1 − λ)·Δ·α
	PathGamma         // γ = λ·Δ
	PathLambda        // λ = σ(Trap)
	PathPrevious      // the previous input's term k_prev ⊗ v_prev
	PathCurrent       // the current input's term k ⊗ v
	PathCarry         // the state carried to the next step (α·S)
	PathD             // the skip D·v
	PathGate          // the gate z·σ(z)
	numPaths
)

var pathNames = [...]string{"", "the angle's increments", "α", "β", "γ", "λ = σ(Trap)", "the previous input's term", "the current input's term", "the state carried between steps", "the skip D·v", "the gate z·σ(z)"}

var pathTags = [...]string{"", "angle", "alpha", "beta", "gamma", "lambda", "previous", "current", "carry", "D", "gate"}

func (p Path) String() string { return pathNames[p] }

// Tag is the path's short name, for diagnosis tags.
func (p Path) Tag() string { return pathTags[p] }

// Paths lists every path GradWithout can cut.
func Paths() []Path {
	out := make([]Path, 0, numPaths-1)
	for p := PathAngle; p < numPaths; p++ {
		out = append(out, p)
	}
	return out
}

type node int32

const noNode node = -1

// reserve makes room for n nodes.
func (t *tape) reserve(n int) {
	t.val, t.mag, t.lab = make([]float64, 0, n), make([]float64, 0, n), make([]Path, 0, n)
	t.args, t.d, t.md = make([][2]int32, 0, n), make([][2]float64, 0, n), make([][2]float64, 0, n)
}

func (t *tape) leaf(v float64) node { return t.push(v, math.Abs(v), noNode, 0, 0, noNode, 0, 0) }

func (t *tape) push(v, mag float64, a node, da, mda float64, b node, db, mdb float64) node {
	t.val = append(t.val, v)
	t.mag = append(t.mag, mag)
	t.args = append(t.args, [2]int32{int32(a), int32(b)})
	t.d = append(t.d, [2]float64{da, db})
	t.md = append(t.md, [2]float64{mda, mdb})
	t.lab = append(t.lab, t.cur)
	return node(len(t.val) - 1)
}

func (t *tape) add(a, b node) node {
	return t.push(t.val[a]+t.val[b], t.mag[a]+t.mag[b], a, 1, 1, b, 1, 1)
}
func (t *tape) sub(a, b node) node {
	return t.push(t.val[a]-t.val[b], t.mag[a]+t.mag[b], a, 1, 1, b, -1, 1)
}
func (t *tape) mul(a, b node) node {
	return t.push(t.val[a]*t.val[b], t.mag[a]*t.mag[b], a, t.val[b], t.mag[b], b, t.val[a], t.mag[a])
}
func (t *tape) scale(a node, c float64) node {
	return t.push(t.val[a]*c, t.mag[a]*math.Abs(c), a, c, math.Abs(c), noNode, 0, 0)
}

// unary is f(a) with derivative df, whose rounding is relative to mag.
func (t *tape) unary(a node, f, df, mag float64) node {
	return t.push(f, mag, a, df, math.Abs(df), noNode, 0, 0)
}

func (t *tape) exp(a node) node { e := math.Exp(t.val[a]); return t.unary(a, e, e, e) }

// tanh, the sigmoid, sine and cosine are bounded by 1, and their
// approximations err absolutely: their magnitude is 1. The derivatives of
// tanh and the sigmoid, 1 − th² and s·(1 − s), are differences that a
// kernel forms from the rounded th and s: where they saturate (|th| or s
// near 1) the difference cancels and errs absolutely, so their magnitude
// partials are their terms' magnitudes, 1 + th² and s·(1 + s), as the
// error model measures every sum (a derivative of 10⁻¹³ at λ = σ(30) is 0
// in float32).
func (t *tape) tanh(a node) node {
	th := math.Tanh(t.val[a])
	return t.push(th, 1, a, 1-th*th, 1+th*th, noNode, 0, 0)
}
func (t *tape) sigmoid(a node) node {
	s := sigmoid(t.val[a])
	return t.push(s, 1, a, s*(1-s), s*(1+s), noNode, 0, 0)
}
func (t *tape) sin(a node) node { return t.unary(a, math.Sin(t.val[a]), math.Cos(t.val[a]), 1) }
func (t *tape) cos(a node) node { return t.unary(a, math.Cos(t.val[a]), -math.Sin(t.val[a]), 1) }

// wrap is x mod 2π, whose derivative is 1 away from the jumps; its
// rounding is that of the unreduced sum.
func (t *tape) wrap(a node) node {
	x := t.val[a]
	return t.unary(a, x-2*math.Pi*math.Floor(x/(2*math.Pi)), 1, t.mag[a])
}

// backward returns ∂L/∂node for every node, given the seeds.
func (t *tape) backward(seed map[node]float64) []float64 { return t.reverse(seed, t.d, false) }

// without is backward with the partials of path's nodes set to zero: the
// gradient that does not flow through it.
func (t *tape) without(seed map[node]float64, path Path) []float64 {
	d := make([][2]float64, len(t.d))
	for i, x := range t.d {
		if t.lab[i] != path {
			d[i] = x
		}
	}
	return t.reverse(seed, d, false)
}

// magnitudes is backward with every partial and seed replaced by its
// magnitude: for each node the sum over all paths to the loss of the
// absolute values of the paths' products, each factor at its operands'
// magnitudes — what the node's gradient is a sum of.
func (t *tape) magnitudes(seed map[node]float64) []float64 { return t.reverse(seed, t.md, true) }

func (t *tape) reverse(seed map[node]float64, d [][2]float64, abs bool) []float64 {
	g := make([]float64, len(t.val))
	for n, v := range seed {
		if abs {
			v = math.Abs(v)
		}
		g[n] += v
	}
	for i := len(t.val) - 1; i >= 0; i-- {
		if g[i] == 0 {
			continue
		}
		for k := 0; k < 2; k++ {
			if a := t.args[i][k]; a >= 0 {
				g[a] += g[i] * d[i][k]
			}
		}
	}
	return g
}

// recorded is the forward evaluation on a tape: the leaves of every input
// and the seeds of the loss.
type recorded struct {
	t                                         *tape
	Q, K, V, ADT, DT, Trap, QB, KB, Ang, D, Z []node
	s0                                        [4][]node
	seed                                      map[node]float64
}

// record evaluates the forward of p on a tape, seeded with ct.
func record(p *Problem, ct *Cotangent) *recorded {
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	// the nodes a step of a head records, counted over shapes: about
	// 8·N·P for the state's update and the output's sum, 8·N + 5·P + 33
	// for the rest; reserved with a margin, since growing six slices node
	// by node copies the tape over and over (a diagnosis records many)
	t := &tape{}
	t.reserve(p.Batch*L*H*(10*N*P+10*N+10*P+40) + len(p.Q) + len(p.K) + len(p.V) + len(p.Angles) + 4*len(p.DT))
	leaves := func(v []float64) []node {
		if v == nil {
			return nil
		}
		out := make([]node, len(v))
		for i, x := range v {
			out[i] = t.leaf(x)
		}
		return out
	}
	Q, K, V, ADT, DT, Trap := leaves(p.Q), leaves(p.K), leaves(p.V), leaves(p.ADT), leaves(p.DT), leaves(p.Trap)
	QB, KB, Ang, D, Z := leaves(p.QBias), leaves(p.KBias), leaves(p.Angles), leaves(p.D), leaves(p.Z)
	var s0 [4][]node
	if p.State != nil {
		s0 = [4][]node{leaves(p.State.Angle), leaves(p.State.SSM), leaves(p.State.K), leaves(p.State.V)}
	}
	zero := t.leaf(0)
	one := t.leaf(1)
	seed := map[node]float64{}
	for si, sq := range p.Sequences() {
		b := sq[0]
		for h := 0; h < H; h++ {
			g := h / (H / Hqk)
			phi, st, kp, vp := make([]node, A), make([]node, P*N), make([]node, N), make([]node, P)
			for i := range phi {
				phi[i] = zero
			}
			for i := range st {
				st[i] = zero
			}
			for i := range kp {
				kp[i] = zero
			}
			for i := range vp {
				vp[i] = zero
			}
			if p.State != nil {
				copy(phi, s0[0][(si*H+h)*A:(si*H+h+1)*A])
				copy(st, s0[1][(si*H+h)*P*N:(si*H+h+1)*P*N])
				copy(kp, s0[2][(si*H+h)*N:(si*H+h+1)*N])
				copy(vp, s0[3][(si*H+h)*P:(si*H+h+1)*P])
			}
			for tt := sq[1]; tt < sq[2]; tt++ {
				hl := (b*H+h)*L + tt
				dt := DT[hl]
				cs, sn := make([]node, A), make([]node, A)
				for i := 0; i < A; i++ {
					t.cur = PathAngle
					inc := t.mul(t.scale(t.tanh(Ang[((b*L+tt)*H+h)*A+i]), math.Pi), dt)
					t.cur = NoPath
					phi[i] = t.wrap(t.add(phi[i], inc))
					cs[i], sn[i] = t.cos(phi[i]), t.sin(phi[i])
				}
				q, k := make([]node, N), make([]node, N)
				for n := 0; n < N; n++ {
					q[n] = t.add(Q[((b*L+tt)*Hqk+g)*N+n], QB[h*N+n])
					k[n] = t.add(K[((b*L+tt)*Hqk+g)*N+n], KB[h*N+n])
				}
				for i := 0; i < A; i++ {
					for _, x := range [][]node{q, k} {
						x0, x1 := x[2*i], x[2*i+1]
						x[2*i], x[2*i+1] = t.sub(t.mul(x0, cs[i]), t.mul(x1, sn[i])), t.add(t.mul(x0, sn[i]), t.mul(x1, cs[i]))
					}
				}
				t.cur = PathLambda
				lam := t.sigmoid(Trap[hl])
				t.cur = PathAlpha
				alpha := t.exp(ADT[hl])
				t.cur = PathBeta
				beta := t.mul(t.mul(t.sub(one, lam), dt), alpha)
				t.cur = PathGamma
				gamma := t.mul(lam, dt)
				t.cur = NoPath
				for pp := 0; pp < P; pp++ {
					v := V[((b*L+tt)*H+h)*P+pp]
					acc := zero
					for n := 0; n < N; n++ {
						t.cur = PathCarry
						carry := t.mul(alpha, st[pp*N+n])
						t.cur = PathPrevious
						prev := t.mul(kp[n], vp[pp])
						t.cur = PathCurrent
						cur := t.mul(k[n], v)
						t.cur = NoPath
						s := t.add(t.add(carry, t.mul(beta, prev)), t.mul(gamma, cur))
						st[pp*N+n] = s
						acc = t.add(acc, t.mul(s, q[n]))
					}
					if D != nil {
						t.cur = PathD
						dv := t.mul(D[h], v)
						t.cur = NoPath
						acc = t.add(acc, dv)
					}
					i := ((b*L+tt)*H+h)*P + pp
					if Z != nil {
						t.cur = PathGate
						gate := t.mul(Z[i], t.sigmoid(Z[i]))
						t.cur = NoPath
						acc = t.mul(acc, gate)
					}
					seed[acc] += ct.Y[i]
				}
				kp = k
				vp = append([]node(nil), V[((b*L+tt)*H+h)*P:((b*L+tt)*H+h+1)*P]...)
			}
			if cs := ct.State; cs != nil {
				for i := 0; i < A; i++ {
					seed[phi[i]] += cs.Angle[(si*H+h)*A+i]
				}
				for i := range st {
					seed[st[i]] += cs.SSM[(si*H+h)*P*N+i]
				}
				for i := range kp {
					seed[kp[i]] += cs.K[(si*H+h)*N+i]
				}
				for i := range vp {
					seed[vp[i]] += cs.V[(si*H+h)*P+i]
				}
			}
		}
	}
	return &recorded{t: t, Q: Q, K: K, V: V, ADT: ADT, DT: DT, Trap: Trap, QB: QB, KB: KB, Ang: Ang, D: D, Z: Z, s0: s0, seed: seed}
}

// Grad returns the float64 gradients of L = Σ ct.Y·y + Σ ct.State·state
// with respect to every input of p, by reverse-mode differentiation of the
// forward evaluation (the same operations as Forward).
func Grad(p *Problem, ct *Cotangent) *Grads {
	r := record(p, ct)
	return r.grads(r.t.backward(r.seed))
}

// GradWithout is Grad with the gradient's flow through path cut: what a
// backward computes that forgets one part of the chain rule.
func GradWithout(p *Problem, ct *Cotangent, path Path) *Grads {
	r := record(p, ct)
	return r.grads(r.t.without(r.seed, path))
}

// GradsWithout is GradWithout for every path, from one recording.
func GradsWithout(p *Problem, ct *Cotangent) map[Path]*Grads {
	r := record(p, ct)
	out := map[Path]*Grads{}
	for _, path := range Paths() {
		out[path] = r.grads(r.t.without(r.seed, path))
	}
	return out
}

// grads gathers the leaves' entries of an adjoint.
func (r *recorded) grads(gr []float64) *Grads {
	of := func(ns []node) []float64 {
		if ns == nil {
			return nil
		}
		out := make([]float64, len(ns))
		for i, n := range ns {
			out[i] = gr[n]
		}
		return out
	}
	out := &Grads{Q: of(r.Q), K: of(r.K), V: of(r.V), ADT: of(r.ADT), DT: of(r.DT), Trap: of(r.Trap), QBias: of(r.QB), KBias: of(r.KB), Angles: of(r.Ang), D: of(r.D), Z: of(r.Z)}
	if r.s0[0] != nil {
		out.State = &State{Angle: of(r.s0[0]), SSM: of(r.s0[1]), K: of(r.s0[2]), V: of(r.s0[3])}
	}
	return out
}
