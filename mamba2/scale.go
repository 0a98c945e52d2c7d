package mamba2

import (
	"math"
	"math/bits"
)

// Scale holds the error model's scale of every element of a prefill's
// output (package documentation): a correct kernel has
// |kernel − exact| ≲ u·S + η·T, with u and η its arithmetic's (float32's
// for the 16-bit input types).
type Scale struct {
	Y, FinalStates, SeqStates []float64
	TinyY, TinyFinal, TinySeq []float64
}

// StepScale holds the error model's scale of a decode step's outputs.
type StepScale struct {
	Y, State, TinyY, TinyState []float64
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
