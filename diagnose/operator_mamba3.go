package diagnose

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
)

// Mamba-3's operator: with Q, K, the angles, DT, ADT, Trap, D and z fixed,
// the SISO layer is linear in V and in the initial state's S and v_prev.
// Unrolling S_t = α_t·S_{t−1} + β_t·k̃_{t−1}⊗v_{t−1} + γ_t·k̃_t⊗v_t, the
// input v_s enters at step s through γ_s and at step s + 1 through β_{s+1},
// and since β_{s+1} = (1 − λ_{s+1})·Δ_{s+1}·α_{s+1},
//
//	M[t,s] = g(z_t)·(q̃_t·k̃_s)·e^{C_t − C_s}·(λ_s·Δ_s + [s < t]·(1 − λ_{s+1})·Δ_{s+1}) + [t = s]·g(z_t)·D
//
// (C the sequence's cumulative ADT, q̃ and k̃ rotated by their own step's
// accumulated angle): Mamba-2's semiseparable form with a two-term weight,
// the current input's and the previous input's. The initial state maps by
// g(z_t)·e^{C_t}·q̃_t[n] (S) and g(z_t)·e^{C_t}·(q̃_t·k_prev)·(1 − λ_0)·Δ_0
// (v_prev, with the state's k_prev), and the final state S_T of a
// sequence answers v_s with k̃_s·e^{C_T − C_s}·(the same weight).
//
// The family's relations are the formula's knobs (m3Knob): a term of the
// weight missing, its decay or Δ lacking, λ and 1 − λ swapped, the
// previous term weighted by its own step, Q and K swapped, the rotation
// negated, missing or lagged by a step; each predicts the entries whole
// (m3Family.entry), so that a relation of the rotation is judged on
// q̃_t·k̃_s itself, not as a ratio that vanishes where it does.

// Mamba3Runner runs a kernel's Mamba-3 forward on a problem, for the
// probes of the diagnosis.
type Mamba3Runner func(p *mamba3.Problem) ([]float64, *mamba3.State, error)

// m3Family is Mamba-3's part of the operator.
type m3Family struct {
	p   *mamba3.Problem
	amp float64
	// per row and head: λ_t; the accumulated angle after step t and
	// before it; rotated q̃ and k̃ per angle variant (m3Angle), and the
	// key rotated by the next step's angle
	lambda          [][]float64
	phi, phiBefore  [][][]float64
	qr, kr          [numM3Angles][][][]float64
	kNext           [][][]float64
	seqStart, seqID []int
	// the last m3QK variant computed, and its q̃ and k̃ (varied)
	variant          m3QK
	variedQ, variedK [][][]float64
	// the operator's one fit of a wrap period (fitWrap): whether made,
	// the period and whether it fits, the periods that fit alike and the
	// problem's largest angle (wrapName)
	wrapFitted, wrapOK bool
	wrapP, wrapPhi     float64
	wrapAlike          []float64
}

// m3Angle is how a knob rotates q or k.
type m3Angle int

const (
	angleOwn     m3Angle = iota // R(φ_t): the contract
	angleNegated                // R(−φ_t)
	angleNone                   // not rotated
	angleLagged                 // R(φ_{t−1}): the angle before the step's increment
	// the angle accumulated from increments tanh(θ)·π·w(Δ) other than the
	// contract's w = Δ: Δ missing, Δ twice, Δ divided for multiplied
	angleNoDt
	angleDtTwice
	angleOverDt
	// the angle carried into each chunk negated: the chunked kernel's
	// running angle, φ_c + the chunk's increments, stored as its negation
	// at the chunk's end (a rotation is 2π-periodic, so its wrap mod 2π
	// changes nothing); within a chunk the angles' differences stay, the
	// rotation across chunks and of the initial state do not
	angleCarryNegated
	numM3Angles
)

// m3Knob is one change to the operator's formula; the zero knob is the
// reference's operator.
type m3Knob struct {
	noCurrent, noPrevious                     bool
	prevUndecayed, prevDecayedTwice           bool
	lambdaSwapped, lambdaRaw, prevOwnStep     bool
	gammaNoDt, betaNoDt, qkSwapped, prevKeyNx bool
	angleQ, angleK                            m3Angle
	// qk, where set, rotates q and k otherwise than by an m3Angle: the
	// accumulated angle wrapped with another period, the biases of q or
	// k negated or left out (m3Family.varied)
	qk *m3QK
}

// m3QK is a variant of the rotated q̃ and k̃: the accumulated angle
// wrapped with the period wrap (0: not wrapped, the contract's rotation
// being 2π-periodic) and the biases of Q and K scaled by qBias and kBias
// (1: the contract's, −1 negated, 0 left out).
type m3QK struct {
	wrap, qBias, kBias float64
}

// m3ProbeProblem is the problem the operator is measured on, as
// probeProblem for Mamba-2: the first row's first four chunks (at most
// opProbeSteps), unless the row packs sequences.
func m3ProbeProblem(p *mamba3.Problem) *mamba3.Problem {
	q := *p
	if p.CuSeqlens != nil || (p.Batch == 1 && p.Seqlen <= opProbeSteps) {
		return &q
	}
	l := min(p.Seqlen, opProbeSteps)
	if c := p.Arithmetic.Chunk; c > 0 {
		l = min(l, 4*c)
	}
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	q.Batch, q.Seqlen = 1, l
	q.Q, q.K = p.Q[:l*Hqk*N], p.K[:l*Hqk*N]
	q.V, q.Angles = p.V[:l*H*P], p.Angles[:l*H*A]
	if p.Z != nil {
		q.Z = p.Z[:l*H*P]
	}
	q.ADT, q.DT, q.Trap = nil, nil, nil
	for h := 0; h < H; h++ {
		q.ADT = append(q.ADT, p.ADT[h*L:h*L+l]...)
		q.DT = append(q.DT, p.DT[h*L:h*L+l]...)
		q.Trap = append(q.Trap, p.Trap[h*L:h*L+l]...)
	}
	if s := p.State; s != nil {
		q.State = &mamba3.State{Angle: s.Angle[:H*A], SSM: s.SSM[:H*P*N], K: s.K[:H*N], V: s.V[:H*P]}
	}
	return &q
}

// newMamba3Operator is the operator of q's problem, its factors computed
// and no entry measured.
func newMamba3Operator(q *mamba3.Problem, amp float64) *operator {
	f := &m3Family{p: q, amp: amp}
	op := &operator{fam: f, batch: q.Batch, seqlen: q.Seqlen, heads: q.Heads, chunk: q.Arithmetic.Chunk, dtype: q.DType, hasD: q.D != nil}
	B, L, H, Hqk, N, A := q.Batch, q.Seqlen, q.Heads, q.HeadsQK, q.N, q.AngleDim
	op.seqOf, f.seqStart, f.seqID = make([]int, L), make([]int, L), make([]int, L)
	seqs := q.Sequences()
	for i, sq := range seqs {
		for t := sq[1]; t < sq[2]; t++ {
			op.seqOf[t], f.seqStart[t], f.seqID[t] = i, sq[1], i
		}
	}
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			d, a, lam := make([]float64, L), make([]float64, L), make([]float64, L)
			phi, before := make([][]float64, L), make([][]float64, L)
			var alt [numM3Angles][][]float64 // the increment variants' accumulated angles
			for v := angleNoDt; v < numM3Angles; v++ {
				alt[v] = make([][]float64, L)
			}
			for t := 0; t < L; t++ {
				hl := (b*H+h)*L + t
				d[t], a[t], lam[t] = q.DT[hl], q.ADT[hl], 1/(1+math.Exp(-q.Trap[hl]))
				si := f.seqID[t]
				if q.CuSeqlens == nil {
					si = b
				}
				switch {
				case t > 0 && f.seqStart[t] != t:
					before[t] = phi[t-1]
				case q.State != nil:
					before[t] = q.State.Angle[(si*H+h)*A : (si*H+h+1)*A]
				default:
					before[t] = make([]float64, A)
				}
				phi[t] = make([]float64, A)
				for i := range phi[t] {
					phi[t][i] = before[t][i] + math.Tanh(q.Angles[((b*L+t)*H+h)*A+i])*math.Pi*d[t]
				}
				for v := angleNoDt; v < numM3Angles; v++ {
					prev := before[t]
					if t > 0 && f.seqStart[t] != t {
						prev = alt[v][t-1]
					}
					w := 1.0 // angleNoDt
					switch v {
					case angleDtTwice:
						w = d[t] * d[t]
					case angleOverDt:
						w = 1 / d[t]
					case angleCarryNegated:
						w = d[t]
						// chunks count from the sequence's start, as
						// the angle kernel's do
						if c := q.Arithmetic.Chunk; c > 0 && t > 0 && f.seqStart[t] != t && (t-f.seqStart[t])%c == 0 {
							neg := make([]float64, len(prev))
							for i, a := range prev {
								neg[i] = -a
							}
							prev = neg
						}
					}
					alt[v][t] = make([]float64, A)
					for i := range alt[v][t] {
						alt[v][t][i] = prev[i] + math.Tanh(q.Angles[((b*L+t)*H+h)*A+i])*math.Pi*w
					}
				}
			}
			op.delta, op.dA, f.lambda = append(op.delta, d), append(op.dA, a), append(f.lambda, lam)
			f.phi, f.phiBefore = append(f.phi, phi), append(f.phiBefore, before)
			g := h / (H / Hqk)
			var qr, kr [numM3Angles][][]float64
			kn := make([][]float64, L)
			for t := 0; t < L; t++ {
				base := ((b*L+t)*Hqk + g) * N
				for v := m3Angle(0); v < numM3Angles; v++ {
					qv, kv := make([]float64, N), make([]float64, N)
					for n := 0; n < N; n++ {
						qv[n], kv[n] = q.Q[base+n]+q.QBias[h*N+n], q.K[base+n]+q.KBias[h*N+n]
					}
					ang := f.angles(v, phi[t], before[t])
					if v >= angleNoDt {
						ang = alt[v][t]
					}
					rotatePairs(qv, ang)
					rotatePairs(kv, ang)
					qr[v], kr[v] = append(qr[v], qv), append(kr[v], kv)
				}
				kn[t] = make([]float64, N)
				for n := 0; n < N; n++ {
					kn[t][n] = q.K[base+n] + q.KBias[h*N+n]
				}
				if t+1 < L && f.seqStart[t+1] != t+1 {
					rotatePairs(kn[t], phi[t+1])
				} else {
					kn[t] = nil // no next step in the sequence
				}
			}
			for v := range qr {
				f.qr[v], f.kr[v] = append(f.qr[v], qr[v]), append(f.kr[v], kr[v])
			}
			f.kNext = append(f.kNext, kn)
		}
	}
	op.setChunks(true)
	op.accumulate()
	return op
}

func (f *m3Family) angles(v m3Angle, phi, before []float64) []float64 {
	switch v {
	case angleNegated:
		out := make([]float64, len(phi))
		for i, a := range phi {
			out[i] = -a
		}
		return out
	case angleNone:
		return nil
	case angleLagged:
		return before
	}
	return phi
}

// rotatePairs turns the first len(phi) pairs (2i, 2i+1) of x by phi.
func rotatePairs(x, phi []float64) {
	for i, a := range phi {
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i], x[2*i+1] = x0*c-x1*s, x0*s+x1*c
	}
}

// varied returns q̃ and k̃ of every row, head and step as v computes them,
// kept until another variant is asked for (a fit asks for one after
// another, an evaluation for one many times), in buffers that the next
// variant overwrites.
func (f *m3Family) varied(v m3QK) (qr, kr [][][]float64) {
	if f.variedQ != nil && f.variant == v {
		return f.variedQ, f.variedK
	}
	q := f.p
	L, H, Hqk, N := q.Seqlen, q.Heads, q.HeadsQK, q.N
	if f.variedQ == nil {
		f.variedQ, f.variedK = make([][][]float64, len(f.phi)), make([][][]float64, len(f.phi))
		for bh := range f.phi {
			f.variedQ[bh], f.variedK[bh] = make([][]float64, L), make([][]float64, L)
			for t := 0; t < L; t++ {
				f.variedQ[bh][t], f.variedK[bh][t] = make([]float64, N), make([]float64, N)
			}
		}
	}
	f.variant = v
	var ang []float64
	for bh := range f.phi {
		b, h := bh/H, bh%H
		g := h / (H / Hqk)
		for t := 0; t < L; t++ {
			base := ((b*L+t)*Hqk + g) * N
			qv, kv := f.variedQ[bh][t], f.variedK[bh][t]
			for n := 0; n < N; n++ {
				qv[n], kv[n] = q.Q[base+n]+v.qBias*q.QBias[h*N+n], q.K[base+n]+v.kBias*q.KBias[h*N+n]
			}
			ang = append(ang[:0], f.phi[bh][t]...)
			if v.wrap > 0 {
				for i, a := range ang {
					ang[i] = a - v.wrap*math.Floor(a/v.wrap)
				}
			}
			rotatePairs(qv, ang)
			rotatePairs(kv, ang)
		}
	}
	return f.variedQ, f.variedK
}

// wrapPeriods are the periods fitWrap tries besides its grid: the
// constants a slip of 2π gives (a factor dropped, divided for multiplied,
// a digit off, degrees for radians).
var wrapPeriods = []float64{math.Pi, 2, 1, 2 / math.Pi, 1 / math.Pi, 3 * math.Pi, 4 * math.Pi, math.Pi / 2, 2*math.Pi + 1, 2*math.Pi - 1, 360, 180, 1 / (2 * math.Pi)}

// fitWrap fits the period P of an accumulated angle wrapped as φ mod P to
// the failing entries es, once an operator: the first call's entries are
// those of every failing region (the diagnosis tries them together
// first), and a slip of the period has one period wherever it shows. The entries' error as a function of P is
// smooth only within a step of k·δP ≲ 0.05 rad, k = ⌊φ/P⌋ the wraps of
// the largest angle Φ, so P is scanned on a geometric grid of relative
// step 0.05/Φ (at most 6000 periods, from 0.05 to 2Φ + 10, wrapPeriods
// beside it) on a sample of the entries, and the three best are refined
// by golden section within their step on all of them, to float64's
// resolution (k·δP is judged at the problem's precision, float64's too). A multiple of 2π
// is the contract's rotation (the rotation is 2π-periodic): no fit.
func (f *m3Family) fitWrap(op *operator, es []opEntry) (float64, bool) {
	if !f.wrapFitted {
		f.wrapFitted = true
		f.wrapP, f.wrapOK = f.fitWrapOn(op, es)
	}
	return f.wrapP, f.wrapOK
}

// fitWrapOn is fitWrap's search on es.
func (f *m3Family) fitWrapOn(op *operator, es []opEntry) (float64, bool) {
	if len(es) == 0 {
		return 0, false
	}
	var phiMax float64
	for _, rows := range f.phi {
		for _, a := range rows {
			for _, v := range a {
				phiMax = math.Max(phiMax, math.Abs(v))
			}
		}
	}
	sample := es
	if len(es) > 192 {
		sample = nil
		for i := 0; i < len(es); i += (len(es) + 191) / 192 {
			sample = append(sample, es[i])
		}
	}
	cost := func(P float64, on []opEntry) float64 {
		var c float64
		k := m3Knob{qk: &m3QK{wrap: P, qBias: 1, kBias: 1}}
		for _, e := range on {
			c += math.Min(math.Abs(e.got-f.entry(op, e, k))/(e.scale+e.tiny), 1e6)
		}
		return c
	}
	lo, hi := 0.05, 2*phiMax+10
	step := math.Max(0.05/math.Max(phiMax, 1), math.Log(hi/lo)/6000)
	type cand struct{ P, c float64 }
	var best []cand
	try := func(P float64) {
		c := cost(P, sample)
		best = append(best, cand{P, c})
		slices.SortFunc(best, func(a, b cand) int { return cmp.Compare(a.c, b.c) })
		if len(best) > 3 {
			best = best[:3]
		}
	}
	for _, P := range wrapPeriods {
		try(P)
	}
	for P := lo; P <= hi; P *= math.Exp(step) {
		try(P)
	}
	P, c := 0.0, math.Inf(1)
	const g = 0.6180339887498949
	for _, b0 := range best {
		a, b := b0.P*math.Exp(-step), b0.P*math.Exp(step)
		for i := 0; i < 90; i++ { // to float64's resolution: a wrap's k·δP must vanish
			x, y := b-g*(b-a), a+g*(b-a)
			if cost(x, es) < cost(y, es) {
				b = y
			} else {
				a = x
			}
		}
		for _, p := range []float64{b0.P, (a + b) / 2} {
			if pc := cost(p, es); pc < c {
				P, c = p, pc
			}
		}
	}
	if r := P / (2 * math.Pi); math.Abs(r-math.Round(r)) < 1e-6 {
		return 0, false
	}
	// the periods that wrap this problem's angles alike (π and 3π where
	// they lie in [−π, π)): the fit cannot tell them apart, and says so
	for _, q := range wrapPeriods {
		if math.Abs(q-P) > 1e-9*P && cost(q, es) <= c+1e-12*float64(len(es)) {
			f.wrapAlike = append(f.wrapAlike, q)
		}
	}
	f.wrapPhi = phiMax
	return P, true
}

// wrapName says the fitted period P in words, with those that fit alike.
func (f *m3Family) wrapName(P float64) string {
	s := fmt.Sprintf("%.6g", P)
	if len(f.wrapAlike) > 0 {
		var alike []string
		for _, q := range f.wrapAlike {
			alike = append(alike, fmt.Sprintf("%.6g", q))
		}
		s += fmt.Sprintf(" (or %s, which wrap this problem's angles, |φ| ≤ %.3g, alike)", strings.Join(alike, ", "), f.wrapPhi)
	}
	return s
}

// measureMamba3Operator measures the operator of the kernel behind run on
// p's Q, K, angles, DT, ADT, Trap, D and z (V and the initial state's S
// and v_prev replaced by impulses; its angle and k_prev kept).
func measureMamba3Operator(p *mamba3.Problem, run Mamba3Runner) (*operator, error) {
	return measureMamba3OperatorScaled(p, run, mamba3.ErrorScale)
}

// measureMamba3OperatorScaled is measureMamba3Operator with the entries'
// error scales from errorScale (a slip's variant has its own: β without
// Δ grows the state by 1/Δ and its rounding with it).
func measureMamba3OperatorScaled(p *mamba3.Problem, run Mamba3Runner, errorScale func(*mamba3.Problem) *mamba3.Scale) (*operator, error) {
	q := m3ProbeProblem(p)
	op := newMamba3Operator(q, 1)
	S, H, P, N := q.NumSeqs(), q.Heads, q.P, q.N
	call := func(x, init, prev []float64) (opResponse, error) {
		r := *q
		r.V = x
		if q.State != nil {
			st := *q.State
			st.SSM, st.V = init, prev
			if st.SSM == nil {
				st.SSM = make([]float64, S*H*P*N)
			}
			if st.V == nil {
				st.V = make([]float64, S*H*P)
			}
			r.State = &st
		}
		y, st, err := run(&r)
		if err != nil {
			return opResponse{}, err
		}
		want, wst := mamba3.Forward(&r)
		sc := errorScale(&r)
		arrays := judge.Mamba3Arrays(&r, y, want, st, wst, sc)
		if e := ssdShape(arrays); e != nil {
			return opResponse{}, e
		}
		_, ratios := ssdJudged(arrays)
		return opResponse{y: opArray{y, want, sc.Y, sc.TinyY, ratios["y"]},
			states: opArray{st.SSM, wst.SSM, sc.SSM, sc.TinySSM, ratios["ssm_state"]}}, nil
	}
	pr := opProbe{B: q.Batch, L: q.Seqlen, H: H, P: P, N: N, packed: q.CuSeqlens != nil, initEverySeq: true, amp: 1, call: call}
	for _, sq := range q.Sequences() {
		if sq[0] == 0 {
			pr.seqs = append(pr.seqs, [2]int{sq[1], sq[2]})
		}
	}
	if q.State != nil {
		pr.initRows, pr.prevLen = S, S*H*P
	}
	if err := op.measure(pr); err != nil {
		return nil, err
	}
	return op, nil
}

func (f *m3Family) gate(_ *operator, e opEntry) float64 {
	q := f.p
	if q.Z == nil || e.region.kind()&(kindXState|kindInitState) != 0 {
		return 1
	}
	z := q.Z[((e.b*q.Seqlen+e.t)*q.Heads+e.h)*q.P+e.p]
	return z / (1 + math.Exp(-z))
}

func (f *m3Family) skipD(_ *operator, e opEntry) float64 { return f.amp * f.p.D[e.h] }

// weights are the current input's weight γ'_s and the previous input's
// β'_{s+1} (β_{s+1}/α_{s+1} without knobs: the decay e^{C_t − C_s} is
// common), as k evaluates them.
func (f *m3Family) weights(op *operator, bh, s int, k m3Knob) (cur, prev float64) {
	lam := func(t int) float64 {
		if k.lambdaRaw {
			return f.p.Trap[bh*f.p.Seqlen+t]
		}
		if k.lambdaSwapped {
			return 1 - f.lambda[bh][t]
		}
		return f.lambda[bh][t]
	}
	d := op.delta[bh]
	cur = lam(s) * d[s]
	if k.gammaNoDt {
		cur = lam(s)
	}
	if k.noCurrent {
		cur = 0
	}
	if s+1 >= op.seqlen {
		return cur, 0 // v_s has no next step: only the current term
	}
	u := s + 1 // the step whose β weighs v_s
	if k.prevOwnStep {
		u = s
	}
	prev = (1 - lam(u)) * d[u]
	if k.betaNoDt {
		prev = 1 - lam(u)
	}
	switch {
	case k.noPrevious:
		prev = 0
	case k.prevUndecayed:
		prev /= math.Exp(op.dA[bh][s+1])
	case k.prevDecayedTwice:
		prev *= math.Exp(op.dA[bh][s+1])
	}
	return cur, prev
}

// entry is the operator's entry e as knob k evaluates it (the zero knob:
// the reference's, which TestMamba3OperatorFormula holds to the measured
// reference).
func (f *m3Family) entry(op *operator, e opEntry, k m3Knob) float64 {
	q := f.p
	H, N := q.Heads, q.N
	bh := e.b*H + e.h
	cum := op.cum[bh]
	dot := func(a, b []float64) float64 {
		var v float64
		for n := range a {
			v += a[n] * b[n]
		}
		return v
	}
	unit := func(n int) []float64 { u := make([]float64, N); u[n] = 1; return u }
	// term is v_s's contribution at step t through the vector qv (q̃_t,
	// or a unit vector for the state's element n)
	term := func(t, s int, qv []float64, kγ []float64) float64 {
		cur, prev := f.weights(op, bh, s, k)
		v := cur * dot(qv, kγ)
		if s < t {
			kβ := kγ
			if k.prevKeyNx && f.kNext[bh][s] != nil {
				kβ = f.kNext[bh][s]
			}
			v += prev * dot(qv, kβ)
		}
		return math.Exp(cum[t]-cum[s]) * v
	}
	qr, kr := f.qr[k.angleQ], f.kr[k.angleK]
	if k.qk != nil {
		qr, kr = f.varied(*k.qk)
	}
	gate := f.gate(op, e)
	seq := f.seqID[e.t]
	if q.CuSeqlens == nil {
		seq = e.b
	}
	kprev := func() []float64 { return q.State.K[(seq*H+e.h)*N : (seq*H+e.h+1)*N] }
	// prevStart is the weight of the state's v_prev at the sequence's
	// first step, (1 − λ_0)·Δ_0 as k evaluates it
	prevStart := func() float64 {
		s0 := f.seqStart[e.t]
		if k.noPrevious {
			return 0
		}
		lam := f.lambda[bh][s0]
		switch {
		case k.lambdaRaw:
			lam = q.Trap[bh*q.Seqlen+s0]
		case k.lambdaSwapped:
			lam = 1 - lam
		}
		w := (1 - lam) * op.delta[bh][s0]
		if k.betaNoDt {
			w = 1 - lam
		}
		switch {
		case k.prevUndecayed:
			w /= math.Exp(op.dA[bh][s0])
		case k.prevDecayedTwice:
			w *= math.Exp(op.dA[bh][s0])
		}
		return w
	}
	switch e.region {
	case regionUpper, regionCrossSeq, regionStateCross:
		return 0
	case regionStateInChunk, regionStatePassed:
		return f.amp * term(e.t, e.s, unit(e.n), kr[bh][e.s])
	case regionInit:
		return f.amp * gate * math.Exp(cum[e.t]) * qr[bh][e.t][e.s]
	case regionInitPrev:
		return f.amp * gate * math.Exp(cum[e.t]) * dot(qr[bh][e.t], kprev()) * prevStart()
	case regionStateInit:
		if e.prev {
			return f.amp * math.Exp(cum[e.t]) * kprev()[e.n] * prevStart()
		}
		if e.n != e.s {
			return 0
		}
		return f.amp * math.Exp(cum[e.t])
	}
	qv, kv := qr[bh][e.t], kr[bh][e.s]
	if k.qkSwapped {
		qv, kv = qr[bh][e.s], kr[bh][e.t]
	}
	v := term(e.t, e.s, qv, kv)
	if e.t == e.s && q.D != nil {
		v += q.D[e.h]
	}
	return f.amp * gate * v
}

// relations are Mamba-3's own, the formula's knobs.
func (f *m3Family) relations() []opRelation {
	knob := func(tag, words string, k m3Knob, kinds opKind) opRelation {
		return opRelation{tag: tag, words: words, kinds: kinds, predict: func(op *operator, e opEntry) float64 { return f.entry(op, e, k) }}
	}
	xs := kindXY | kindXState
	return []opRelation{
		knob("no-current", "lacks the current input's term γ_s·k̃_s⊗v_s (a token's own term at its step)", m3Knob{noCurrent: true}, xs),
		knob("no-previous", "lacks the previous input's term β_{s+1}·k̃_s⊗v_s", m3Knob{noPrevious: true}, kindAll),
		knob("previous-undecayed", "has the previous input's term without its decay: (1 − λ)·Δ for β = (1 − λ)·Δ·α", m3Knob{prevUndecayed: true}, kindAll),
		knob("previous-decayed-twice", "has the previous input's term decayed twice: β·α", m3Knob{prevDecayedTwice: true}, kindAll),
		knob("lambda-swapped", "weighs the step's end by 1 − λ and its start by λ (λ and 1 − λ swapped)", m3Knob{lambdaSwapped: true}, kindAll),
		knob("lambda-raw", "takes λ as Trap itself, without the sigmoid", m3Knob{lambdaRaw: true}, kindAll),
		knob("previous-own-step", "weighs the previous input by its own step's (1 − λ_s)·Δ_s, not the next step's", m3Knob{prevOwnStep: true}, xs),
		knob("gamma-no-dt", "has the current input's weight without Δ (γ = λ)", m3Knob{gammaNoDt: true}, xs),
		knob("beta-no-dt", "has the previous input's weight without Δ (β = (1 − λ)·α)", m3Knob{betaNoDt: true}, kindAll),
		knob("swapped(Q,K)", "reads K at the output's step and Q at the input's (q̃_s·k̃_t for q̃_t·k̃_s)", m3Knob{qkSwapped: true}, kindXY),
		knob("angle-negated", "rotates q and k by −φ (the rotation's sign flipped)", m3Knob{angleQ: angleNegated, angleK: angleNegated}, kindAll),
		knob("angle-negated(q)", "rotates q by −φ and k by φ (one rotation's sign flipped)", m3Knob{angleQ: angleNegated}, kindXY|kindInitY),
		knob("angle-negated(k)", "rotates k by −φ and q by φ (one rotation's sign flipped)", m3Knob{angleK: angleNegated}, xs),
		knob("unrotated", "does not rotate q and k", m3Knob{angleQ: angleNone, angleK: angleNone}, kindAll),
		knob("angle-lagged", "rotates by the angle before the step's increment (φ_{t−1}: an exclusive cumulative sum of the angles)", m3Knob{angleQ: angleLagged, angleK: angleLagged}, kindAll),
		knob("angle-no-dt", "accumulates the angle's increments without Δ (φ_t = Σ tanh(θ_s)·π)", m3Knob{angleQ: angleNoDt, angleK: angleNoDt}, kindAll),
		knob("angle-dt-twice", "accumulates the angle's increments with Δ twice (tanh(θ)·π·Δ²)", m3Knob{angleQ: angleDtTwice, angleK: angleDtTwice}, kindAll),
		knob("angle-over-dt", "accumulates the angle's increments divided by Δ where they are multiplied (tanh(θ)·π/Δ)", m3Knob{angleQ: angleOverDt, angleK: angleOverDt}, kindAll),
		knob("angle-carry-negated", "carries the accumulated angle into each chunk negated (the running angle's sign flipped at a chunk's end: −(φ mod 2π))", m3Knob{angleQ: angleCarryNegated, angleK: angleCarryNegated}, kindAll),
		knob("prev-key-next-angle", "rotates the previous input's key by the next step's angle, not its own", m3Knob{prevKeyNx: true}, xs),
		knob("q-bias-negated", "adds the query's bias negated (Q − q_bias for Q + q_bias)", m3Knob{qk: &m3QK{qBias: -1, kBias: 1}}, kindXY|kindInitY),
		knob("no-q-bias", "leaves the query's bias out", m3Knob{qk: &m3QK{qBias: 0, kBias: 1}}, kindXY|kindInitY),
		knob("k-bias-negated", "adds the key's bias negated (K − k_bias for K + k_bias)", m3Knob{qk: &m3QK{qBias: 1, kBias: -1}}, xs),
		knob("no-k-bias", "leaves the key's bias out", m3Knob{qk: &m3QK{qBias: 1, kBias: 0}}, xs),
		{tag: "angle-wrap", words: "wraps the accumulated angle with the period %s, not 2π (φ mod P: a rotation's period is 2π)", kinds: kindAll,
			fit: f.fitWrap, constName: f.wrapName,
			predictC: func(op *operator, e opEntry, c float64) float64 {
				return f.entry(op, e, m3Knob{qk: &m3QK{wrap: c, qBias: 1, kBias: 1}})
			}},
	}
}
