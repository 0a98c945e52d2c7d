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
type tape struct {
	val  []float64
	args [][2]int32
	d    [][2]float64
}

type node int32

const noNode node = -1

func (t *tape) leaf(v float64) node { return t.push(v, noNode, 0, noNode, 0) }

func (t *tape) push(v float64, a node, da float64, b node, db float64) node {
	t.val = append(t.val, v)
	t.args = append(t.args, [2]int32{int32(a), int32(b)})
	t.d = append(t.d, [2]float64{da, db})
	return node(len(t.val) - 1)
}

func (t *tape) add(a, b node) node { return t.push(t.val[a]+t.val[b], a, 1, b, 1) }
func (t *tape) sub(a, b node) node { return t.push(t.val[a]-t.val[b], a, 1, b, -1) }
func (t *tape) mul(a, b node) node { return t.push(t.val[a]*t.val[b], a, t.val[b], b, t.val[a]) }
func (t *tape) scale(a node, c float64) node {
	return t.push(t.val[a]*c, a, c, noNode, 0)
}
func (t *tape) exp(a node) node { e := math.Exp(t.val[a]); return t.push(e, a, e, noNode, 0) }
func (t *tape) tanh(a node) node {
	th := math.Tanh(t.val[a])
	return t.push(th, a, 1-th*th, noNode, 0)
}
func (t *tape) sigmoid(a node) node {
	s := sigmoid(t.val[a])
	return t.push(s, a, s*(1-s), noNode, 0)
}
func (t *tape) sin(a node) node { return t.push(math.Sin(t.val[a]), a, math.Cos(t.val[a]), noNode, 0) }
func (t *tape) cos(a node) node { return t.push(math.Cos(t.val[a]), a, -math.Sin(t.val[a]), noNode, 0) }

// wrap is x mod 2π, whose derivative is 1 away from the jumps.
func (t *tape) wrap(a node) node {
	x := t.val[a]
	return t.push(x-2*math.Pi*math.Floor(x/(2*math.Pi)), a, 1, noNode, 0)
}

// backward returns ∂L/∂node for every node, given the seeds.
func (t *tape) backward(seed map[node]float64) []float64 {
	g := make([]float64, len(t.val))
	for n, v := range seed {
		g[n] += v
	}
	for i := len(t.val) - 1; i >= 0; i-- {
		if g[i] == 0 {
			continue
		}
		for k := 0; k < 2; k++ {
			if a := t.args[i][k]; a >= 0 {
				g[a] += g[i] * t.d[i][k]
			}
		}
	}
	return g
}

// Grad returns the float64 gradients of L = Σ ct.Y·y + Σ ct.State·state
// with respect to every input of p, by reverse-mode differentiation of the
// forward evaluation (the same operations as Forward).
func Grad(p *Problem, ct *Cotangent) *Grads {
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	t := &tape{}
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
					inc := t.mul(t.scale(t.tanh(Ang[((b*L+tt)*H+h)*A+i]), math.Pi), dt)
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
				lam := t.sigmoid(Trap[hl])
				alpha := t.exp(ADT[hl])
				beta := t.mul(t.mul(t.sub(one, lam), dt), alpha)
				gamma := t.mul(lam, dt)
				for pp := 0; pp < P; pp++ {
					v := V[((b*L+tt)*H+h)*P+pp]
					acc := zero
					for n := 0; n < N; n++ {
						s := t.add(t.add(t.mul(alpha, st[pp*N+n]), t.mul(beta, t.mul(kp[n], vp[pp]))), t.mul(gamma, t.mul(k[n], v)))
						st[pp*N+n] = s
						acc = t.add(acc, t.mul(s, q[n]))
					}
					if D != nil {
						acc = t.add(acc, t.mul(D[h], v))
					}
					i := ((b*L+tt)*H+h)*P + pp
					if Z != nil {
						acc = t.mul(acc, t.mul(Z[i], t.sigmoid(Z[i])))
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
	gr := t.backward(seed)
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
	out := &Grads{Q: of(Q), K: of(K), V: of(V), ADT: of(ADT), DT: of(DT), Trap: of(Trap), QBias: of(QB), KBias: of(KB), Angles: of(Ang), D: of(D), Z: of(Z)}
	if p.State != nil {
		out.State = &State{Angle: of(s0[0]), SSM: of(s0[1]), K: of(s0[2]), V: of(s0[3])}
	}
	return out
}
