package diagnose

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// The slices of a chunked layer's problem (Mamba-2's, Mamba-3's). The
// layer is a separate computation for every sequence and every head (B
// and C, or Q and K, shared by the heads of their group): the outputs of
// one sequence and head depend on that sequence's and head's inputs alone,
// and on nothing of its position in the batch. A kernel that indexes a
// slice wrong — an offset by the batch or head index negated, a stride
// dropped, a store the backward reads put at another head's place — breaks
// that, and shows it in ways its own runs measure, whatever the values it
// computes there:
//
//   - index: the failure stays at the same batch (head) indices when the
//     batches' order is reversed (the heads rotated by one group), where
//     the reference's results move with their data: the fault follows the
//     index, not the data;
//   - crossed: outputs of another slice change when one input of one
//     slice alone changes, where the reference's stay bit for bit (a
//     read or a write at another slice's offset);
//   - ignored: a slice's outputs do not follow a change of one of its own
//     inputs that moves the reference's beyond the error model (that input
//     is read at another offset);
//   - stale: run again on the same problem after a call on other data,
//     the results move: memory the call read and never wrote.
//
// The relation is a structural fact measured on the kernel, not a formula
// fitted: it says which index or input to look at, not what the kernel
// computes there. A family gives its problem as a sliceProblem (the
// layouts of its arrays, its inputs) and its kernel as a sliceProbe.

// sliceLayout is how an array of a problem (an input, an output or a
// gradient) is laid out.
type sliceLayout int

const (
	layTokenHead  sliceLayout = iota // [Batch][Seqlen][Heads][w]: x, V, z, y (Mamba-2's dt: w = 1)
	layTokenGroup                    // [Batch][Seqlen][Groups][w]: B and C, Q and K
	layHeadToken                     // [Batch][Heads][Seqlen]: Mamba-3's DT, ADT, Trap
	layHead                          // [Heads][w]: A, D, a bias
	laySeqHead                       // [sequences][Heads][w]: a state
)

// sliceCoord is an element's slice: its sequence (-1: the array has none,
// or a packed row's padding) and head (its group's index for
// layTokenGroup), and its token's position in its sequence (-1: none).
type sliceCoord struct{ seq, head, tok int }

// sliceDims are a problem's extents, to read its layouts with.
type sliceDims struct {
	batch, seqlen, heads, groups int
	seqOf, posOf                 []int // per batch row and token: the sequence (-1 padding), the position in it
	nSeq                         int
	packed                       bool
}

// newSliceDims has seqs the [row, start, end) of each sequence.
func newSliceDims(batch, seqlen, heads, groups int, seqs [][3]int, packed bool) *sliceDims {
	d := &sliceDims{batch: batch, seqlen: seqlen, heads: heads, groups: groups, packed: packed, nSeq: len(seqs)}
	d.seqOf, d.posOf = make([]int, batch*seqlen), make([]int, batch*seqlen)
	for i := range d.seqOf {
		d.seqOf[i], d.posOf[i] = -1, -1
	}
	for si, sq := range seqs {
		for t := sq[1]; t < sq[2] && sq[0]*seqlen+t < len(d.seqOf); t++ {
			d.seqOf[sq[0]*seqlen+t], d.posOf[sq[0]*seqlen+t] = si, t-sq[1]
		}
	}
	return d
}

// width is the innermost extent of an array of n elements in layout l.
func (d *sliceDims) width(l sliceLayout, n int) int {
	var m int
	switch l {
	case layTokenHead:
		m = d.batch * d.seqlen * d.heads
	case layTokenGroup:
		m = d.batch * d.seqlen * d.groups
	case layHeadToken:
		if n == d.batch*d.heads*d.seqlen {
			return 1
		}
		return 0
	case layHead:
		m = d.heads
	case laySeqHead:
		m = d.nSeq * d.heads
	}
	if m == 0 || n%m != 0 {
		return 0
	}
	return n / m
}

// coord is element i's slice in an array of n elements laid out as l.
func (d *sliceDims) coord(l sliceLayout, n, i int) sliceCoord {
	w := d.width(l, n)
	if w == 0 || len(d.seqOf) == 0 {
		return sliceCoord{-1, -1, -1}
	}
	switch l {
	case layTokenHead, layTokenGroup:
		hh := d.heads
		if l == layTokenGroup {
			hh = d.groups
		}
		row := (i / (w * hh)) % len(d.seqOf)
		return sliceCoord{d.seqOf[row], (i / w) % hh, d.posOf[row]}
	case layHeadToken:
		b, h, t := i/(d.heads*d.seqlen), (i/d.seqlen)%d.heads, i%d.seqlen
		row := (b*d.seqlen + t) % len(d.seqOf)
		return sliceCoord{d.seqOf[row], h, d.posOf[row]}
	case layHead:
		return sliceCoord{-1, i / w, -1}
	default:
		return sliceCoord{i / (w * d.heads), (i / w) % d.heads, -1}
	}
}

// own reports whether element c of an array in layout l belongs to the
// slice k of the axis that was changed in an input laid out as in: the
// sequence k, or on the head axis the head k (the group k for an input
// per group) — for an array per group, the group that head lies in; for
// an array per head, the heads of that group.
func (d *sliceDims) own(c sliceCoord, l sliceLayout, head bool, in sliceLayout, k int) bool {
	if !head {
		return c.seq == k
	}
	per := 1 // heads a group has
	if d.groups > 0 && d.heads%d.groups == 0 {
		per = d.heads / d.groups
	}
	switch {
	case l == layTokenGroup && in == layTokenGroup:
		return c.head == k
	case l == layTokenGroup:
		return c.head == k/per
	case in == layTokenGroup:
		return c.head/per == k
	}
	return c.head == k
}

// permuted returns x (layout l) with its batch rows, heads and groups
// moved as ax says (the new index of an old one).
func (d *sliceDims) permuted(x []float64, l sliceLayout, ax sliceAxis) []float64 {
	if x == nil {
		return nil
	}
	w := d.width(l, len(x))
	out := make([]float64, len(x))
	if w == 0 {
		copy(out, x)
		return out
	}
	L := d.seqlen
	for i, v := range x {
		var j int
		switch l {
		case layTokenHead, layTokenGroup:
			hh, hm := d.heads, ax.hmap
			if l == layTokenGroup {
				hh, hm = d.groups, ax.gmap
			}
			k, h, row := i%w, (i/w)%hh, i/(w*hh)
			b, t := row/L, row%L
			j = ((ax.bmap(b)*L+t)*hh+hm(h))*w + k
		case layHeadToken:
			b, h, t := i/(d.heads*L), (i/L)%d.heads, i%L
			j = (ax.bmap(b)*d.heads+ax.hmap(h))*L + t
		case layHead:
			j = ax.hmap(i/w)*w + i%w
		case laySeqHead:
			sq, h, k := i/(w*d.heads), (i/w)%d.heads, i%w
			j = (ax.bmap(sq)*d.heads+ax.hmap(h))*w + k
		}
		out[j] = v
	}
	return out
}

// sliceAxis is a permutation of a problem's slices along one axis.
type sliceAxis struct {
	name             string // "batch", "head"
	head             bool
	n                int
	bmap, hmap, gmap func(int) int
	how              string
}

// sliceInput is one input of a problem: its name in findings and tags,
// its layout, and a change of its values that keeps the problem valid.
type sliceInput struct {
	name   string
	layout sliceLayout
	change func(x float64) float64
}

// cotangentInput is one part of a backward's cotangent (the output's,
// a final state's) as an input of the probes: its values, and the
// cotangent with them replaced (rounded to the type the kernel reads).
type cotangentInput struct {
	in     sliceInput
	values []float64
	with   func(v []float64) any
}

// roundChanged is v with the elements that differ from was rounded to dt:
// a cotangent the suite did not round keeps its other slices bit for bit.
func roundChanged(dt ssm.DType, was, v []float64) []float64 {
	out := append([]float64(nil), v...)
	for i := range out {
		if i < len(was) && out[i] != was[i] {
			out[i] = dt.Round(out[i])
		}
	}
	return out
}

// sliceField is one input of a family's problem type P and where it
// lives there (nil: an absent part, Mamba-3's state without one).
type sliceField[P any] struct {
	in    sliceInput
	field func(p *P) *[]float64
}

// sliceFields are a family's inputs: its sliceProblem's inputs, input and
// with are read from them.
type sliceFields[P any] []sliceField[P]

func (fs sliceFields[P]) inputs() []sliceInput {
	out := make([]sliceInput, len(fs))
	for i, f := range fs {
		out[i] = f.in
	}
	return out
}

// layout is the named input's layout.
func (fs sliceFields[P]) layout(name string) (sliceLayout, bool) {
	for _, f := range fs {
		if f.in.name == name {
			return f.in.layout, true
		}
	}
	return 0, false
}

// get is the named input's values in p (nil: absent).
func (fs sliceFields[P]) get(p *P, name string) []float64 {
	for _, f := range fs {
		if f.in.name == name {
			if v := f.field(p); v != nil {
				return *v
			}
		}
	}
	return nil
}

// replace puts into q the inputs x names, each rounded to what the kernel
// reads (round: the family's rounding of a whole problem), the other
// inputs as they were.
func (fs sliceFields[P]) replace(q *P, x map[string][]float64, round func(*P) *P) {
	for _, f := range fs {
		if v, ok := x[f.in.name]; ok {
			if fp := f.field(q); fp != nil {
				*fp = v
			}
		}
	}
	r := round(q)
	for _, f := range fs {
		if _, ok := x[f.in.name]; ok {
			if fp := f.field(q); fp != nil {
				*fp = *f.field(r)
			}
		}
	}
}

var (
	flipped = func(x float64) float64 { return 0.5 - x }
	grown   = func(x float64) float64 { return 1.5 * x }
)

// sliceProblem is a family's problem as its slices see it.
type sliceProblem interface {
	dims() *sliceDims
	// layoutOf is the layout of a named array: an input, an output, a
	// gradient.
	layoutOf(name string) (sliceLayout, bool)
	inputs() []sliceInput
	// input is the named input's values (nil: absent).
	input(name string) []float64
	// with is a copy with the inputs x names replaced, each rounded to
	// what the kernel reads.
	with(x map[string][]float64) sliceProblem
	// permutedCotangent is a backward's cotangent (nil for a forward)
	// with its slices moved as ax moves the problem's.
	permutedCotangent(ct any, ax sliceAxis) any
	// cotangentInputs are a backward's cotangent's parts as inputs of
	// the probes (none for a forward): a read of another slice's
	// cotangent crosses slices as a read of its input does.
	cotangentInputs(ct any) []cotangentInput
	threshold() float64
}

// sliceProbe runs the kernel on a problem (and a cotangent, for a
// backward) and returns what it gave as arrays judged against the
// reference: Got the kernel's, Want and Scale the reference's and its
// error model's.
type sliceProbe func(q sliceProblem, ct any) ([]judge.Array, error)

// sliceFinding is what measureSlices found: the axis and relation
// ("batch-index", "head-crossed", …), the input it involves ("" for an
// index or stale relation), the arrays it shows in, and what was
// measured.
type sliceFinding struct {
	axis, relation, input string
	arrays                []string
	cause                 string
	evidence              []string
	moved                 int // a crossed relation's elements moved
	// a crossed relation's input per array (where several inputs
	// cross), and the elements that input moved there
	inputOf, causeOf map[string]string
	count            map[string]int
}

// relationTagOf is the relation as array a's tag's last part:
// "batch-index", "trap-input-batch-ignored" — a crossed relation by the
// input that crossed a, where a has one of its own.
func (f sliceFinding) relationTagOf(a string) string {
	in := f.input
	if v := f.inputOf[a]; v != "" {
		in = v
	}
	if in == "" {
		return f.relation
	}
	return in + "-input-" + f.relation
}

// forwardTag is the relation as a forward's operator tag: the region its
// input names ("op:trap-input:batch-ignored"), or "slices" for an index
// relation ("op:slices:head-index").
func (f sliceFinding) forwardTag() string {
	if f.input == "" {
		return "op:slices:" + f.relation
	}
	return "op:" + f.input + "-input:" + f.relation
}

// measureSlices measures the slice relations of a failing result (base:
// the kernel's arrays on p, judged) with probe: the index relation,
// reversing the batches and rotating the heads; for each input, one slice
// of it changed (the last sequence's, the last head's); the same problem
// after other data. It returns the relation that shows on a failing
// array, in the order the type's comment gives.
func measureSlices(p sliceProblem, ct any, base []judge.Array, probe sliceProbe) (sliceFinding, bool) {
	d := p.dims()
	if probe == nil || d.batch*d.seqlen == 0 {
		return sliceFinding{}, false
	}
	th := p.threshold()
	// the failure's bulk: elements within two orders of magnitude of the
	// worst, so that a property of the kernel's arithmetic failing by a
	// little here and there (Mamba-3's angles in bf16: ratios of 5 to 10,
	// wherever the data round so) does not blur where a fault of ten
	// thousand lies
	worst := 0.0
	for _, a := range base {
		_, rs := ssdJudged([]judge.Array{a})
		worst = math.Max(worst, worstRatio(rs)) // a NaN stays NaN
	}
	bulk := bulkCut(worst, th)
	failing := failingSlices(p, base, bulk)
	if len(failing) == 0 {
		return sliceFinding{}, false
	}
	idx, byIndex := indexRelation(p, ct, failing, probe, bulk)
	crossed, ignored := inputRelation(p, ct, base, failing, probe, th)
	withIndex := func(f *sliceFinding) (sliceFinding, bool) {
		g := *f
		g.evidence = append(g.evidence, idx.evidence...)
		return g, true
	}
	if byIndex {
		// the failure keeps to its indices on one axis: an input crossed
		// along it, else the one input its failing slices do not follow
		// (read at another offset), else the index alone
		if f := crossed[idx.axis]; f != nil {
			return withIndex(f)
		}
		if f := ignored[idx.axis]; f != nil {
			return withIndex(f)
		}
		return idx, true
	}
	// results that depend on an earlier call: memory this call read and
	// never wrote
	if f := staleRelation(p, ct, base, probe, th); f != nil {
		return *f, true
	}
	// a slice's results moved by another's input alone: no fault alike
	// in every slice does that (an input not followed, alone, may be one
	// read in no slice). Where slices cross along both axes, the axis
	// that moves more: an offset along one crosses the other only at its
	// ends (a head's offset negated reads the row before's last head at
	// a row's first token)
	var most *sliceFinding
	for _, a := range []string{"batch", "sequence", "head"} {
		if f := crossed[a]; f != nil && (most == nil || f.moved > most.moved) {
			most = f
		}
	}
	if most != nil {
		return *most, true
	}
	return sliceFinding{}, false
}

// ungroupedWhereFailing is u (the layer of p with a group per head, where a
// group's gradient is one head's) and the kernel's arrays on it where the
// kernel fails there too, else p and base.
func ungroupedWhereFailing(p, u sliceProblem, ct any, base []judge.Array, probe sliceProbe) (sliceProblem, []judge.Array) {
	if ua, err := probe(u, ct); err == nil && len(ua) > 0 && !ssdPasses(ua) {
		return u, ua
	}
	return p, base
}

// failingSlices is, per array of a judged result, the set of slices
// holding an element beyond the threshold.
func failingSlices(p sliceProblem, arrays []judge.Array, th float64) map[string]map[sliceCoord]bool {
	d := p.dims()
	out := map[string]map[sliceCoord]bool{}
	for _, a := range arrays {
		lay, ok := p.layoutOf(a.Name)
		_, rs := ssdJudged([]judge.Array{a})
		if !ok || rs == nil {
			continue
		}
		for i, r := range rs[a.Name] {
			if !(r <= th) {
				if out[a.Name] == nil {
					out[a.Name] = map[sliceCoord]bool{}
				}
				out[a.Name][d.coord(lay, len(a.Got), i)] = true
			}
		}
	}
	return out
}

// axisSet is the set of a failing array's indices along an axis.
func axisSet(fs map[sliceCoord]bool, head bool) []int {
	seen := map[int]bool{}
	for c := range fs {
		i := c.seq
		if head {
			i = c.head
		}
		seen[i] = true
	}
	return sortedIndices(seen)
}

// sortedIndices are a set's indices in order, less the -1 of an element
// outside every slice.
func sortedIndices(m map[int]bool) []int {
	var out []int
	for _, i := range slices.Sorted(maps.Keys(m)) {
		if i >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// permutedProblem is p with its inputs' slices moved as ax says.
func permutedProblem(p sliceProblem, ax sliceAxis) sliceProblem {
	d := p.dims()
	x := map[string][]float64{}
	for _, in := range p.inputs() {
		if v := p.input(in.name); v != nil {
			x[in.name] = d.permuted(v, in.layout, ax)
		}
	}
	return p.with(x)
}

// indexRelation reverses the batches (a row per sequence: not for a
// packed row) and rotates the heads by one group (by one head where all
// share one group), runs the kernel on each, and reports the axis along
// which every failing array's failing indices stayed where they were
// although the data moved.
func indexRelation(p sliceProblem, ct any, failing map[string]map[sliceCoord]bool, probe sliceProbe, th float64) (sliceFinding, bool) {
	d := p.dims()
	id := func(i int) int { return i }
	var axes []sliceAxis
	if !d.packed && d.batch >= 2 {
		B := d.batch
		axes = append(axes, sliceAxis{"batch", false, B, func(b int) int { return B - 1 - b }, id, id, "their order reversed"})
	}
	if H, G := d.heads, d.groups; H >= 2 && G >= 1 && H%G == 0 {
		g, how := H/G, fmt.Sprintf("rotated by %d, their groups by one", H/G)
		gmap := func(k int) int { return (k + 1) % G }
		if G == 1 {
			g, gmap, how = 1, id, "rotated by one"
		}
		axes = append(axes, sliceAxis{"head", true, H, id, func(h int) int { return (h + g) % H }, gmap, how})
	}
	for _, ax := range axes {
		q := permutedProblem(p, ax)
		got, err := probe(q, p.permutedCotangent(ct, ax))
		if err != nil {
			continue
		}
		moved := failingSlices(q, got, th)
		var shown []string
		stays := true
		for name, fs := range failing {
			lay, _ := p.layoutOf(name)
			n, perm := ax.n, ax.bmap
			if ax.head {
				perm = ax.hmap
				if lay == layTokenGroup {
					n, perm = d.groups, ax.gmap
				}
			} else if lay == layHead {
				continue // no batch axis: a sum over the batch
			}
			before, after := axisSet(fs, ax.head), axisSet(moved[name], ax.head)
			if len(before) == 0 {
				continue
			}
			if !slices.Equal(before, after) {
				stays = false
				break
			}
			var where []int
			for _, i := range before {
				where = append(where, perm(i))
			}
			sort.Ints(where)
			if len(before) < n && !slices.Equal(where, before) {
				shown = append(shown, name)
			}
		}
		if !stays || len(shown) == 0 {
			continue
		}
		sort.Strings(shown)
		idx := axisSet(failing[shown[0]], ax.head)
		return sliceFinding{axis: ax.name, relation: ax.name + "-index", arrays: shown,
			cause:    fmt.Sprintf("fails at the same %s indices %v whatever their data: with the %ss %s, the reference's values moved with their data and the failure stayed at its indices — an offset by the %s index (its stride or its sign) in a read, a write or a store the backward reads", ax.name, idx, ax.name, ax.how, ax.name),
			evidence: []string{fmt.Sprintf("failing %s indices of %s: %v before and after the %ss were %s", ax.name, strings.Join(shown, ", "), idx, ax.name, ax.how)}}, true
	}
	return sliceFinding{}, false
}

// inputRelation changes one input at a time in one slice (the first
// sequence's, then the last's; the first head's, then the last's, the
// group's for an input per group) — a backward's cotangent's parts
// among the inputs — and compares what the kernel's results did with
// what the reference's did: another slice's elements that moved beyond
// twice the threshold (two results each within the model differ by at
// most that) where the reference's stayed bit for bit are crossed; the
// changed slice's elements whose reference moved beyond ten thresholds
// while the kernel's stayed within one, nine in ten of them, ignored.
// Both ends, because an offset by the index negated or too large reads a
// slice below or above its own: only a change of that slice shows it.
// It returns by axis the first input found crossed, and the input found
// ignored where it is the only one.
func inputRelation(p sliceProblem, ct any, base []judge.Array, failing map[string]map[sliceCoord]bool, probe sliceProbe, th float64) (crossed, ignored map[string]*sliceFinding) {
	d := p.dims()
	type axis struct {
		name string
		head bool
		n    int
	}
	var axes []axis
	crossed, ignored = map[string]*sliceFinding{}, map[string]*sliceFinding{}
	nIgnored := map[string]map[string]bool{}
	if d.nSeq >= 2 {
		name := "batch"
		if d.packed {
			name = "sequence"
		}
		axes = append(axes, axis{name, false, d.nSeq})
	}
	if d.heads >= 2 {
		axes = append(axes, axis{"head", true, d.heads})
	}
	// the problem's inputs, then the cotangent's parts: each run with
	// its values replaced
	type changeable struct {
		in     sliceInput
		values []float64
		run    func(v []float64) ([]judge.Array, error)
	}
	var all []changeable
	for _, in := range p.inputs() {
		name := in.name
		all = append(all, changeable{in, p.input(name), func(v []float64) ([]judge.Array, error) {
			return probe(p.with(map[string][]float64{name: v}), ct)
		}})
	}
	for _, c := range p.cotangentInputs(ct) {
		with := c.with
		all = append(all, changeable{c.in, c.values, func(v []float64) ([]judge.Array, error) { return probe(p, with(v)) }})
	}
	for _, ax := range axes {
		for _, ch := range all {
			in, v := ch.in, ch.values
			if v == nil || (!ax.head && in.layout == layHead) {
				continue
			}
			n := ax.n
			if ax.head && in.layout == layTokenGroup {
				if d.groups < 2 {
					continue
				}
				n = d.groups
			}
			for _, k := range []int{n - 1, 0} {
				which := fmt.Sprintf("the %s %s's %s", endName(k), ax.name, in.name)
				if ax.head && in.layout == layTokenGroup {
					which = fmt.Sprintf("the %s group's %s", endName(k), in.name)
				}
				moved, nMoved, notFollowed := changedSlice(p, base, failing, ch.run, v, in, ax.head, k, th)
				if len(moved) > 0 {
					f := &sliceFinding{axis: ax.name, relation: ax.name + "-crossed", input: in.name, arrays: names(moved),
						cause:    fmt.Sprintf("results of other %ss change when %s alone changes (the reference's stay bit for bit): a read or a write at another %s's offset", ax.name, which, ax.name),
						evidence: []string{fmt.Sprintf("%s changed: %s moved beyond twice the threshold", which, strings.Join(moved, "; "))}, moved: nMoved}
					crossed[ax.name] = mergeCrossed(crossed[ax.name], f, movedCounts(moved))
				}
				if len(notFollowed) > 0 {
					if nIgnored[ax.name] == nil {
						nIgnored[ax.name] = map[string]bool{}
					}
					nIgnored[ax.name][in.name] = true
					ignored[ax.name] = &sliceFinding{axis: ax.name, relation: ax.name + "-ignored", input: in.name, arrays: names(notFollowed),
						cause:    fmt.Sprintf("the %s's results do not follow a change of %s that moves the reference's beyond ten thresholds: that %s's %s is read at another offset", ax.name, which, ax.name, in.name),
						evidence: []string{fmt.Sprintf("%s changed: %s stayed within the threshold", which, strings.Join(notFollowed, "; "))}}
				}
				if n == 1 {
					break
				}
			}
		}
	}
	for a, ins := range nIgnored {
		if len(ins) > 1 {
			// a slice that follows none of several inputs computes
			// from none of them: no one input is read at another offset
			delete(ignored, a)
		}
	}
	return crossed, ignored
}

// mergeCrossed adds crossing g (counts: its elements moved per array) to
// the axis' finding f so far: each array is put down to the input whose
// change moved the most of its elements (inputOf), the finding's own
// input, cause and first evidence those of the crossing that moved the
// most in all. Two inputs may each cross (a head's group read wrong
// crosses dx by B and dB by x): each gradient is named by its own.
func mergeCrossed(f, g *sliceFinding, counts map[string]int) *sliceFinding {
	for _, a := range g.arrays {
		g.setInput(a, g.input, g.cause, counts[a])
	}
	if f == nil {
		return g
	}
	for _, a := range g.arrays {
		if counts[a] > f.count[a] {
			if f.inputOf[a] == "" {
				f.arrays = append(f.arrays, a)
			}
			f.setInput(a, g.input, g.cause, counts[a])
		}
	}
	if g.moved > f.moved {
		f.input, f.cause, f.moved = g.input, g.cause, g.moved
		f.evidence = append(g.evidence, f.evidence...)
	} else {
		f.evidence = append(f.evidence, g.evidence...)
	}
	sort.Strings(f.arrays)
	return f
}

// setInput puts array a down to input in (its words: cause), n of its
// elements moved.
func (f *sliceFinding) setInput(a, in, cause string, n int) {
	if f.inputOf == nil {
		f.inputOf, f.causeOf, f.count = map[string]string{}, map[string]string{}, map[string]int{}
	}
	f.inputOf[a], f.causeOf[a], f.count[a] = in, cause, n
}

// movedCounts reads changedSlice's "name: N elements" entries.
func movedCounts(entries []string) map[string]int {
	out := map[string]int{}
	for _, e := range entries {
		name, rest, _ := strings.Cut(e, ": ")
		var n int
		fmt.Sscanf(rest, "%d", &n)
		out[name] = n
	}
	return out
}

// endName names the slice k an input was changed in: the first or the
// last of its axis.
func endName(k int) string {
	if k == 0 {
		return "first"
	}
	return "last"
}

// changedSlice runs the kernel (run) with input in's slice k of one axis
// (the head axis where head) changed, and returns the arrays whose other
// slices moved where the reference's stayed bit for bit (moved), and the
// failing arrays whose slice k did not follow a change the reference's
// did (notFollowed), each as "name: what", and the number of elements
// moved.
func changedSlice(p sliceProblem, base []judge.Array, failing map[string]map[sliceCoord]bool, run func(v []float64) ([]judge.Array, error), v []float64, in sliceInput, head bool, k int, th float64) (moved []string, nMoved int, notFollowed []string) {
	d := p.dims()
	x := append([]float64(nil), v...)
	changed := 0
	for i := range x {
		c := d.coord(in.layout, len(x), i)
		if (head && c.head == k) || (!head && c.seq == k) {
			x[i] = in.change(x[i])
			changed++
		}
	}
	if changed == 0 {
		return nil, 0, nil
	}
	got, err := run(x)
	if err != nil || len(got) != len(base) {
		return nil, 0, nil
	}
	for j, a := range base {
		b := got[j]
		if b.Name != a.Name || len(b.Got) != len(a.Got) || len(b.Want) != len(a.Want) || len(a.Got) != len(a.Want) {
			continue
		}
		kc := changeRatios(a, a.Got, b.Got)
		rc := changeRatios(a, a.Want, b.Want)
		lay, _ := p.layoutOf(a.Name)
		nc, follow, still := 0, 0, 0
		for i := range a.Want {
			own := d.own(d.coord(lay, len(a.Want), i), lay, head, in.layout, k)
			switch {
			case b.Want[i] == a.Want[i] && !own && !unmoved(a.Got[i], b.Got[i], kc[i], 2*th):
				nc++
			case own && rc[i] > 10*th && !math.IsNaN(rc[i]):
				follow++
				if unmoved(a.Got[i], b.Got[i], kc[i], th) {
					still++
				}
			}
		}
		if nc > 0 {
			moved = append(moved, fmt.Sprintf("%s: %d elements", a.Name, nc))
			nMoved += nc
		}
		if follow > 0 && 10*still >= 9*follow && failing[a.Name] != nil {
			notFollowed = append(notFollowed, fmt.Sprintf("%s: %d of the %d elements its change moves", a.Name, still, follow))
		}
	}
	return moved, nMoved, notFollowed
}

// staleRelation runs the kernel on other data of the same shapes (every
// input changed), then on p again: where its results on p moved beyond
// twice the threshold (two results each within the model differ by at
// most that), they depend on the earlier call — on memory this call read
// and never wrote (a store at another offset, the slots it should have
// filled left as the allocator gave them). The slices those elements lie
// in name the axis where they are a part of it ("head-stale"; a part of
// the tokens' positions in every sequence and head, "token-stale"), else
// none ("stale").
func staleRelation(p sliceProblem, ct any, base []judge.Array, probe sliceProbe, th float64) *sliceFinding {
	d := p.dims()
	x := map[string][]float64{}
	for _, in := range p.inputs() {
		if v := p.input(in.name); v != nil {
			o := make([]float64, len(v))
			for i, e := range v {
				o[i] = in.change(e)
			}
			x[in.name] = o
		}
	}
	if _, err := probe(p.with(x), ct); err != nil {
		return nil
	}
	again, err := probe(p, ct)
	if err != nil || len(again) != len(base) {
		return nil
	}
	var moved, arrays []string
	// the heads of the arrays per head, and of those per group; the
	// tokens' positions
	seqs, heads, groupHeads, toks := map[int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}
	nh := d.heads
	for k, a := range base {
		b := again[k]
		if b.Name != a.Name || len(b.Got) != len(a.Got) || len(a.Got) != len(a.Want) {
			continue
		}
		lay, ok := p.layoutOf(a.Name)
		n := 0
		for i, r := range changeRatios(a, a.Got, b.Got) {
			if unmoved(a.Got[i], b.Got[i], r, 2*th) {
				continue
			}
			n++
			if ok {
				c := d.coord(lay, len(a.Got), i)
				seqs[c.seq] = true
				toks[c.tok] = true
				if lay == layTokenGroup {
					groupHeads[c.head] = true
				} else {
					heads[c.head] = true
				}
			}
		}
		if n > 0 {
			moved = append(moved, fmt.Sprintf("%s: %d of %d elements", a.Name, n, len(a.Got)))
			arrays = append(arrays, a.Name)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	if len(groupHeads) > 0 && len(heads) == 0 {
		heads, nh = groupHeads, d.groups // only the arrays per group moved
	}
	axis, where := "", ""
	switch bs, hs := sortedIndices(seqs), sortedIndices(heads); {
	case len(bs) > 0 && len(bs) < d.nSeq && !seqs[-1]:
		axis, where = "batch", fmt.Sprintf(" in batch rows %v of %d", bs, d.nSeq)
		if d.packed {
			axis, where = "sequence", fmt.Sprintf(" in sequences %v of %d", bs, d.nSeq)
		}
	case len(hs) > 0 && len(hs) < nh && !heads[-1]:
		axis, where = "head", fmt.Sprintf(" in heads %v of %d", hs, nh)
	case len(sortedIndices(toks)) > 0 && len(sortedIndices(toks)) < positions(d) && !toks[-1]:
		axis, where = "token", " at positions "+spans(sortedIndices(toks))+" of each sequence"
	}
	rel := "stale"
	if axis != "" {
		rel = axis + "-stale"
	}
	return &sliceFinding{axis: axis, relation: rel, arrays: arrays,
		cause:    "depends on an earlier call" + where + ": run again on the same problem after a call on other data, it moved — memory this call read and never wrote (a store at another offset, or a read of slots no store fills)",
		evidence: []string{"the same problem after a call on other data: " + strings.Join(moved, "; ") + " moved beyond twice the threshold"}}
}

// unmoved reports whether a kernel's element stayed from x to y: the
// same value (a NaN or an infinity the same both times included, whose
// ratio is no number), or within lim on the error scale (r).
func unmoved(x, y, r, lim float64) bool {
	return x == y || math.IsNaN(x) && math.IsNaN(y) || r <= lim
}

// positions is the number of token positions a problem's sequences have
// (the longest's length).
func positions(d *sliceDims) int {
	n := 0
	for _, p := range d.posOf {
		n = max(n, p+1)
	}
	return n
}

// spans writes sorted indices as ranges: "[0, 3) [5, 6)".
func spans(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "[%d, %d)", idx[i], idx[j]+1)
		i = j + 1
	}
	return b.String()
}

// names are the array names leading "name: …" entries.
func names(entries []string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i], _, _ = strings.Cut(e, ":")
	}
	return out
}

// changeRatios are the ratios of to against from on a's error scale: how
// far one result moved from another, in thresholds of the model.
func changeRatios(a judge.Array, from, to []float64) []float64 {
	c := a
	c.Got, c.Want = to, from
	_, rs, err := judge.CompareArrays([]judge.Array{c})
	if err != nil {
		out := make([]float64, len(from))
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	return rs[a.Name]
}

// replaceUnrelated puts a slice relation into a backward's tags: each
// gradient part that names no relation ("bwd:dK:none", a location alone
// "bwd:dB:in(…)") of an array the relation shows in becomes
// "bwd:dK:RELATION"; it reports whether one did.
func replaceUnrelated(tags, causes []string, f sliceFinding) bool {
	done := false
	for _, name := range f.arrays {
		for i, t := range tags {
			rest, ok := strings.CutPrefix(t, "bwd:"+name+":")
			if !ok || (rest != "none" && !strings.HasPrefix(rest, "in(")) {
				continue
			}
			was := ""
			if rest != "none" {
				was = " (wrong only " + strings.TrimSuffix(strings.TrimPrefix(rest, "in("), ")") + ")"
			}
			cause := f.cause
			if c := f.causeOf[name]; c != "" {
				cause = c
			}
			tags[i] = "bwd:" + name + ":" + f.relationTagOf(name)
			causes[i] = name + " " + cause + was
			done = true
		}
	}
	return done
}
