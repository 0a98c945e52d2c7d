package diagnose

import (
	"fmt"
	"math"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
)

// SSDBackward diagnoses a failing backward of Mamba-2's chunked scan (the
// prefill under autograd) from the structure of the failure, not from a
// catalogue of backward slips, as Mamba3Backward does.
//
// The forward the backward ran comes first ("fwd:…"). The gradients of a
// wrong forward are not blamed on the backward, except past three
// findings that leave them to be judged: a forward the backward recomputes
// by a path of its own ("fwd:recomputed": the kernel's prefill of the same
// problem is right), products with TF32 operands (narrow:tf32: the
// gradients are judged in that arithmetic), and a forward wrong only in
// states the cotangent does not reach.
//
// Then every gradient beyond the threshold is related to the float64
// gradient (Relate): zero, a constant factor, a path of the chain rule cut
// or negated (mamba2.GradWithout), a factor of it left out
// (mamba2.GradLacking), a shift by a step, another head's or group's
// gradient, the right total in the wrong slots ("bwd:dA:lacks(Δ)"), the
// reference times a function of one quantity of the element's own step
// (factorOf: "bwd:dz:factor-of(z)", a factor's formula wrong), the
// chunk-state path's part rescaled by e^{α·cum_end + β·cum_t}, α and β
// fitted (pathDecay: "bwd:dx:decay(chunk-state,-2·end,0)", an exponent of
// the decay to the chunk's end read wrong). One no
// relation explains is located where its failures are confined along the
// layout's axes — the chunks, a chunk's steps, the heads or groups, the
// rows: "bwd:dx:in(chunks(1 2),last-head)" (locateGradFailure), with the
// relation where one holds on the failing elements alone
// ("bwd:dx:zero@in(chunks(1))", relateWhereFailing) — and is
// "bwd:dx:none" where they reach every index. Failures exact at an axis'
// first index and wrong at every later one are an offset scaled wrong
// along it, a relation of their own: "bwd:dx:offset(heads)" (offsetOf).
//
// A gradient that names no relation (none, or a location alone) is then
// judged by its slices (measureSlices, with runBwd, on the layer with a
// group of B and C per head where the kernel fails so too): a failure that
// stays at its batch or head indices when they are permuted
// ("bwd:dB:head-index"), that crosses between slices, or that depends on
// an earlier call ("bwd:dinitial_states:batch-stale").
//
// run (nil: none) runs the kernel's prefill, for the forward's diagnosis;
// runBwd (nil: none) its backward.
func SSDBackward(p *mamba2.Problem, ct *mamba2.Cotangent, out *mamba2.Output, g *mamba2.Grads, run SSDRunner, runBwd SSDBackwardRunner) (f report.Finding) {
	defer contained(&f, "diagnose.SSDBackward", p.Shape)
	return diagnoseSSDBackward(p, ct, out, g, run, runBwd)
}

// SSDBackwardRunner runs a kernel's Mamba-2 backward (its prefill under
// autograd, then the backward) on a problem for a cotangent, for the
// probes of the diagnosis.
type SSDBackwardRunner func(p *mamba2.Problem, ct *mamba2.Cotangent) (*mamba2.Output, *mamba2.Grads, error)

func diagnoseSSDBackward(p *mamba2.Problem, ct *mamba2.Cotangent, out *mamba2.Output, g *mamba2.Grads, run SSDRunner, runBwd SSDBackwardRunner) report.Finding {
	want, sc := mamba2.Prefill(p)
	var tags, causes, where []string
	model := p // the arithmetic the gradients are judged in
	if ok, ratios := ssdJudged(judge.PrefillArrays(p, out, want, sc)); !ok {
		th := judge.Threshold(p.DType)
		switch f := forwardUnder(p, out, want, sc, ratios, run); {
		case f.Tag == "recomputed", f.Tag == "narrow:tf32", unreached(ratios, ct, th):
			// the forward the backward runs differs from the kernel's own
			// prefill, or its products take TF32 operands (the backward's
			// do too: its gradients are judged in that arithmetic), or it
			// is wrong only in states no cotangent reaches: a backward
			// slip is not hidden behind the forward's finding
			tags, causes, where = []string{"fwd:" + f.Tag}, []string{"the forward under the backward: " + f.Cause}, []string{f.Where}
			if f.Tag == "narrow:tf32" {
				model = mamba2.WithOperands(p, mamba2.TF32Roundoff)
			}
		default:
			return report.Finding{Tag: "fwd:" + f.Tag, Cause: "the forward under the backward: " + f.Cause, Where: f.Where}
		}
	}
	ref := mamba2.Grad(p, ct)
	arrays, err := judge.Mamba2GradArrays(p, g, ref, mamba2.GradErrorScale(model, ct))
	if err != nil {
		return report.Finding{Tag: strings.Join(append(tags, "bwd:missing"), "+"), Cause: strings.Join(append(causes, err.Error()), "; ")}
	}
	fwdTags := len(tags)
	cands := gradCandidates(p, ct, ref)
	var chunkCut *mamba2.Grads // the gradients without the chunk-state path, for pathDecay
	for _, a := range arrays {
		ok, rs := ssdJudged([]judge.Array{a})
		if ok {
			// within the model, but on a wrong formula (HiddenRelation)
			if tag, cause, hidden := hiddenGrad(a, cands(a.Name)); hidden {
				tags, causes = append(tags, tag), append(causes, cause)
			}
			continue
		}
		th := judge.Threshold(a.Computed)
		where = append(where, failingCounts(rs, th, a.Name)...)
		rel, ok := Relate(a, cands(a.Name), th)
		if !ok {
			what, u, h0 := factorVariable(p, a.Name)
			rel, ok = factorOf(a, what, u, h0, th)
		}
		if !ok {
			if chunkCut == nil {
				chunkCut = mamba2.GradWithout(p, ct, mamba2.PathChunkState)
			}
			rel, ok = pathDecay(p, a, ref.ByName(a.Name), chunkCut.ByName(a.Name), th)
		}
		if !ok {
			if tag, words := locateGradFailure(p, a.Name, rs[a.Name], th); tag != "" {
				if axes, why := offsetOf(strings.Split(tag, ",")); axes != "" {
					tags = append(tags, "bwd:"+a.Name+":offset("+axes+")")
					causes = append(causes, a.Name+" is exact at the first index and wrong past it ("+words+"): "+why)
					continue
				}
				if rel, ok := relateWhereFailing(a, cands(a.Name), rs[a.Name], th); ok {
					tags = append(tags, "bwd:"+a.Name+":"+rel.Tag+"@in("+tag+")")
					causes = append(causes, a.Name+" "+rel.Cause+" where it is wrong, "+words+"; it is right elsewhere")
					continue
				}
				tags = append(tags, "bwd:"+a.Name+":in("+tag+")")
				causes = append(causes, a.Name+": no relation to the reference fits; it is wrong only "+words)
				continue
			}
			tags = append(tags, "bwd:"+a.Name+":none")
			causes = append(causes, a.Name+": no relation to the reference fits, and it is wrong everywhere")
			continue
		}
		tags = append(tags, "bwd:"+a.Name+":"+rel.Tag)
		causes = append(causes, a.Name+" "+rel.Cause)
	}
	var evidence []string
	if runBwd != nil && unrelatedPart(tags[fwdTags:]) {
		narrow := model != p
		probe := func(q *mamba2.Problem, qct *mamba2.Cotangent) ([]judge.Array, error) {
			_, qg, err := runBwd(q, qct)
			if err != nil {
				return nil, err
			}
			m := q
			if narrow {
				m = mamba2.WithOperands(q, mamba2.TF32Roundoff)
			}
			return judge.Mamba2GradArrays(q, qg, mamba2.Grad(q, qct), mamba2.GradErrorScale(m, qct))
		}
		if sf, ok := ssdSlicesOf(p, ct, arrays, probe); ok && replaceUnrelated(tags[fwdTags:], causes[fwdTags:], sf) {
			evidence = sf.evidence
		}
	}
	switch {
	case len(tags) == 0:
		return report.Finding{Cause: "the failure did not reproduce on this problem"}
	case len(tags) == fwdTags && model != p:
		causes = append(causes, "the gradients are within the error model of TF32 products")
	case len(tags) == fwdTags:
		causes = append(causes, "the gradients are right")
	}
	return report.Finding{Tag: strings.Join(tags, "+"), Cause: strings.Join(causes, "; "), Where: strings.Join(where, "; "), Evidence: evidence}
}

// unrelatedPart reports whether a backward's gradient parts hold one that
// names no relation: "bwd:dX:none" or a location alone "bwd:dX:in(…)".
func unrelatedPart(tags []string) bool {
	for _, t := range tags {
		if strings.HasSuffix(t, ":none") || strings.Contains(t, ":in(") && !strings.Contains(t, "@in(") {
			return true
		}
	}
	return false
}

// minConfined is the fewest failing elements a relation confined to them
// is fitted on: fewer fit a constant by chance.
const minConfined = 16

// relateWhereFailing is Relate on the elements of a that fail alone, the
// candidates' values there: a relation that holds where a gradient is
// wrong, the rest of it right — a path cut, a factor or zero in one chunk,
// one head, past one step (an index or a mask wrong for part of a grid).
// None where fewer than minConfined elements fail, or all do.
func relateWhereFailing(a judge.Array, cands []Candidate, ratios []float64, th float64) (Candidate, bool) {
	var idx []int
	for i, r := range ratios {
		if !(r <= th) {
			idx = append(idx, i)
		}
	}
	if len(idx) < minConfined || len(idx) == len(a.Got) || len(ratios) != len(a.Got) {
		return Candidate{}, false
	}
	pick := func(v []float64) []float64 {
		out := make([]float64, len(idx))
		for k, i := range idx {
			out[k] = v[i]
		}
		return out
	}
	b := a
	b.Got, b.Want, b.Scale, b.Tiny = pick(a.Got), pick(a.Want), pick(a.Scale), pick(a.Tiny)
	b.Index = func(k int) []int { return a.Index(idx[k]) }
	var cs []Candidate
	for _, c := range cands {
		if len(c.Want) == len(a.Want) {
			c.Want = pick(c.Want)
			cs = append(cs, c)
		}
	}
	return Relate(b, cs, th)
}

// gradCandidates returns the structural relations of each gradient
// (ssdCandidates), the chain rule's variants computed once, at the first
// call.
func gradCandidates(p *mamba2.Problem, ct *mamba2.Cotangent, ref *mamba2.Grads) func(name string) []Candidate {
	var without map[mamba2.Path]*mamba2.Grads
	var lacking map[mamba2.Factor]*mamba2.Grads
	return func(name string) []Candidate {
		if without == nil {
			without, lacking = mamba2.GradsWithout(p, ct), map[mamba2.Factor]*mamba2.Grads{}
			for _, f := range mamba2.Factors() {
				lacking[f] = mamba2.GradLacking(p, ct, f)
			}
		}
		return ssdCandidates(p, name, ref, without, lacking)
	}
}

// SSDBackwardHidden looks, in a backward whose forward and gradients pass
// their judgement (arrays: judge.Mamba2GradArrays of the kernel's
// gradients against ref, mamba2.Grad's), for a gradient that follows a
// structural relation to the reference all the same (HiddenRelation: a
// slip the normwise model's bound is too wide to see, in 16-bit types
// above all). It returns the finding ("bwd:dA:lacks(Δ)", the evidence in
// its cause), or a Finding with no Tag where none does.
func SSDBackwardHidden(p *mamba2.Problem, ct *mamba2.Cotangent, ref *mamba2.Grads, arrays []judge.Array) (f report.Finding) {
	defer contained(&f, "diagnose.SSDBackwardHidden", p.Shape)
	return hiddenFinding(arrays, gradCandidates(p, ct, ref), p.Shape())
}

// hiddenGrad is HiddenRelation of one gradient as a backward finding's
// tag and cause.
func hiddenGrad(a judge.Array, cands []Candidate) (tag, cause string, ok bool) {
	c, ev, ok := HiddenRelation(a, cands)
	return "bwd:" + a.Name + ":" + c.Tag, a.Name + " " + c.Cause + ", " + ev, ok
}

// hiddenFinding is the finding of the gradients of arrays that follow a
// relation (hiddenGrad), with each one's candidates; no Tag where none
// does.
func hiddenFinding(arrays []judge.Array, cands func(name string) []Candidate, where string) report.Finding {
	var tags, causes []string
	for _, a := range arrays {
		if tag, cause, ok := hiddenGrad(a, cands(a.Name)); ok {
			tags, causes = append(tags, tag), append(causes, cause)
		}
	}
	if len(tags) == 0 {
		return report.Finding{}
	}
	return report.Finding{Tag: strings.Join(tags, "+"), Cause: strings.Join(causes, "; "), Where: where}
}

// forwardUnder diagnoses the wrong forward a backward ran (want and sc the
// reference's): "recomputed" where the kernel's own prefill of the problem
// (run) is right — the backward recomputes the forward by a path of its
// own — else the prefill's diagnosis (SSDPrefill).
func forwardUnder(p *mamba2.Problem, out, want *mamba2.Output, sc *mamba2.Scale, ratios map[string][]float64, run SSDRunner) report.Finding {
	if run != nil {
		if again, err := run(p); err == nil && ssdPasses(judge.PrefillArrays(p, again, want, sc)) {
			return report.Finding{Tag: "recomputed", Where: ssdWhere(p, ratios, judge.Threshold(p.DType)),
				Cause: "wrong where the kernel's prefill of the same problem is right: the backward recomputes the forward by a path of its own"}
		}
	}
	return SSDPrefill(p, out, run)
}

// unreached reports whether a forward's failing arrays (ratios beyond th)
// are only states whose cotangent ct leaves out — a packed row's
// per-sequence states or the final states — so that the gradients do not
// depend on them.
func unreached(ratios map[string][]float64, ct *mamba2.Cotangent, th float64) bool {
	for name, rs := range ratios {
		if allPass(rs, th) {
			continue
		}
		switch {
		case name == "seq_states" && ct.SeqStates == nil:
		case name == "final_states" && ct.FinalStates == nil:
		default:
			return false
		}
	}
	return true
}

// ssdCandidates are a Mamba-2 gradient's structural relations to the
// reference ref: a path of the chain rule cut or negated, a factor left
// out, a shift by one step in time (the gradients of per-step inputs), the
// reference of the next or previous head (per-head gradients) or group
// (dB, dC).
func ssdCandidates(p *mamba2.Problem, name string, ref *mamba2.Grads, without map[mamba2.Path]*mamba2.Grads, lacking map[mamba2.Factor]*mamba2.Grads) []Candidate {
	full := ref.ByName(name)
	var out []Candidate
	for _, path := range mamba2.Paths() {
		out = append(out, pathCandidates(full, without[path].ByName(name), path.Tag(), path.String())...)
	}
	for _, f := range mamba2.Factors() {
		if v := lacking[f].ByName(name); !sameSlice(v, full) {
			out = append(out, Candidate{Tag: "lacks(" + f.Tag() + ")", Cause: "lacks the factor " + f.String(), Want: v})
		}
	}
	L, H, P, G, N, B := p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate, p.Batch
	// the skip connection's term without D (dy·g for D·dy·g: D dropped
	// from the backward's skip, or taken as 1): dx and dz by (head,
	// channel), D per head or per channel
	if cut := without[mamba2.PathSkip].ByName(name); (name == "dx" || name == "dz") && p.D != nil && !sameSlice(cut, full) {
		want, ok := make([]float64, len(full)), true
		for i := range full {
			h, c := i/P%H, i%P
			d := p.D[h]
			if len(p.D) == H*P {
				d = p.D[h*P+c]
			}
			if d == 0 {
				ok = false
				break
			}
			want[i] = cut[i] + (full[i]-cut[i])/d
		}
		if ok {
			out = append(out, Candidate{Tag: "lacks(D):skip", Cause: "has its path through the skip connection without D (dy where D·dy)", Want: want})
		}
	}
	// a shift by one step: rows of L steps, each step `inner` elements
	rows, inner := 0, 0
	switch name {
	case "dx", "dz":
		rows, inner = B, H*P
	case "ddt":
		rows, inner = B, H
	case "dB", "dC":
		rows, inner = B, G*N
	}
	out = append(out, shiftCandidates(full, rows, L, inner)...)
	// another head's or group's gradient: the innermost axis `inner`
	// elements, `count` of them (heads or groups) rotated by one
	count, inner := 0, 0
	switch name {
	case "dx", "dz":
		count, inner = H, P
	case "ddt":
		count, inner = H, 1
	case "dA", "ddt_bias":
		count, inner = H, 1
	case "dD":
		count, inner = H, len(full)/H // per head, or per head and channel
	case "dinitial_states":
		count, inner = H, P*N
	case "dB", "dC":
		count, inner = G, N
	}
	what := "head"
	if name == "dB" || name == "dC" {
		what = "group"
	}
	for _, k := range []int{1, -1} {
		if count < 2 || (count == 2 && k == -1) {
			break
		}
		rot := make([]float64, len(full))
		for i := range full {
			blk := i / inner % count
			j := i + ((blk+k+count)%count-blk)*inner
			rot[i] = full[j]
		}
		out = append(out, Candidate{Tag: fmt.Sprintf("wrong-%s(%+d)", what, k), Cause: fmt.Sprintf("is the reference's gradient of the %s %+d: written into the wrong %s", what, k, what), Want: rot})
	}
	return out
}

// locateGradFailure says along which axes of gradient name's layout the
// failing elements (ratio beyond th) are confined to a part: the chunks
// (all but the first, the last, a list), the steps of a chunk (its first,
// all but its first, its last), the heads or groups and the rows (all but
// the first, the first, a list). It returns the tag's parts and their
// words, "" where the failures reach every index of every axis.
func locateGradFailure(p *mamba2.Problem, name string, ratios []float64, th float64) (tag, words string) {
	L, H, P, G, N, B, Q := p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate, p.Batch, p.Chunk
	type axis struct {
		what string // "chunk", "step", "head", "group", "row"
		n    int
		of   func(i int) int
	}
	var axes []axis
	steps := func(inner int) {
		axes = append(axes, axis{"row", B, func(i int) int { return i / (L * inner) }})
		if Q > 0 && L > Q {
			axes = append(axes, axis{"chunk", (L + Q - 1) / Q, func(i int) int { return i / inner % L / Q }})
			axes = append(axes, axis{"step", min(Q, L), func(i int) int { return i / inner % L % Q }})
		}
	}
	switch name {
	case "dx", "dz":
		steps(H * P)
		axes = append(axes, axis{"head", H, func(i int) int { return i / P % H }})
	case "ddt":
		steps(H)
		axes = append(axes, axis{"head", H, func(i int) int { return i % H }})
	case "dB", "dC":
		steps(G * N)
		axes = append(axes, axis{"group", G, func(i int) int { return i / N % G }})
	case "dinitial_states":
		axes = append(axes, axis{"row", B, func(i int) int { return i / (H * P * N) }}, axis{"head", H, func(i int) int { return i / (P * N) % H }})
	case "dA", "ddt_bias":
		axes = append(axes, axis{"head", H, func(i int) int { return i }})
	case "dD":
		per := len(ratios) / H // per head, or per head and channel
		axes = append(axes, axis{"head", H, func(i int) int { return i / per }})
	}
	var tags, ws []string
	for _, ax := range axes {
		if ax.n < 2 {
			continue
		}
		bad := make([]bool, ax.n)
		for i, r := range ratios {
			if r > th || math.IsNaN(r) {
				bad[ax.of(i)] = true
			}
		}
		var in []int
		for k, b := range bad {
			if b {
				in = append(in, k)
			}
		}
		if len(in) == 0 || len(in) == ax.n {
			continue
		}
		t, w := confined(ax.what, ax.n, in, L-(ax.n-1)*Q)
		tags, ws = append(tags, t), append(ws, w)
	}
	return strings.Join(tags, ","), strings.Join(ws, " and ")
}

// offsetOf reads an address gone wrong from where a gradient's failures
// are confined (locateGradFailure's parts): exact at an axis' first index
// and wrong at every later one is the mark of an offset along that axis
// scaled wrong — index·stride vanishes at the first index only, so a
// stride dropped, negated or missing a factor (chunk_size in a chunk's
// offset, the block in pid·BLOCK) errs everywhere past it. It returns the
// axes ("rows,chunks") and the relation's words, "" where no part is of
// that shape. The rows, heads and groups are independent computations, so
// nothing else gives the mark there; past the first chunk, what enters a
// chunk from the ones before gives it too, and the words say so.
func offsetOf(parts []string) (axes, why string) {
	var as, ws []string
	for _, part := range parts {
		switch {
		case strings.HasSuffix(part, "-after-first"):
			ax := strings.TrimSuffix(part, "-after-first")
			as = append(as, ax)
			w := "a per-" + strings.TrimSuffix(ax, "s") + " offset or stride is wrong"
			if ax == "chunks" {
				w = "a per-chunk offset is wrong (its stride, or chunk_size in it), or what a chunk receives from the ones before"
			}
			ws = append(ws, w)
		case part == "not-chunk-start":
			as, ws = append(as, "steps"), append(ws, "a per-step stride is wrong (each chunk's first step, at offset 0, is right)")
		case strings.HasPrefix(part, "steps-from("):
			k := strings.TrimSuffix(strings.TrimPrefix(part, "steps-from("), ")")
			as, ws = append(as, "blocks-of-"+k), append(ws, "the offset of a block of "+k+" steps is wrong (its first block is right)")
		}
	}
	return strings.Join(as, ","), strings.Join(ws, "; ")
}

// confined names a proper subset in of an axis of n indices: all but the
// first, the first, the last, a chunk's steps from a block's boundary on
// (k a power of two, 8 ≤ k < n), a list. last is the length of the row's
// last chunk (for the words of a partial one).
func confined(what string, n int, in []int, last int) (tag, words string) {
	plural := map[string]string{"chunk": "chunks", "step": "steps", "head": "heads", "group": "groups", "row": "rows"}[what]
	if k := in[0]; what == "step" && k >= 8 && k&(k-1) == 0 && len(in) == n-k && in[len(in)-1] == n-1 {
		return fmt.Sprintf("steps-from(%d)", k), fmt.Sprintf("from step %d of each chunk on", k)
	}
	switch {
	case len(in) == n-1 && in[0] == 1:
		if what == "step" {
			return "not-chunk-start", "past each chunk's first step"
		}
		return plural + "-after-first", "in the " + plural + " after the first"
	case len(in) == 1 && in[0] == 0:
		if what == "step" {
			return "chunk-start", "at each chunk's first step"
		}
		return "first-" + what, "in the first " + what
	case len(in) == 1 && in[0] == n-1:
		if what == "step" {
			return "chunk-end", "at each chunk's last step"
		}
		if what == "chunk" && last > 0 {
			return "last-chunk", fmt.Sprintf("in the last chunk (%d steps)", last)
		}
		return "last-" + what, "in the last " + what
	}
	parts := make([]string, len(in))
	for i, k := range in {
		parts[i] = fmt.Sprint(k)
	}
	if len(in) > 8 {
		parts = append(parts[:8], "…")
	}
	return plural + "(" + strings.Join(parts, " ") + ")", plural + " " + strings.Join(parts, ", ")
}
