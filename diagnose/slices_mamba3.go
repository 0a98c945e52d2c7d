package diagnose

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
)

// The slices of a Mamba-3 problem. The layer is a separate computation
// for every sequence and every head (Q and K shared by the heads of their
// group): the outputs of one sequence and head depend on that sequence's
// and head's inputs alone, and on nothing of its position in the batch.
// A kernel that indexes a slice wrong — an offset by the batch or head
// index negated, a stride dropped, a store the backward reads put at
// another head's place — breaks that, and shows it in ways its own runs
// measure, whatever the values it computes there:
//
//   - index: the failure stays at the same batch (head) indices when the
//     batches' order is reversed (the heads rotated by one group of Q and
//     K), where the reference's results move with their data: the fault
//     follows the index, not the data;
//   - crossed: outputs of another slice change when one input of one
//     slice alone changes, where the reference's stay bit for bit (a
//     read or a write at another slice's offset);
//   - ignored: a slice's outputs do not follow a change of one of its own
//     inputs that moves the reference's beyond the error model (that input
//     is read at another offset).
//
// The relation is a structural fact measured on the kernel, not a formula
// fitted: it says which index or input to look at, not what the kernel
// computes there.

// m3Layout is how an array of a Mamba-3 problem (an input, an output or
// a gradient) is laid out.
type m3Layout int

const (
	layTokenHead m3Layout = iota // [Batch][Seqlen][Heads][w]: V, Z, Angles, y
	layTokenQK                   // [Batch][Seqlen][HeadsQK][w]: Q, K
	layHeadToken                 // [Batch][Heads][Seqlen]: ADT, DT, Trap
	layHead                      // [Heads][w]: QBias, KBias, D
	laySeqHead                   // [sequences][Heads][w]: a state
)

// m3LayoutOf gives the layout of a named array: the inputs' names, the
// forward's outputs (mamba3Arrays) and the gradients (Grads.Fields).
func m3LayoutOf(name string) (m3Layout, bool) {
	switch strings.TrimPrefix(name, "d") {
	case "Q", "K":
		return layTokenQK, true
	case "V", "Z", "Angles", "y":
		return layTokenHead, true
	case "ADT", "DT", "Trap":
		return layHeadToken, true
	case "QBias", "KBias", "Q_bias", "K_bias", "D":
		return layHead, true
	}
	if strings.Contains(name, "state") {
		return laySeqHead, true
	}
	return 0, false
}

// m3Coord is an element's slice: its sequence (-1: the array has none,
// or a packed row's padding) and head (of Q and K's heads for layTokenQK).
type m3Coord struct{ seq, head int }

// m3Slicer maps the elements of arrays of p to their slices, and moves
// the slices of an array as a permutation of the sequences (batches) and
// heads says.
type m3Slicer struct {
	p      *mamba3.Problem
	seqOf  []int // per batch row and token: the sequence, -1 padding
	nSeq   int
	heads  int
	headsQ int
}

func newM3Slicer(p *mamba3.Problem) *m3Slicer {
	s := &m3Slicer{p: p, heads: p.Heads, headsQ: p.HeadsQK}
	s.seqOf = make([]int, p.Batch*p.Seqlen)
	for i := range s.seqOf {
		s.seqOf[i] = -1
	}
	for si, sq := range p.Sequences() {
		for t := sq[1]; t < sq[2]; t++ {
			s.seqOf[sq[0]*p.Seqlen+t] = si
		}
		s.nSeq++
	}
	return s
}

// width is the innermost extent of an array of n elements in layout l.
func (s *m3Slicer) width(l m3Layout, n int) int {
	p := s.p
	d := 1
	switch l {
	case layTokenHead:
		d = p.Batch * p.Seqlen * p.Heads
	case layTokenQK:
		d = p.Batch * p.Seqlen * p.HeadsQK
	case layHeadToken:
		return 1
	case layHead:
		d = p.Heads
	case laySeqHead:
		d = s.nSeq * p.Heads
	}
	if d == 0 || n%d != 0 {
		return 0
	}
	return n / d
}

// coord is element i's slice in an array of n elements laid out as l.
func (s *m3Slicer) coord(l m3Layout, n, i int) m3Coord {
	p := s.p
	w := s.width(l, n)
	if w == 0 {
		return m3Coord{-1, -1}
	}
	switch l {
	case layTokenHead, layTokenQK:
		hh := p.Heads
		if l == layTokenQK {
			hh = p.HeadsQK
		}
		row := i / (w * hh)
		return m3Coord{s.seqOf[row%len(s.seqOf)], (i / w) % hh}
	case layHeadToken:
		b, h, t := i/(p.Heads*p.Seqlen), (i/p.Seqlen)%p.Heads, i%p.Seqlen
		return m3Coord{s.seqOf[(b*p.Seqlen+t)%len(s.seqOf)], h}
	case layHead:
		return m3Coord{-1, i / w}
	default:
		return m3Coord{i / (w * p.Heads), (i / w) % p.Heads}
	}
}

// permuted returns x (layout l) with its batch rows moved by bmap, its
// heads by hmap and Q's and K's heads by qmap (new index of an old one).
func (s *m3Slicer) permuted(x []float64, l m3Layout, bmap, hmap, qmap func(int) int) []float64 {
	if x == nil {
		return nil
	}
	p := s.p
	w := s.width(l, len(x))
	out := make([]float64, len(x))
	if w == 0 {
		copy(out, x)
		return out
	}
	L := p.Seqlen
	for i, v := range x {
		var j int
		switch l {
		case layTokenHead, layTokenQK:
			hh, hm := p.Heads, hmap
			if l == layTokenQK {
				hh, hm = p.HeadsQK, qmap
			}
			k, h, row := i%w, (i/w)%hh, i/(w*hh)
			b, t := row/L, row%L
			j = ((bmap(b)*L+t)*hh+hm(h))*w + k
		case layHeadToken:
			b, h, t := i/(p.Heads*L), (i/L)%p.Heads, i%L
			j = (bmap(b)*p.Heads+hmap(h))*L + t
		case layHead:
			j = hmap(i/w)*w + i%w
		case laySeqHead:
			sq, h, k := i/(w*p.Heads), (i/w)%p.Heads, i%w
			j = (bmap(sq)*p.Heads+hmap(h))*w + k
		}
		out[j] = v
	}
	return out
}

// m3Input is one input of a problem: its name in findings and tags, its
// layout, where it lives in a problem, and a change of its values that
// keeps the problem valid.
type m3Input struct {
	name   string
	layout m3Layout
	field  func(p *mamba3.Problem) *[]float64
	change func(x float64) float64
}

func m3Inputs() []m3Input {
	flip := func(x float64) float64 { return 0.5 - x }
	grow := func(x float64) float64 { return 1.5 * x }
	st := func(f func(s *mamba3.State) *[]float64) func(p *mamba3.Problem) *[]float64 {
		return func(p *mamba3.Problem) *[]float64 {
			if p.State == nil {
				return nil
			}
			return f(p.State)
		}
	}
	return []m3Input{
		{"q", layTokenQK, func(p *mamba3.Problem) *[]float64 { return &p.Q }, flip},
		{"k", layTokenQK, func(p *mamba3.Problem) *[]float64 { return &p.K }, flip},
		{"v", layTokenHead, func(p *mamba3.Problem) *[]float64 { return &p.V }, flip},
		{"z", layTokenHead, func(p *mamba3.Problem) *[]float64 { return &p.Z }, flip},
		{"angles", layTokenHead, func(p *mamba3.Problem) *[]float64 { return &p.Angles }, flip},
		{"adt", layHeadToken, func(p *mamba3.Problem) *[]float64 { return &p.ADT }, grow},
		{"dt", layHeadToken, func(p *mamba3.Problem) *[]float64 { return &p.DT }, grow},
		{"trap", layHeadToken, func(p *mamba3.Problem) *[]float64 { return &p.Trap }, flip},
		{"q-bias", layHead, func(p *mamba3.Problem) *[]float64 { return &p.QBias }, flip},
		{"k-bias", layHead, func(p *mamba3.Problem) *[]float64 { return &p.KBias }, flip},
		{"d", layHead, func(p *mamba3.Problem) *[]float64 { return &p.D }, flip},
		{"initial-angle-state", laySeqHead, st(func(s *mamba3.State) *[]float64 { return &s.Angle }), flip},
		{"initial-ssm-state", laySeqHead, st(func(s *mamba3.State) *[]float64 { return &s.SSM }), flip},
		{"initial-k-state", laySeqHead, st(func(s *mamba3.State) *[]float64 { return &s.K }), flip},
		{"initial-v-state", laySeqHead, st(func(s *mamba3.State) *[]float64 { return &s.V }), flip},
	}
}

// copyProblem copies p and its state deep enough that an input's array
// may be replaced.
func copyProblem(p *mamba3.Problem) *mamba3.Problem {
	q := *p
	if p.State != nil {
		s := *p.State
		q.State = &s
	}
	return &q
}

// m3Probe runs the kernel on a problem (and a cotangent, for a backward)
// and returns what it gave as arrays judged against the reference: Got
// the kernel's, Want and Scale the reference's and its error model's.
type m3Probe func(q *mamba3.Problem, ct *mamba3.Cotangent) ([]judge.Array, error)

// m3SliceFinding is what mamba3Slices found: the relation ("batch-index",
// "head-crossed", …), the input it involves ("" for an index relation),
// the arrays it shows in, and what was measured.
type m3SliceFinding struct {
	axis, relation, input string
	arrays                []string
	cause                 string
	evidence              []string
}

// relationTag is the relation as a tag's last part: "batch-index",
// "trap-input-batch-ignored".
func (f m3SliceFinding) relationTag() string {
	if f.input == "" {
		return f.relation
	}
	return f.input + "-input-" + f.relation
}

// forwardTag is the relation as a forward's operator tag: the region its
// input names ("op:trap-input:batch-ignored"), or "slices" for an index
// relation ("op:slices:head-index").
func (f m3SliceFinding) forwardTag() string {
	if f.input == "" {
		return "op:slices:" + f.relation
	}
	return "op:" + f.input + "-input:" + f.relation
}

// mamba3Slices measures the slice relations of a failing result (base:
// the kernel's arrays on p, judged) with probe: first the index
// relation, reversing the batches and rotating the heads, then, for each
// input, one slice of it changed (the last sequence's, the last head's).
// It returns the first relation that shows on a failing array.
func mamba3Slices(p *mamba3.Problem, ct *mamba3.Cotangent, base []judge.Array, probe m3Probe) (m3SliceFinding, bool) {
	if probe == nil || p.Batch*p.Seqlen == 0 {
		return m3SliceFinding{}, false
	}
	th := judge.Threshold(p.DType)
	sl := newM3Slicer(p)
	// the failure's bulk: elements within two orders of magnitude of the
	// worst, so that a property of the kernel's arithmetic failing by a
	// little here and there (its angles in bf16: ratios of 5 to 10,
	// wherever the data round so) does not blur where a fault of ten
	// thousand lies
	worst := 0.0
	for _, a := range base {
		if _, rs := ssdJudged([]judge.Array{a}); rs != nil {
			for _, r := range rs[a.Name] {
				if math.IsNaN(r) || math.IsInf(r, 0) {
					worst = math.Inf(1)
				} else {
					worst = math.Max(worst, r)
				}
			}
		}
	}
	bulk := th
	if !math.IsInf(worst, 0) {
		bulk = math.Max(th, worst/100)
	}
	failing := failingSlices(sl, base, bulk)
	if len(failing) == 0 {
		return m3SliceFinding{}, false
	}
	idx, byIndex := m3IndexRelation(p, ct, sl, failing, probe, bulk)
	crossed, ignored := m3InputRelation(p, ct, sl, base, failing, probe, th)
	withIndex := func(f *m3SliceFinding) (m3SliceFinding, bool) {
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
	if f := m3StaleRelation(p, ct, sl, base, probe, th); f != nil {
		return *f, true
	}
	// a slice's results moved by another's input alone: no fault alike
	// in every slice does that (an input not followed, alone, may be one
	// read in no slice)
	for _, a := range []string{"batch", "sequence", "head"} {
		if f := crossed[a]; f != nil {
			return *f, true
		}
	}
	return m3SliceFinding{}, false
}

// m3StaleRelation runs the kernel on other data of the same shapes (every
// input changed), then on p again: where its results on p moved beyond
// twice the threshold (two results each within the model differ by at
// most that), they depend on the earlier call — on memory this call read
// and never wrote (a store at another offset, the slots it should have
// filled left as the allocator gave them). The slices those elements lie
// in name the axis where they are a part of it ("head-stale"), else
// none ("stale").
func m3StaleRelation(p *mamba3.Problem, ct *mamba3.Cotangent, sl *m3Slicer, base []judge.Array, probe m3Probe, th float64) *m3SliceFinding {
	other := copyProblem(p)
	for _, in := range m3Inputs() {
		if f := in.field(other); f != nil && *f != nil {
			x := make([]float64, len(*f))
			for i, v := range *f {
				x[i] = in.change(v)
			}
			*f = x
		}
	}
	if _, err := probe(other.Rounded(), ct); err != nil {
		return nil
	}
	again, err := probe(p, ct)
	if err != nil || len(again) != len(base) {
		return nil
	}
	var moved, arrays []string
	// the heads of the arrays per head, and of Q's and K's per group
	seqs, heads, qkHeads := map[int]bool{}, map[int]bool{}, map[int]bool{}
	nh := p.Heads
	for k, a := range base {
		b := again[k]
		if b.Name != a.Name || len(b.Got) != len(a.Got) || len(a.Got) != len(a.Want) {
			continue
		}
		lay, ok := m3LayoutOf(a.Name)
		n := 0
		for i, r := range changeRatios(a, a.Got, b.Got) {
			if r <= 2*th {
				continue
			}
			n++
			if ok {
				c := sl.coord(lay, len(a.Got), i)
				seqs[c.seq] = true
				if lay == layTokenQK {
					qkHeads[c.head] = true
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
	if len(qkHeads) > 0 && len(heads) == 0 {
		heads, nh = qkHeads, p.HeadsQK // only Q's and K's gradients moved
	}
	axis, where := "", ""
	switch bs, hs := sortedIndices(seqs), sortedIndices(heads); {
	case len(bs) > 0 && len(bs) < sl.nSeq && !seqs[-1]:
		axis, where = "batch", fmt.Sprintf(" in batch rows %v of %d", bs, sl.nSeq)
		if p.CuSeqlens != nil {
			axis, where = "sequence", fmt.Sprintf(" in sequences %v of %d", bs, sl.nSeq)
		}
	case len(hs) > 0 && len(hs) < nh && !heads[-1]:
		axis, where = "head", fmt.Sprintf(" in heads %v of %d", hs, nh)
	}
	rel := "stale"
	if axis != "" {
		rel = axis + "-stale"
	}
	return &m3SliceFinding{axis: axis, relation: rel, arrays: arrays,
		cause:    "depends on an earlier call" + where + ": run again on the same problem after a call on other data, it moved — memory this call read and never wrote (a store at another offset, or a read of slots no store fills)",
		evidence: []string{"the same problem after a call on other data: " + strings.Join(moved, "; ") + " moved beyond twice the threshold"}}
}

// axisSet is the set of a failing array's indices along an axis.
func axisSet(fs map[m3Coord]bool, head bool) []int {
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

// m3Axis is a permutation of a problem's slices along one axis.
type m3Axis struct {
	name             string // "batch", "head"
	head             bool
	n                int
	bmap, hmap, qmap func(int) int
	how              string
}

// m3IndexRelation reverses the batches (a row per sequence: not for a
// packed row) and rotates the heads by one group of Q and K (by one head
// where all share one), runs the kernel on each, and reports the axis
// along which every failing array's failing indices stayed where they
// were although the data moved.
func m3IndexRelation(p *mamba3.Problem, ct *mamba3.Cotangent, sl *m3Slicer, failing map[string]map[m3Coord]bool, probe m3Probe, th float64) (m3SliceFinding, bool) {
	id := func(i int) int { return i }
	var axes []m3Axis
	if p.CuSeqlens == nil && p.Batch >= 2 {
		B := p.Batch
		axes = append(axes, m3Axis{"batch", false, B, func(b int) int { return B - 1 - b }, id, id, "their order reversed"})
	}
	if H, Hq := p.Heads, p.HeadsQK; H >= 2 && Hq >= 1 && H%Hq == 0 {
		g, how := H/Hq, fmt.Sprintf("rotated by %d, Q's and K's by one", H/Hq)
		qmap := func(k int) int { return (k + 1) % Hq }
		if Hq == 1 {
			g, qmap, how = 1, id, "rotated by one"
		}
		axes = append(axes, m3Axis{"head", true, H, id, func(h int) int { return (h + g) % H }, qmap, how})
	}
	for _, ax := range axes {
		q, qct := sl.permutedProblem(ct, ax)
		got, err := probe(q, qct)
		if err != nil {
			continue
		}
		moved := failingSlices(newM3Slicer(q), got, th)
		var shown []string
		stays := true
		for name, fs := range failing {
			lay, _ := m3LayoutOf(name)
			n, perm := ax.n, ax.bmap
			if ax.head {
				perm = ax.hmap
				if lay == layTokenQK {
					n, perm = p.HeadsQK, ax.qmap
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
		return m3SliceFinding{axis: ax.name, relation: ax.name + "-index", arrays: shown,
			cause:    fmt.Sprintf("fails at the same %s indices %v whatever their data: with the %ss %s, the reference's values moved with their data and the failure stayed at its indices — an offset by the %s index (its stride or its sign) in a read, a write or a store the backward reads", ax.name, idx, ax.name, ax.how, ax.name),
			evidence: []string{fmt.Sprintf("failing %s indices of %s: %v before and after the %ss were %s", ax.name, strings.Join(shown, ", "), idx, ax.name, ax.how)}}, true
	}
	return m3SliceFinding{}, false
}

// failingSlices is, per array of a judged result, the set of slices
// holding an element beyond the threshold.
func failingSlices(sl *m3Slicer, arrays []judge.Array, th float64) map[string]map[m3Coord]bool {
	out := map[string]map[m3Coord]bool{}
	for _, a := range arrays {
		lay, ok := m3LayoutOf(a.Name)
		_, rs := ssdJudged([]judge.Array{a})
		if !ok || rs == nil {
			continue
		}
		for i, r := range rs[a.Name] {
			if !(r <= th) {
				if out[a.Name] == nil {
					out[a.Name] = map[m3Coord]bool{}
				}
				out[a.Name][sl.coord(lay, len(a.Got), i)] = true
			}
		}
	}
	return out
}

// permutedProblem is the slicer's problem (and cotangent) with its slices
// moved as ax says.
func (s *m3Slicer) permutedProblem(ct *mamba3.Cotangent, ax m3Axis) (*mamba3.Problem, *mamba3.Cotangent) {
	q := copyProblem(s.p)
	for _, in := range m3Inputs() {
		if f := in.field(q); f != nil && *f != nil {
			*f = s.permuted(*f, in.layout, ax.bmap, ax.hmap, ax.qmap)
		}
	}
	if ct == nil {
		return q, nil
	}
	perm := func(x []float64, l m3Layout) []float64 { return s.permuted(x, l, ax.bmap, ax.hmap, ax.qmap) }
	qct := &mamba3.Cotangent{Y: perm(ct.Y, layTokenHead)}
	if c := ct.State; c != nil {
		qct.State = &mamba3.State{Angle: perm(c.Angle, laySeqHead), SSM: perm(c.SSM, laySeqHead), K: perm(c.K, laySeqHead), V: perm(c.V, laySeqHead)}
	}
	return q, qct
}

// m3InputRelation changes one input at a time in one slice (the last
// sequence's; the last head's, the last group's for Q and K) and compares
// what the kernel's results did with what the reference's did: another
// slice's elements that moved beyond twice the threshold (two results
// each within the model differ by at most that) where the reference's
// stayed bit for bit are crossed; the changed slice's elements whose
// reference moved beyond ten thresholds while the kernel's stayed within
// one, nine in ten of them, ignored. It returns by axis the first input
// found crossed, and the input found ignored where it is the only one.
func m3InputRelation(p *mamba3.Problem, ct *mamba3.Cotangent, sl *m3Slicer, base []judge.Array, failing map[string]map[m3Coord]bool, probe m3Probe, th float64) (crossed, ignored map[string]*m3SliceFinding) {
	type axis struct {
		name string
		head bool
		n    int
	}
	var axes []axis
	crossed, ignored = map[string]*m3SliceFinding{}, map[string]*m3SliceFinding{}
	nIgnored := map[string]int{}
	if sl.nSeq >= 2 {
		name := "batch"
		if p.CuSeqlens != nil {
			name = "sequence"
		}
		axes = append(axes, axis{name, false, sl.nSeq})
	}
	if p.Heads >= 2 {
		axes = append(axes, axis{"head", true, p.Heads})
	}
	for _, ax := range axes {
		for _, in := range m3Inputs() {
			f := in.field(p)
			if f == nil || *f == nil || (!ax.head && in.layout == layHead) {
				continue
			}
			last := ax.n - 1
			if ax.head && in.layout == layTokenQK {
				if p.HeadsQK < 2 {
					continue
				}
				last = p.HeadsQK - 1
			}
			q := copyProblem(p)
			x := append([]float64(nil), *f...)
			changed := 0
			for i := range x {
				c := sl.coord(in.layout, len(x), i)
				if (ax.head && c.head == last) || (!ax.head && c.seq == last) {
					x[i] = in.change(x[i])
					changed++
				}
			}
			if changed == 0 {
				continue
			}
			// rounded to what the kernel reads, the other inputs as they were
			*in.field(q) = x
			*in.field(q) = *in.field(q.Rounded())
			got, err := probe(q, ct)
			if err != nil || len(got) != len(base) {
				continue
			}
			var moved, notFollowed []string
			for k, a := range base {
				b := got[k]
				if b.Name != a.Name || len(b.Got) != len(a.Got) || len(b.Want) != len(a.Want) || len(a.Got) != len(a.Want) {
					continue
				}
				kc := changeRatios(a, a.Got, b.Got)
				rc := changeRatios(a, a.Want, b.Want)
				lay, _ := m3LayoutOf(a.Name)
				nc, follow, still := 0, 0, 0
				for i := range a.Want {
					c := sl.coord(lay, len(a.Want), i)
					own := (ax.head && c.head == last) || (!ax.head && c.seq == last)
					if ax.head && lay == layTokenQK {
						own = c.head == p.HeadsQK-1
					}
					switch {
					case b.Want[i] == a.Want[i] && !own && !(kc[i] <= 2*th):
						nc++
					case own && rc[i] > 10*th && !math.IsNaN(rc[i]):
						follow++
						if kc[i] <= th {
							still++
						}
					}
				}
				if nc > 0 {
					moved = append(moved, fmt.Sprintf("%s: %d elements", a.Name, nc))
				}
				if follow > 0 && 10*still >= 9*follow && failing[a.Name] != nil {
					notFollowed = append(notFollowed, fmt.Sprintf("%s: %d of the %d elements its change moves", a.Name, still, follow))
				}
			}
			which := fmt.Sprintf("the last %s's %s", ax.name, in.name)
			if ax.head && in.layout == layTokenQK {
				which = fmt.Sprintf("the last group's %s", in.name)
			}
			if len(moved) > 0 && crossed[ax.name] == nil {
				crossed[ax.name] = &m3SliceFinding{axis: ax.name, relation: ax.name + "-crossed", input: in.name, arrays: names(moved),
					cause:    fmt.Sprintf("results of other %ss change when %s alone changes (the reference's stay bit for bit): a read or a write at another %s's offset", ax.name, which, ax.name),
					evidence: []string{fmt.Sprintf("%s changed: %s moved beyond twice the threshold", which, strings.Join(moved, "; "))}}
			}
			if len(notFollowed) > 0 {
				nIgnored[ax.name]++
				ignored[ax.name] = &m3SliceFinding{axis: ax.name, relation: ax.name + "-ignored", input: in.name, arrays: names(notFollowed),
					cause:    fmt.Sprintf("the %s's results do not follow a change of %s that moves the reference's beyond ten thresholds: that %s's %s is read at another offset", ax.name, which, ax.name, in.name),
					evidence: []string{fmt.Sprintf("%s changed: %s stayed within the threshold", which, strings.Join(notFollowed, "; "))}}
			}
		}
	}
	for a, n := range nIgnored {
		if n > 1 {
			// a slice that follows none of several inputs computes
			// from none of them: no one input is read at another offset
			delete(ignored, a)
		}
	}
	return crossed, ignored
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

// ungrouped is p with a group of Q and K per head (each head's copy of its
// group's): the same layer, whose Q's and K's gradients are then each
// one head's, so that a slice relation of one head shows in them.
func ungrouped(p *mamba3.Problem) *mamba3.Problem {
	q := copyProblem(p)
	H, Hq, N := p.Heads, p.HeadsQK, p.N
	if Hq == 0 || H%Hq != 0 {
		return q
	}
	g := H / Hq
	rep := func(x []float64) []float64 {
		out := make([]float64, p.Batch*p.Seqlen*H*N)
		for r := 0; r < p.Batch*p.Seqlen; r++ {
			for h := 0; h < H; h++ {
				copy(out[(r*H+h)*N:(r*H+h+1)*N], x[(r*Hq+h/g)*N:(r*Hq+h/g+1)*N])
			}
		}
		return out
	}
	q.Q, q.K, q.HeadsQK = rep(p.Q), rep(p.K), H
	return q
}
