package ssd

import (
	"math"
	"math/bits"

	"ssmverify/ssm"
)

// Scale holds the error model's scale of every element of a prefill's
// output (package documentation): a correct kernel has
// |kernel − exact| ≲ u·S + η·T, with u and η its arithmetic's (float32's
// for the 16-bit input types).
type Scale struct {
	Y, FinalStates, SeqStates []float64
	TinyY, TinyFinal, TinySeq []float64
}

// softplus is the kernels' softplus: the identity above 20.
func softplus(v float64) float64 {
	if v <= 20 {
		return math.Log1p(math.Exp(v))
	}
	return v
}

// Delta returns Δ for a raw dt: bias, softplus, clamp.
func Delta(dt, bias float64, soft bool, lo, hi float64) float64 {
	v := dt + bias
	if soft {
		v = softplus(v)
	}
	return math.Min(math.Max(v, lo), hi)
}

// naiveDelta is Delta with the softplus of Triton 3's kernels,
// log(e^v + 1) evaluated in float32: without log1p, 1 + e^v rounds away
// the relative precision of a small softplus (e^v ≪ 1).
func naiveDelta(dt, bias float64, lo, hi float64) float64 {
	v := float32(dt + bias)
	if v <= 20 {
		v = float32(math.Log(float64(float32(float64(float32(math.Exp(float64(v)))) + 1))))
	}
	return math.Min(math.Max(float64(v), lo), hi)
}

func (p *Problem) delta(dt, bias float64, lo, hi float64) float64 {
	if p.naiveSoftplus && p.Softplus {
		return naiveDelta(dt, bias, lo, hi)
	}
	return Delta(dt, bias, p.Softplus, lo, hi)
}

func silu(z float64) float64 { return z / (1 + math.Exp(-z)) }

// skipAndGate adds head h's skip term D·x to the output y of element i
// and applies the gate z·σ(z), with their error terms: D·x and the sum
// one rounding each (3·|D·x|), the gate's evaluation five (5·|y·z·σ(z)|)
// beside the scale carried through it.
func skipAndGate(y, mag, x float64, d, z []float64, h, i int) (float64, float64) {
	if d != nil {
		y += d[h] * x
		mag += 3 * math.Abs(d[h]*x)
	}
	if z != nil {
		gz := silu(z[i])
		mag = mag*math.Abs(gz) + 5*math.Abs(y*gz)
		y *= gz
	}
	return y, mag
}

// Prefill returns the float64 reference of a prefill and its error scale.
func Prefill(p *Problem) (*Output, *Scale) {
	H, P, N, G, L := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen
	Q := p.Chunk
	u := p.DType.Precision().UnitRoundoff()
	out := &Output{Y: make([]float64, p.XLen()), FinalStates: make([]float64, p.StateLen()), SeqStates: make([]float64, p.NumSeqs()*p.HeadStateLen())}
	sc := &Scale{Y: make([]float64, p.XLen()), FinalStates: make([]float64, p.StateLen()), SeqStates: make([]float64, len(out.SeqStates)),
		TinyY: make([]float64, p.XLen()), TinyFinal: make([]float64, p.StateLen()), TinySeq: make([]float64, len(out.SeqStates))}
	// the factors of a narrower state and of operands rounded in the
	// chunk's products (4 roundings of u_in per term), in units of u
	var stateFactor, operandFactor float64
	if p.StateDType.Narrow() || (p.StateDType == ssm.F32 && p.DType == ssm.F64) {
		stateFactor = p.StateDType.OutputRoundoff() / u
	}
	if p.DType.Narrow() {
		operandFactor = 4 * p.DType.OutputRoundoff() / u
	}
	if p.operandU > 0 {
		operandFactor = math.Max(operandFactor, 4*p.operandU/u)
	}
	k0 := float64(N + 2*max(Q, 1) + 8) // an output: the sums over states and over a chunk
	k0Stat := float64(2*max(Q, 1) + 8) // a state: the sum over a chunk
	lo, hi := p.Limits()
	seqs := p.Sequences()
	delta := make([]float64, L)
	cum := make([]float64, L)  // within the sequence, through t
	wcum := make([]float64, L) // |within the chunk (row-aligned), through t|
	s := make([]float64, N)
	rs := make([]recurrences, N)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			g := Group(h, H, G)
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			var w float64
			for t := 0; t < L; t++ {
				delta[t] = p.delta(p.Dt[(b*L+t)*H+h], bias, lo, hi)
				if Q > 0 && t%Q == 0 {
					w = 0
				}
				w += math.Abs(delta[t] * p.A[h])
				wcum[t] = w
			}
			m := model{q: Q, l2q: float64(bits.Len(uint(max(Q, 1)))), wcum: wcum, sf: stateFactor, ops: operandFactor}
			for si, sq := range seqs {
				var c float64
				for t := sq[0]; t < sq[1]; t++ {
					c += delta[t] * p.A[h]
					cum[t] = c
				}
				for pp := 0; pp < P; pp++ {
					for n := 0; n < N; n++ {
						s[n], rs[n] = 0, recurrences{}
						if p.InitialStates != nil && si == 0 {
							v := p.InitialStates[((b*H+h)*P+pp)*N+n]
							s[n] = v
							rs[n].init(math.Abs(v), sq[0])
						}
					}
					for t := sq[0]; t < sq[1]; t++ {
						i := ((b*L+t)*H+h)*P + pp
						x := p.X[i]
						a := math.Exp(delta[t] * p.A[h])
						bt := (b*L + t) * G * N
						var y, mag float64
						for n := 0; n < N; n++ {
							bx := delta[t] * p.B[bt+g*N+n] * x
							s[n] = a*s[n] + bx
							rs[n].step(&m, t, a, math.Abs(bx), math.Abs(cum[t]), sq[0])
							cn := p.C[bt+g*N+n]
							y += cn * s[n]
							mag += math.Abs(cn) * rs[n].scale(&m, t, math.Abs(cum[t]), k0)
						}
						y, mag = skipAndGate(y, mag, x, p.D, p.Z, h, i)
						out.Y[i], sc.Y[i], sc.TinyY[i] = y, mag, float64(N+3)*float64(t-sq[0]+2)
					}
					// the sequence's final state
					last := sq[1] - 1
					for n := 0; n < N; n++ {
						k := ((si*H+h)*P+pp)*N + n
						if p.CuSeqlens == nil {
							k = ((b*H+h)*P+pp)*N + n
						}
						out.SeqStates[k] = s[n]
						sc.SeqStates[k] = rs[n].scale(&m, last, math.Abs(cum[last]), k0Stat)
						sc.TinySeq[k] = float64(last - sq[0] + 2)
						if si == len(seqs)-1 {
							f := ((b*H+h)*P+pp)*N + n
							out.FinalStates[f], sc.FinalStates[f], sc.TinyFinal[f] = s[n], sc.SeqStates[k], sc.TinySeq[k]
						}
					}
				}
			}
		}
	}
	return out, sc
}

// model is what the recurrences of the error model need of a problem's
// head: the chunk length (0: sequential), ⌈log2 Q⌉ + 1 (the error of a
// tree-ordered cumulative sum), the within-chunk cumulative magnitudes,
// and the factors of a narrower state and of rounded operands.
type model struct {
	q       int
	l2q     float64
	wcum    []float64
	sf, ops float64
}

func (m *model) chunk(t int) float64 {
	if m.q == 0 {
		return 0
	}
	return float64(t / m.q)
}

// recurrences carries, for one state, the decayed sums over the earlier
// steps s of m_s = |Δ_s·B_s·x_s| times each factor the error terms E_ts
// need (package documentation), split into the steps of t's chunk (a*)
// and of earlier chunks (x*), so that Σ_s m_s·e^{cum_t − cum_s}·E_ts is
// formed in O(1) per step.
type recurrences struct {
	a0, apos, acum   float64 // this chunk: Σ m, Σ m·s, Σ m·|cum_s|
	x0, xw, xc, xcum float64 // earlier chunks: Σ m, Σ m·(last(s) − s + 2·l2q)·W_last(s), Σ m·c(s), Σ m·|cum_s|
	pos              float64 // all: Σ m·s (the sequential model)
}

// init enters the initial state's magnitude v as a term of the chunk
// before the sequence's start (one more rounding to the state type).
func (r *recurrences) init(v float64, start int) {
	r.x0, r.xc, r.pos = v, -v, v*float64(start-1)
}

func (r *recurrences) step(m *model, t int, a, mag, cumT float64, start int) {
	if m.q > 0 && t%m.q == 0 && t > start {
		// the previous chunk's terms become earlier chunks' terms
		last := t - 1
		wl := m.wcum[last]
		r.xw += (float64(last)+2*m.l2q)*wl*r.a0 - wl*r.apos
		r.xc += m.chunk(last) * r.a0
		r.xcum += r.acum
		r.x0 += r.a0
		r.a0, r.apos, r.acum = 0, 0, 0
	}
	r.a0 = a*r.a0 + mag
	r.apos = a*r.apos + mag*float64(t)
	r.acum = a*r.acum + mag*cumT
	r.x0, r.xw, r.xc, r.xcum = a*r.x0, a*r.xw, a*r.xc, a*r.xcum
	r.pos = a*r.pos + mag*float64(t)
}

// scale is Σ_s |T_s|·(k0 + E_ts) at t, over |C| (units of u).
func (r *recurrences) scale(m *model, t int, cumT, k0 float64) float64 {
	tt := float64(t)
	all := r.a0 + r.x0
	var e float64
	if m.q > 0 {
		wt := m.wcum[t]
		pos := tt - float64(t/m.q*m.q)
		same := wt*((tt+2*m.l2q)*r.a0-r.apos) + 4*(cumT*r.a0-r.acum)
		cross := ((pos+1+m.l2q)*wt+4*cumT+3*m.chunk(t))*r.x0 + r.xw - 4*r.xcum - 3*r.xc
		e = k0*all + same + cross + m.sf*(m.chunk(t)*r.x0-r.xc)
	} else {
		e = (k0+3*tt)*all - 3*r.pos + 4*(cumT*all-r.acum-r.xcum) + m.sf*((tt+1)*all-r.pos)
	}
	return math.Max(e, k0*all) + m.ops*all
}

// StepScale holds the error model's scale of a decode step's outputs.
type StepScale struct {
	Y, State, TinyY, TinyState []float64
}

// Decode returns the float64 reference of a decode step and its scale:
// one step of the recurrence from each row's slot, the pool updated in
// place (a copy), padding rows' outputs zero and their slots untouched.
func Decode(s *Step) (*StepOutput, *StepScale) {
	H, P, N, G := s.Heads, s.Headdim, s.Dstate, s.Groups
	out := &StepOutput{Y: make([]float64, s.Batch*H*P), State: append([]float64(nil), s.State...)}
	sc := &StepScale{Y: make([]float64, len(out.Y)), State: make([]float64, len(out.State)), TinyY: make([]float64, len(out.Y)), TinyState: make([]float64, len(out.State))}
	lo, hi := s.Limits()
	for b := 0; b < s.Batch; b++ {
		slot := s.Slot(b)
		if slot < 0 {
			continue
		}
		for h := 0; h < H; h++ {
			g := Group(h, H, G)
			bias := 0.0
			if s.DtBias != nil {
				bias = s.DtBias[h]
			}
			d := Delta(s.Dt[b*H+h], bias, s.Softplus, lo, hi)
			if s.naiveSoftplus && s.Softplus {
				d = naiveDelta(s.Dt[b*H+h], bias, lo, hi)
			}
			a := math.Exp(d * s.A[h])
			for pp := 0; pp < P; pp++ {
				i := (b*H+h)*P + pp
				x := s.X[i]
				var y, mag float64
				for n := 0; n < N; n++ {
					k := ((slot*H+h)*P+pp)*N + n
					old := s.State[k]
					bx := d * s.B[(b*G+g)*N+n] * x
					v := a*old + bx
					out.State[k] = v
					sc.State[k] = 4*math.Abs(a*old) + 3*math.Abs(bx)
					sc.TinyState[k] = 2
					cn := s.C[(b*G+g)*N+n]
					y += cn * v
					mag += math.Abs(cn) * (float64(N+6)*math.Abs(a*old) + float64(N+4)*math.Abs(bx))
				}
				y, mag = skipAndGate(y, mag, x, s.D, s.Z, h, i)
				out.Y[i], sc.Y[i], sc.TinyY[i] = y, mag, float64(N+3)
			}
		}
	}
	return out, sc
}

// Terms is the error model's bookkeeping for one entry of a state that
// decays by a_t per step and takes new terms of magnitude m_t (package
// documentation): other recurrences of the same form (Mamba-3's, package
// mamba3) reuse it. Chunk is the kernel's chunk length (0: sequential),
// wcum the within-chunk cumulative magnitudes of the log-decay.
type Terms struct {
	m model
	r recurrences
}

// NewTerms starts the bookkeeping of a sequence.
func NewTerms(chunk int, wcum []float64) *Terms {
	return &Terms{m: model{q: chunk, l2q: float64(bits.Len(uint(max(chunk, 1)))), wcum: wcum}}
}

// Init enters an initial state of magnitude v for a sequence starting at
// start.
func (x *Terms) Init(v float64, start int) { x.r.init(v, start) }

// Step decays the terms by a and adds one of magnitude mag at step t,
// |cum_t| being the magnitude of the sequence's cumulative log-decay.
func (x *Terms) Step(t int, a, mag, cumT float64, start int) { x.r.step(&x.m, t, a, mag, cumT, start) }

// Scale is Σ_s m_s·decay·(k0 + E_ts) at t, in units of u.
func (x *Terms) Scale(t int, cumT, k0 float64) float64 { return x.r.scale(&x.m, t, cumT, k0) }

// Sum is Σ_s m_s·decay: the entry's magnitude bound.
func (x *Terms) Sum() float64 { return x.r.a0 + x.r.x0 }
