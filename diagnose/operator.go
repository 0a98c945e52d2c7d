package diagnose

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"ssmverify/judge"
	"ssmverify/report"
	"ssmverify/ssm"
)

// The operator of a chunked kernel, measured.
//
// With every input but one fixed, a selective scan is linear in that one:
// Mamba-2's prefill in x, Mamba-3's forward in V, both in the initial
// state. Row b, head h, channel p of y at step t is Σ_s M[t,s]·x[s] with
// M lower-triangular and semiseparable within a sequence,
//
//	M[t,s] = g(z_t)·(c_t·b_s·w_s·e^{cum_t − cum_s} + [t = s]·D)   s ≤ t, same sequence
//	M[t,s] = 0                                                    otherwise
//
// (cum the sequence's cumulative decay, g the SiLU gate; c·b·w is C_t·B_s·Δ_s
// for Mamba-2, q̃_t·k̃_s·(λ_s·Δ_s + (1 − λ_{s+1})·Δ_{s+1}) for Mamba-3:
// operator_mamba2.go, operator_mamba3.go). Its structure is the
// algorithm's: a chunked kernel forms the diagonal and the entries within
// a chunk from the chunk's own quadratic form, those across chunk
// boundaries from the states it passes on, and resets at a sequence's
// start. A slip in one of those paths shows as a relation between the
// kernel's M and the reference's that holds on the path's region: a factor
// lacking or added (Δ_s, Δ_t, e^{Δ·A}, 2, 0), an exponent scaled (log2 e) or
// shifted by a step, B and C (or Q and K) swapped, a term of Mamba-3's
// trapezoid missing or misweighted, its rotation negated or lagged, a
// region missing or leaking.
//
// operator.measure recovers the kernel's M with impulses: call k sets
// x[b, s, h, p] = 1 for s = k·P + p, so that the P channels of every head
// and row probe P columns at once (⌈L/P⌉ calls), and the reference's M comes
// from the same calls. Every entry keeps its error-model scale, so that a
// relation is judged as the kernel was: within the threshold, entry by
// entry.

// opRegion is where an entry (t, s) of the operator lies relative to the
// kernel's chunks and the problem's sequences.
type opRegion int

const (
	regionDiagonal     opRegion = iota // t = s
	regionInChunk                      // s < t, one chunk
	regionNextChunk                    // s in the chunk before t's
	regionFar                          // s two chunks or more before t's
	regionCrossSeq                     // s < t in another sequence: must be 0
	regionUpper                        // s > t: must be 0
	regionInit                         // the initial state's map: y_t's response to h0[n]
	regionStateInChunk                 // the final state's response to x_s in its sequence's last chunk
	regionStatePassed                  // the final state's response to x_s of an earlier chunk
	regionStateCross                   // a sequence's final state's response to another's x: must be 0
	regionStateInit                    // the final state's response to h0
	regionInitPrev                     // y_t's response to the previous input of Mamba-3's initial state
	numRegions
)

// opKind is what an entry maps from and to; a relation holds for kinds.
type opKind uint8

const (
	kindXY        opKind = 1 << iota // x_s → y_t
	kindInitY                        // h0[n] → y_t
	kindXState                       // x_s → the final state (t its sequence's last step)
	kindInitState                    // h0[n] → the final state
	kindAll       = kindXY | kindInitY | kindXState | kindInitState
)

func (r opRegion) kind() opKind {
	switch r {
	case regionInit, regionInitPrev:
		return kindInitY
	case regionStateInChunk, regionStatePassed, regionStateCross:
		return kindXState
	case regionStateInit:
		return kindInitState
	}
	return kindXY
}

// mustBeZero reports whether the region's entries are zero in every
// right kernel: across a sequence boundary, above the diagonal.
func (r opRegion) mustBeZero() bool {
	return r == regionCrossSeq || r == regionUpper || r == regionStateCross
}

// predictsNonzero reports whether rel predicts a nonzero entry in es.
func predictsNonzero(op *operator, rel opRelation, es []opEntry) bool {
	for _, e := range es {
		if v := rel.predict(op, e); v != 0 && !math.IsNaN(v) {
			return true
		}
	}
	return false
}

// fromInit reports whether the region's entries answer the initial state
// (their s is a state index, not a step).
func (r opRegion) fromInit() bool { return r.kind()&(kindInitY|kindInitState) != 0 }

var regionNames = [numRegions]string{"diagonal", "in-chunk", "next-chunk", "far", "cross-sequence", "upper", "initial-state",
	"state-in-chunk", "state-passed", "state-cross-sequence", "state-initial", "initial-previous-input"}

var regionWords = [numRegions]string{
	"the diagonal (a token's own term)", "the chunk's own quadratic form (within a chunk)", "the state passed across one chunk boundary",
	"the states passed across several chunk boundaries", "the entries across a sequence boundary (which must be zero)",
	"the entries above the diagonal (which must be zero)", "the initial state's contribution",
	"the final state's response to its last chunk's input", "the final state's response to earlier chunks' input (the states passed on)",
	"a sequence's final state's response to another's input or initial state (which must be zero)",
	"the final state's response to the initial state",
	"the initial state's previous input's term (β·k_prev⊗v_prev of a sequence's first step)",
}

// opEntry is one entry of the operator: y[b, t, h, p]'s response to a unit
// x[b, s, h, p] (for the initial-state map, to a unit h0[b, h, p, s]).
type opEntry struct {
	b, h, p, t, s int
	n             int // the state's index, for the final state's maps
	// prev marks an entry of the previous input's probe (Mamba-3's
	// state: v_prev), whose s is 0
	prev      bool
	region    opRegion
	got, want float64
	// skip is want's part from the skip path, gate·D on the diagonal (0
	// elsewhere): a relation of the state-space paths leaves it alone
	skip        float64
	scale, tiny float64
	ratio       float64
}

// operator is a kernel's operator beside the reference's, with the
// per-step quantities its relations are written in.
type operator struct {
	fam     opFamily
	entries []opEntry
	// the probed problem's sizes and what its arithmetic is judged in
	batch, seqlen, heads, chunk int
	// every step's chunk (numbered along the row), its first and last
	// step: chunks along the row (Mamba-2's kernels) or from each
	// sequence's start (Mamba-3's)
	chunkID, chunkStart, chunkLast []int
	dtype                          ssm.DType
	hasD                           bool
	// per row and head (index b·heads + h): Δ_t, Δ_t·A, the sequence's
	// cumulative Δ·A through t, the chunk's through t and the row's, and
	// each step's sequence
	delta, dA, cum, chunkCum, cumAll [][]float64
	seqOf                            []int
	calls                            int
	// offset is what the kernel gives for x = 0 and no initial state,
	// where the reference gives 0: a term outside the linear map (nil
	// where there is none); offsetFailing counts its failing elements
	offset        []float64
	offsetFailing int
}

// opFamily is what a family adds to the operator: the relations of its
// formula, tried beside the common ones, and the factors of an entry.
type opFamily interface {
	// relations are the family's own, tried before the keyed ones
	relations() []opRelation
	// gate is the output gate's factor of entry e (1 without one)
	gate(op *operator, e opEntry) float64
	// skipD is the skip term D·amp of a diagonal entry before the gate
	skipD(op *operator, e opEntry) float64
}

// opArray is one output of a probe's call: the kernel's values, the
// reference's, their error scale and the judged ratios.
type opArray struct{ got, want, scale, tiny, ratio []float64 }

// opResponse is a call's y and the states of its sequences, laid out
// [sequence][head][P][N] (row b's where the problem does not pack).
type opResponse struct{ y, states opArray }

// opProbe is how a family's problem takes impulses: its sizes, and call,
// which runs the kernel and the reference with x (and the initial SSM
// states, and the previous input of Mamba-3's state: nil for none) in
// place of the problem's own.
type opProbe struct {
	B, L, H, P, N int
	seqs          [][2]int // every row's sequences, [start, end)
	packed        bool     // the states are per sequence (else per row)
	// initRows is the count of initial states ([initRows][H][P][N]: 0
	// without them); initEverySeq says every sequence starts from its
	// own (else only a row's first does)
	initRows     int
	initEverySeq bool
	// prevLen is the length of the previous input's state ([S][H][P]),
	// 0 where the family has none
	prevLen int
	amp     float64
	call    func(x, init, prev []float64) (opResponse, error)
}

// measure fills op's entries by impulses: call k sets x[b, s, h, p] = amp
// for s = k·P + p, so that the P channels of every head and row probe P
// columns at once (⌈L/P⌉ calls); the initial states' map likewise
// (⌈N/P⌉ calls) and the previous input's (one call).
func (op *operator) measure(pr opProbe) error {
	B, L, H, P, N := pr.B, pr.L, pr.H, pr.P, pr.N
	xLen := B * L * H * P
	// x = 0, no initial state: y must be 0; what is not is a term the
	// operator does not hold, and the finding (it is in every entry)
	zero, err := pr.call(make([]float64, xLen), nil, nil)
	if err != nil {
		return err
	}
	op.calls++
	th := judge.Threshold(op.dtype)
	for i, rt := range zero.y.ratio {
		// a NaN there is the operator's (0·NaN): not an offset
		if !(rt <= th) && finite(zero.y.got[i]) {
			op.offsetFailing++
		}
	}
	if op.offsetFailing > 0 {
		op.offset = zero.y.got
	}
	// every call's entries, counted first: a long probe holds millions,
	// and growing the slice call by call copies them over and over
	// (each column of a head's channel gives L outputs and N of each
	// sequence's final state in every row: L columns of x, N of the
	// initial states, P of the previous input)
	perColumn := B * H * (L + len(pr.seqs)*N)
	want := L * perColumn
	if pr.initRows > 0 {
		want += N * perColumn
	}
	if pr.prevLen > 0 {
		want += P * perColumn
	}
	op.entries = slices.Grow(op.entries[:0], want)
	const (
		fromX = iota
		fromInit
		fromPrev
	)
	// probe runs call k of one kind: channel pp of every row and head
	// gets an impulse at column s = k·P + pp (of x, or a state index of
	// the initial state); the previous input's probe sets them all
	probe := func(k, from int) error {
		cols := L
		x, init, prev := make([]float64, xLen), []float64(nil), []float64(nil)
		rows := B
		at := func(b, h, pp, s int) int { return ((b*L+s)*H+h)*P + pp }
		impulses := x
		switch from {
		case fromInit:
			cols, rows, init = N, pr.initRows, make([]float64, pr.initRows*H*P*N)
			at = func(r, h, pp, n int) int { return ((r*H+h)*P+pp)*N + n }
			impulses = init
		case fromPrev:
			cols, prev = 1, make([]float64, pr.prevLen)
			rows = pr.prevLen / (H * P)
			at = func(r, h, pp, _ int) int { return (r*H+h)*P + pp }
			impulses = prev
		}
		for r := 0; r < rows; r++ {
			for h := 0; h < H; h++ {
				for pp := 0; pp < P; pp++ {
					if s := k*P + pp; s < cols || from == fromPrev {
						impulses[at(r, h, pp, s)] = pr.amp
					}
				}
			}
		}
		res, err := pr.call(x, init, prev)
		if err != nil {
			return err
		}
		op.calls++
		y, st := res.y, res.states
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				for pp := 0; pp < P; pp++ {
					s := k*P + pp
					if from == fromPrev {
						s = 0
					}
					if s >= cols {
						continue
					}
					for t := 0; t < L; t++ {
						i := ((b*L+t)*H+h)*P + pp
						e := opEntry{b: b, h: h, p: pp, t: t, s: s, region: regionInit, prev: from == fromPrev,
							got: y.got[i], want: y.want[i], scale: y.scale[i], tiny: y.tiny[i], ratio: y.ratio[i]}
						switch from {
						case fromX:
							e.region = op.regionOf(t, s)
						case fromPrev:
							e.region = regionInitPrev
						}
						if e.region == regionDiagonal && op.hasD {
							e.skip = op.skip(e)
						}
						op.entries = append(op.entries, e)
					}
					// the final states: each sequence's where the row packs
					// several, else the row's
					for si, sq := range pr.seqs {
						r := b
						if pr.packed {
							r = si
						}
						k0 := ((r*H+h)*P + pp) * N
						for n := 0; n < N; n++ {
							e := opEntry{b: b, h: h, p: pp, t: sq[1] - 1, s: s, n: n, prev: from == fromPrev,
								got: st.got[k0+n], want: st.want[k0+n], scale: st.scale[k0+n], tiny: st.tiny[k0+n], ratio: st.ratio[k0+n]}
							switch {
							case from != fromX && (si == 0 || pr.initEverySeq):
								e.region = regionStateInit
							case from != fromX:
								e.region = regionStateCross // a later sequence starts from zero
							case s < sq[0] || s >= sq[1]:
								e.region = regionStateCross
							case op.chunk > 0 && op.chunkID[s] == op.chunkID[sq[1]-1]:
								e.region = regionStateInChunk
							default:
								e.region = regionStatePassed
							}
							op.entries = append(op.entries, e)
						}
					}
				}
			}
		}
		return nil
	}
	for k := 0; k*P < L; k++ {
		if err := probe(k, fromX); err != nil {
			return err
		}
	}
	if pr.initRows > 0 {
		for k := 0; k*P < N; k++ {
			if err := probe(k, fromInit); err != nil {
				return err
			}
		}
	}
	if pr.prevLen > 0 {
		if err := probe(0, fromPrev); err != nil {
			return err
		}
	}
	return nil
}

// skip is entry e's part from the skip path, gate·D·amp on the diagonal.
func (op *operator) skip(e opEntry) float64 { return op.fam.skipD(op, e) * op.fam.gate(op, e) }

// setChunks numbers the steps' chunks of op.chunk steps, along the row or
// from each sequence's start (seqAligned); op.seqOf must be set.
func (op *operator) setChunks(seqAligned bool) {
	L, Q := op.seqlen, max(op.chunk, 1)
	if op.chunk == 0 {
		Q = L
	}
	op.chunkID, op.chunkStart, op.chunkLast = make([]int, L), make([]int, L), make([]int, L)
	id, start := -1, 0
	for t := 0; t < L; t++ {
		newSeq := t == 0 || op.seqOf[t] != op.seqOf[t-1]
		if seqAligned && newSeq {
			start = t
		}
		if !seqAligned {
			start = 0
		}
		if (t-start)%Q == 0 || (seqAligned && newSeq) {
			id++
		}
		op.chunkID[t], op.chunkStart[t] = id, t-(t-start)%Q
	}
	for t := L - 1; t >= 0; t-- {
		op.chunkLast[t] = t
		if t+1 < L && op.chunkID[t+1] == op.chunkID[t] {
			op.chunkLast[t] = op.chunkLast[t+1]
		}
	}
}

// accumulate sets the cumulative sums of op.dA: within each sequence,
// within each chunk, and along the row.
func (op *operator) accumulate() {
	for bh := range op.dA {
		L := op.seqlen
		c, cc, ca := make([]float64, L), make([]float64, L), make([]float64, L)
		var cum, ccum, call float64
		for t := 0; t < L; t++ {
			if t > 0 && op.seqOf[t] != op.seqOf[t-1] {
				cum = 0
			}
			if op.chunk > 0 && op.chunkStart[t] == t {
				ccum = 0
			}
			a := op.dA[bh][t]
			cum += a
			ccum += a
			call += a
			c[t], cc[t], ca[t] = cum, ccum, call
		}
		op.cum, op.chunkCum, op.cumAll = append(op.cum, c), append(op.chunkCum, cc), append(op.cumAll, ca)
	}
}

func (op *operator) regionOf(t, s int) opRegion {
	switch {
	case s > t:
		return regionUpper
	case op.seqOf[s] != op.seqOf[t]:
		return regionCrossSeq
	case s == t:
		return regionDiagonal
	case op.chunk == 0 || op.chunkID[t] == op.chunkID[s]:
		return regionInChunk
	case op.chunkID[t] == op.chunkID[s]+1:
		return regionNextChunk
	}
	return regionFar
}

// opRelation is a hypothesis about how the kernel's entries relate to the
// reference's: factor gives the kernel's entry as factor·(reference's)
// (nil where it is not a factor: predict gives it), fit fits its constant
// on the failing entries first (nil: none).
type opRelation struct {
	tag, words string
	factor     func(op *operator, e opEntry) float64
	// predict, for a relation that is not a factor, gives the kernel's
	// entry itself, with the scale of the reference's entry it stands for
	predict func(op *operator, e opEntry) float64
	// predictC is predict for a fitted relation, of its constant c
	predictC func(op *operator, e opEntry, c float64) float64
	fit      func(op *operator, es []opEntry) (c float64, ok bool)
	c        float64 // the fitted constant
	// factorC is factor for a fitted relation, of its constant c
	factorC func(op *operator, e opEntry, c float64) float64
	// constName, where set, says the fitted constant in words (else
	// constantName)
	constName func(c float64) string
	// key, for a relation whose factor is fitted per output row (or per
	// input column), groups the entries that share one factor
	key    func(e opEntry) [5]int
	keyFit map[[5]int]float64
	// kinds are the maps the relation is one of (0: x_s → y_t and
	// x_s → the final state)
	kinds opKind
	// whole: the factor scales the whole entry, D's skip term too (a slip
	// after the skip is added: the output's sign, its store)
	whole bool
}

func (rel opRelation) of(k opKind) bool {
	ks := rel.kinds
	if ks == 0 {
		ks = kindXY | kindXState
	}
	return ks&k != 0
}

// opRelations are the relations tried, simplest first: the common ones,
// the family's, then the factors fitted per row or column (which, free
// per key, would also fit what a family's relation names).
func (op *operator) opRelations() []opRelation {
	bh := func(op *operator, e opEntry) int { return e.b*op.heads + e.h }
	dA := func(op *operator, e opEntry, t int) float64 {
		if t < 0 || t >= op.seqlen {
			return math.NaN()
		}
		return op.dA[bh(op, e)][t]
	}
	head := []opRelation{
		{tag: "zero", words: "is zero (the path is missing)", factor: func(*operator, opEntry) float64 { return 0 }, kinds: kindAll},
		{tag: "times", words: "is %s × the reference's", fit: fitFactor, factorC: func(_ *operator, _ opEntry, c float64) float64 { return c }, kinds: kindAll},
		{tag: "times-with-D", words: "is %s × the reference's, D's skip term included (a slip after the skip is added)", fit: fitFactorWhole, factorC: func(_ *operator, _ opEntry, c float64) float64 { return c }, kinds: kindXY | kindInitY, whole: true},
	}
	mid := []opRelation{
		{tag: "no-D", words: "lacks the skip term D·x", predict: func(op *operator, e opEntry) float64 {
			if e.region != regionDiagonal || !op.hasD {
				return math.NaN()
			}
			return e.want - e.skip
		}, kinds: kindXY},
		{tag: "D-twice", words: "has the skip term D·x twice", predict: func(op *operator, e opEntry) float64 {
			if e.region != regionDiagonal || !op.hasD {
				return math.NaN()
			}
			return e.want + e.skip
		}, kinds: kindXY},
		{tag: "decay-from(s-1)", words: "decays from step s−1: an extra e^{Δ_s·A} (a cumulative sum off by one at the input)", factor: func(op *operator, e opEntry) float64 { return math.Exp(dA(op, e, e.s)) }},
		{tag: "decay-from(s+1)", words: "decays from step s+1: e^{Δ_{s+1}·A} missing (a cumulative sum off by one at the input)", factor: func(op *operator, e opEntry) float64 { return math.Exp(-dA(op, e, e.s+1)) }},
		{tag: "decay-to(t-1)", words: "decays only to step t−1: e^{Δ_t·A} missing (a cumulative sum off by one at the output)", factor: func(op *operator, e opEntry) float64 { return math.Exp(-dA(op, e, e.t)) }, kinds: kindAll},
		{tag: "decay-to(t+1)", words: "decays to step t+1: an extra e^{Δ_{t+1}·A}", factor: func(op *operator, e opEntry) float64 { return math.Exp(dA(op, e, e.t+1)) }, kinds: kindXY | kindInitY},
		{tag: "exclusive-cumsum", words: "decays by e^{cum_{t−1} − cum_{s−1}}: an exclusive cumulative sum where an inclusive one is meant", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(dA(op, e, e.s) - dA(op, e, e.t))
		}},
		{tag: "undecayed-entering-state", words: "lacks the decay e^{cum_t − cum_{chunk start}} of the state entering t's chunk", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(-op.chunkCum[bh(op, e)][e.t])
		}, kinds: kindAll},
		{tag: "entering-state-decayed-twice", words: "has the entering state's decay e^{cum_t − cum_{chunk start}} twice", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(op.chunkCum[bh(op, e)][e.t])
		}, kinds: kindAll},
		{tag: "undecayed-chunk-state", words: "lacks the decay from s to the end of its chunk (the chunk's state formed without e^{cum_last − cum_s})", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(-(op.chunkEnd(e) - op.cum[bh(op, e)][e.s]))
		}},
		{tag: "chunk-state-decayed-twice", words: "has the decay from s to the end of its chunk twice", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(op.chunkEnd(e) - op.cum[bh(op, e)][e.s])
		}},
		{tag: "passed-state-decayed-twice", words: "decays twice through the chunks between s's and t's (the state passed on decayed twice)", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(op.between(e))
		}, kinds: kindAll},
		{tag: "passed-state-undecayed", words: "is not decayed through the chunks between s's and t's (the state passed on without its decay)", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(-op.between(e))
		}, kinds: kindAll},
		{tag: "undecayed-initial-state", words: "lacks the initial state's decay e^{cum_t}", factor: func(op *operator, e opEntry) float64 {
			return math.Exp(-op.cum[bh(op, e)][e.t])
		}, kinds: kindInitY | kindInitState},
		{tag: "exp-scaled", words: "has its exponent cum_t − cum_s scaled by %s", fit: fitExponent, factorC: func(op *operator, e opEntry, c float64) float64 {
			return math.Exp((c - 1) * op.span(e))
		}, kinds: kindAll},
	}
	keyed := []opRelation{
		{tag: "row-factor", words: "is scaled by a factor of the output's step and channel alone (the gate, the output's scaling or its store: %s)",
			key: func(e opEntry) [5]int { return [5]int{e.b, e.h, e.p, e.t, int(e.region.kind())} }, kinds: kindXY | kindInitY},
		{tag: "column-factor", words: "is scaled by a factor of the input's step and channel alone (x or Δ_s read wrongly: %s)",
			key: func(e opEntry) [5]int { return [5]int{e.b, e.h, e.p, e.s, int(e.region.kind())} }, kinds: kindXY | kindXState},
	}
	own := op.fam.relations()
	if _, ok := op.fam.(*ssdFamily); ok {
		// Mamba-2's order, in which its population was measured: the Δ_s
		// and Δ_t factors after the simplest, B and C swapped and the
		// reset last
		return concat(head, own[:4], mid, keyed, own[4:])
	}
	return concat(head, mid, own, keyed)
}

func concat(lists ...[]opRelation) []opRelation {
	var out []opRelation
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// span is the exponent of entry e's decay, cum_t − cum_s.
func (op *operator) span(e opEntry) float64 {
	bh := e.b*op.heads + e.h
	if e.region.fromInit() {
		return op.cum[bh][e.t]
	}
	return op.cum[bh][e.t] - op.cum[bh][e.s]
}

// between is the cumulative Δ·A of the whole chunks between entry e's
// input (for the initial state's map: the sequence's start) and its
// output's chunk.
func (op *operator) between(e opEntry) float64 {
	if op.chunk == 0 {
		return 0
	}
	bh := e.b*op.heads + e.h
	c0 := op.chunkStart[e.t]
	if e.region.fromInit() {
		if c0 == 0 || op.seqOf[c0-1] != op.seqOf[e.t] {
			return 0 // t's chunk is its sequence's first
		}
		return op.cum[bh][c0-1]
	}
	if c0 == 0 || c0-1 < e.s {
		return 0
	}
	return op.cum[bh][c0-1] - op.chunkEnd(e)
}

// chunkEnd is the sequence's cumulative Δ·A at the last step of s's chunk.
func (op *operator) chunkEnd(e opEntry) float64 {
	last := op.seqlen - 1
	if op.chunk > 0 {
		last = op.chunkLast[e.s]
	}
	for last > e.s && op.seqOf[last] != op.seqOf[e.s] {
		last--
	}
	return op.cum[e.b*op.heads+e.h][last]
}

// fitFactor is the least-squares constant k with got ≈ k·want on the
// state-space part of the entries (D's skip term left alone).
func fitFactor(_ *operator, es []opEntry) (float64, bool) { return leastSquares(es, false) }

// fitFactorWhole is fitFactor on the whole entries, D's term included.
func fitFactorWhole(_ *operator, es []opEntry) (float64, bool) { return leastSquares(es, true) }

func leastSquares(es []opEntry, whole bool) (float64, bool) {
	var gw, ww float64
	for _, e := range es {
		g, w := e.got-e.skip, e.want-e.skip
		if whole {
			g, w = e.got, e.want
		}
		gw += g * w
		ww += w * w
	}
	if ww == 0 || math.IsNaN(gw) || math.IsInf(gw, 0) {
		return 0, false
	}
	return niceConstant(gw / ww), true
}

// fitExponent is the constant c with got ≈ want·e^{(c−1)(cum_t − cum_s)},
// by least squares on log(got/want) over entries of one sign.
func fitExponent(op *operator, es []opEntry) (float64, bool) {
	var xy, xx float64
	for _, e := range es {
		g, w := e.got-e.skip, e.want-e.skip
		if w == 0 || g/w <= 0 {
			continue
		}
		x := op.span(e)
		y := math.Log(g / w)
		xy += x * y
		xx += x * x
	}
	if xx == 0 || math.IsNaN(xy) || math.IsInf(xy, 0) {
		return 0, false
	}
	return niceConstant(1 + xy/xx), true
}

// fitKeyed fits one factor k per key by least squares, got ≈ k·want on
// the state-space part of the entries that share the key.
func fitKeyed(es []opEntry, key func(opEntry) [5]int) map[[5]int]float64 {
	gw, ww := map[[5]int]float64{}, map[[5]int]float64{}
	for _, e := range es {
		k := key(e)
		g, w := e.got-e.skip, e.want-e.skip
		gw[k] += g * w
		ww[k] += w * w
	}
	out := map[[5]int]float64{}
	for k, w := range ww {
		if w > 0 && !math.IsNaN(gw[k]) && !math.IsInf(gw[k], 0) {
			out[k] = gw[k] / w
		}
	}
	return out
}

// keyedRange says the fitted factors' range, for a keyed relation's words.
func keyedRange(m map[[5]int]float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range m {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return fmt.Sprintf("factors from %.4g to %.4g over %d", lo, hi, len(m))
}

// niceConstant rounds c to a constant a slip makes (±2^k, ±3, 1/3, log2 e,
// ln 2) where it is within 1% (the relation is then judged with the
// rounded constant, entry by entry, so a wrong rounding cannot hold).
func niceConstant(c float64) float64 {
	cands := []float64{math.Log2E, math.Ln2, 3, 1.0 / 3, -3, -1.0 / 3}
	for k := -3; k <= 3; k++ {
		cands = append(cands, math.Ldexp(1, k), -math.Ldexp(1, k))
	}
	for _, v := range cands {
		if math.Abs(c-v) <= 1e-2*math.Abs(v) {
			return v
		}
	}
	return c
}

func constantName(c float64) string {
	switch c {
	case math.Log2E:
		return "log2 e (e^x evaluated as 2^x)"
	case math.Ln2:
		return "ln 2 (2^x evaluated as e^x)"
	}
	return fmt.Sprintf("%.6g", c)
}

// opRatios judges the entries against rel: the kernel's entry against
// factor·(reference's), the error scale scaled by the factor's magnitude
// (a relation that holds holds within the error model). NaN where the
// relation has no value for an entry.
func (op *operator) opRatios(rel opRelation, es []opEntry) []float64 {
	got, want, scale, tiny := make([]float64, len(es)), make([]float64, len(es)), make([]float64, len(es)), make([]float64, len(es))
	for i, e := range es {
		got[i], tiny[i] = e.got, e.tiny
		switch {
		case rel.predict != nil:
			want[i], scale[i] = rel.predict(op, e), e.scale
			continue
		case rel.predictC != nil:
			want[i], scale[i] = rel.predictC(op, e, rel.c), e.scale
			continue
		}
		var f float64
		switch {
		case rel.factor != nil:
			f = rel.factor(op, e)
		case rel.key != nil:
			var ok bool
			if f, ok = rel.keyFit[rel.key(e)]; !ok {
				f = math.NaN()
			}
		default:
			f = rel.factorC(op, e, rel.c)
		}
		want[i], scale[i] = f*(e.want-e.skip)+e.skip, e.scale*math.Max(math.Abs(f), 1)
		if rel.whole {
			want[i] = f * e.want
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			want[i] = math.NaN()
		}
	}
	return op.judgeEntries(es, got, want, scale, tiny)
}

// judgeEntries is the ratio of each entry's got to want within scale, in
// the arithmetic the operator's problem is judged in; NaN where want is.
func (op *operator) judgeEntries(es []opEntry, got, want, scale, tiny []float64) []float64 {
	stored, computed := op.dtype, op.dtype
	if computed.Narrow() {
		computed = ssm.F32
	}
	_, ratios, err := judge.CompareArrays([]judge.Array{{Name: "M", Got: got, Want: want, Scale: scale, Tiny: tiny, Stored: stored, Computed: computed,
		Index: func(i int) []int { return []int{es[i].t, es[i].s} }}})
	if err != nil {
		return nil
	}
	for i := range es {
		if math.IsNaN(want[i]) {
			ratios["M"][i] = math.NaN()
		}
	}
	return ratios["M"]
}

// agreement counts the entries where the kernel's operator differs from
// the reference's (failing) and, of those, the ones other gives within
// the error model (held): other is an operator measured by the same
// impulses on the same problem (a slip's variant of the reference), its
// entries' error scales its own (a slip that multiplies a term by 1/Δ
// multiplies its rounding too), the larger of the two taken. An operator
// measured on other entries agrees nowhere.
func (op *operator) agreement(other *operator, th float64) (held, failing int) {
	var es []opEntry
	var got, want, scale, tiny []float64
	aligned := len(other.entries) == len(op.entries)
	for i, e := range op.entries {
		if e.ratio <= th {
			continue
		}
		failing++
		if !aligned {
			continue
		}
		o := other.entries[i]
		if o.b != e.b || o.h != e.h || o.p != e.p || o.t != e.t || o.s != e.s || o.n != e.n || o.prev != e.prev {
			aligned = false
			continue
		}
		es = append(es, e)
		got, want, scale, tiny = append(got, e.got), append(want, o.got), append(scale, math.Max(e.scale, o.scale)), append(tiny, math.Max(e.tiny, o.tiny))
	}
	if !aligned || len(es) == 0 {
		return 0, failing
	}
	for _, r := range op.judgeEntries(es, got, want, scale, tiny) {
		if r <= th {
			held++
		}
	}
	return held, failing
}

// opFit is a relation found on a set of regions.
type opFit struct {
	rel     opRelation
	regions []opRegion
	held    int // entries of those regions within the threshold under rel
	total   int
	worst   float64
}

// holds reports whether the relation holds on all but 1% of the entries
// (the rest: rounding at the edges of the range, where a factor is huge).
func (f opFit) holds() bool { return f.total > 0 && 100*f.held >= 99*f.total }

// diagnose relates the kernel's operator to the reference's: the regions
// that fail, and the one relation that holds on all of them (else on the
// most), with its evidence. ok is false when the operator is right
// everywhere (the failure is not in the map from x and h0 to y).
func (op *operator) diagnose(th float64) (f report.Finding, ok bool) {
	byRegion := make([][]opEntry, numRegions)
	failing := make([]int, numRegions)
	var count [numRegions]int
	for _, e := range op.entries {
		count[e.region]++
	}
	for r := range byRegion {
		byRegion[r] = make([]opEntry, 0, count[r])
	}
	for _, e := range op.entries {
		byRegion[e.region] = append(byRegion[e.region], e)
		if !(e.ratio <= th) {
			failing[e.region]++
		}
	}
	var bad []opRegion
	var where []string
	for r := opRegion(0); r < numRegions; r++ {
		if failing[r] > 0 {
			bad = append(bad, r)
			where = append(where, fmt.Sprintf("%s %d of %d", regionNames[r], failing[r], len(byRegion[r])))
		}
	}
	if op.offset != nil {
		f.Tag = "op:offset"
		f.Cause = "the output has a term that neither x nor the initial state multiplies: y ≠ 0 for x = 0 and h0 = 0 (a constant added, or a skip or bias term without its input)"
		f.Where = fmt.Sprintf("the kernel's operator (%d calls, impulses): y for x = 0: %d of %d elements nonzero", op.calls, op.offsetFailing, len(op.offset))
		return f, true
	}
	if len(bad) == 0 {
		return report.Finding{}, false
	}
	f.Where = "the kernel's operator (" + fmt.Sprintf("%d calls, impulses", op.calls) + "): " + strings.Join(where, ", ")
	// the entries a region set is judged on (its regions' samples) and
	// the failing ones among them: the same for every relation tried
	type judged struct{ es, failed []opEntry }
	sample := make([]judged, 1+len(bad))
	entriesOf := func(k int, regions []opRegion) judged {
		if sample[k].es != nil {
			return sample[k]
		}
		var j judged
		for _, r := range regions {
			j.es = append(j.es, sampled(byRegion[r], th)...)
		}
		for _, e := range j.es {
			if !(e.ratio <= th) {
				j.failed = append(j.failed, e)
			}
		}
		if j.es == nil {
			j.es = []opEntry{}
		}
		sample[k] = j
		return j
	}
	evaluate := func(rel opRelation, k int, regions []opRegion) opFit {
		for _, r := range regions {
			if !rel.of(r.kind()) {
				return opFit{rel: rel, regions: regions}
			}
			// a region that must be zero is explained only by a relation
			// that predicts what it holds instead (a factor of zero is
			// zero, whatever the relation)
			if r.mustBeZero() && (rel.predict == nil || !predictsNonzero(op, rel, byRegion[r])) {
				return opFit{rel: rel, regions: regions}
			}
		}
		j := entriesOf(k, regions)
		es, failed := j.es, j.failed
		if rel.fit != nil {
			c, ok := rel.fit(op, failed)
			if !ok {
				return opFit{rel: rel, regions: regions}
			}
			rel.c = c
		}
		if rel.key != nil {
			// a factor per row is a fit only where a row has entries to
			// spare: on the diagonal alone it would fit anything
			if rel.keyFit = fitKeyed(es, rel.key); len(es) < 8*len(rel.keyFit) {
				return opFit{rel: rel, regions: regions}
			}
		}
		fit := opFit{rel: rel, regions: regions, total: len(es)}
		for _, r := range op.opRatios(rel, es) {
			if r <= th {
				fit.held++
			}
			if !math.IsNaN(r) {
				fit.worst = math.Max(fit.worst, r)
			}
		}
		return fit
	}
	// the regions a relation is tried on: every failing one together,
	// then each on its own (a slip of one path beside a second fault)
	var best opFit
search:
	for k, regions := range append([][]opRegion{bad}, singles(bad)...) {
		for _, rel := range op.opRelations() {
			fit := evaluate(rel, k, regions)
			if fit.holds() && (!best.holds() || covered(fit, failing) > covered(best, failing)) {
				best = fit
				if k == 0 {
					break search // one relation for every failing region: the simplest
				}
			}
		}
	}
	if !best.holds() {
		// entries that are not numbers: a NaN spreads along its output's
		// row (0·NaN in the probe's sums), so where it starts is the finding
		if r, t0, ok := op.nonFinite(); ok {
			f.Tag = "op:" + regionNames[r] + ":non-finite"
			f.Cause = "the kernel's operator is not finite (NaN or ±Inf) where the reference's is, from " + regionWords[r] +
				" on: an overflow, a division by a value the probe makes zero, or a masked entry's −∞ decay used"
			if t0 >= 0 {
				f.Where += fmt.Sprintf("; the first non-finite output at step %d", t0)
			}
			return f, true
		}
		f.Tag = "op:" + joinRegions(bad) + ":unrelated"
		f.Cause = "the kernel's operator differs from the reference's " + regionList(bad) + " by no relation tried (a factor, an exponent scaled or shifted, B and C swapped, a path missing)"
		return f, true
	}
	words := best.rel.words
	switch {
	case strings.Contains(words, "%s") && best.rel.key != nil:
		words = fmt.Sprintf(words, keyedRange(best.rel.keyFit))
	case strings.Contains(words, "%s"):
		name := constantName(best.rel.c)
		if best.rel.constName != nil {
			name = best.rel.constName(best.rel.c)
		}
		words = fmt.Sprintf(words, name)
	}
	tag := best.rel.tag
	if best.rel.fit != nil {
		tag += fmt.Sprintf("(%.6g)", best.rel.c)
	}
	f.Tag = "op:" + joinRegions(best.regions) + ":" + tag
	f.Cause = "the kernel's operator (y_t's response to x_s) " + words + " " + regionList(best.regions)
	if len(best.regions) < len(bad) {
		var rest []opRegion
		for _, r := range bad {
			if !containsRegion(best.regions, r) {
				rest = append(rest, r)
			}
		}
		f.Cause += "; a second fault " + regionList(rest) + " that no relation tried describes"
	}
	right := rightRegions(byRegion, failing)
	if right != "" {
		f.Cause += "; right " + right
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("the relation holds on %d of %d entries of %s (worst ratio %.3g, threshold %g)",
		best.held, best.total, joinRegions(best.regions), best.worst, th))
	return f, true
}

// opSample bounds the entries of a region a relation is judged on: every
// failing entry, and of the others a stride through them, so that a
// region of a long problem (L² entries) costs what a short one does.
const opSample = 4096

func sampled(es []opEntry, th float64) []opEntry {
	if len(es) <= opSample {
		return es
	}
	stride := (len(es) + opSample - 1) / opSample
	out := make([]opEntry, 0, 2*opSample)
	for i, e := range es {
		if i%stride == 0 || !(e.ratio <= th) {
			out = append(out, e)
		}
	}
	return out
}

// nonFinite finds where the kernel's operator stops being finite: the
// first output step with a non-finite response to x (in the chunk's own
// quadratic form when it is not a chunk's first step or is the first
// chunk's, else the state passed on), else the initial state's map, else
// the final state's; t0 is that step (−1 where no output row is).
func (op *operator) nonFinite() (opRegion, int, bool) {
	t0, init, state := -1, false, opRegion(-1)
	for _, e := range op.entries {
		if finite(e.got) || !finite(e.want) {
			continue // only where the kernel is not finite and the reference is
		}
		switch k := e.region.kind(); {
		case k == kindXY && (t0 < 0 || e.t < t0):
			t0 = e.t
		case k == kindInitY:
			init = true
		case k&(kindXState|kindInitState) != 0 && state < 0:
			state = e.region
		}
	}
	switch {
	case t0 >= 0 && (op.chunk == 0 || op.chunkID[t0] == 0 || t0 != op.chunkStart[t0]):
		return regionInChunk, t0, true
	case t0 >= 0:
		return regionNextChunk, t0, true
	case init:
		return regionInit, -1, true
	case state >= 0:
		return state, -1, true
	}
	return 0, -1, false
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func singles(rs []opRegion) [][]opRegion {
	if len(rs) < 2 {
		return nil
	}
	var out [][]opRegion
	for _, r := range rs {
		out = append(out, []opRegion{r})
	}
	return out
}

func covered(f opFit, failing []int) int {
	n := 0
	for _, r := range f.regions {
		n += failing[r]
	}
	return n
}

func containsRegion(rs []opRegion, r opRegion) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func joinRegions(rs []opRegion) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = regionNames[r]
	}
	return strings.Join(names, "+")
}

func regionList(rs []opRegion) string {
	words := make([]string, len(rs))
	for i, r := range rs {
		words[i] = regionWords[r]
	}
	return "in " + strings.Join(words, " and ")
}

// rightRegions names the probed regions where the kernel is right (those
// with entries that can be nonzero), so that a cause says what is not it.
func rightRegions(byRegion [][]opEntry, failing []int) string {
	var names []string
	for r := opRegion(0); r < numRegions; r++ {
		if r == regionCrossSeq || r == regionUpper || r == regionStateCross {
			continue
		}
		if len(byRegion[r]) > 0 && failing[r] == 0 {
			names = append(names, regionWords[r])
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
