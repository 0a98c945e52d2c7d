package diagnose

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// screenDrawn is a problem of every shape the screen restricts: rows,
// groups, chunks or none, packed rows, D per channel, 16-bit types.
func screenDrawn(t *rapid.T) *mamba2.Problem {
	dt := rapid.SampledFrom([]ssm.DType{ssm.F32, ssm.BF16, ssm.F16}).Draw(t, "dtype")
	o := mamba2.Options{Batch: rapid.IntRange(1, 3).Draw(t, "batch"), Seqlen: rapid.IntRange(1, 40).Draw(t, "seqlen"),
		Heads: rapid.SampledFrom([]int{2, 4}).Draw(t, "heads"), Headdim: rapid.IntRange(1, 3).Draw(t, "headdim"),
		Groups: rapid.SampledFrom([]int{1, 2}).Draw(t, "groups"), Dstate: rapid.IntRange(1, 4).Draw(t, "dstate"),
		Chunk: rapid.SampledFrom([]int{0, 1, 4, 8}).Draw(t, "chunk"), D: rapid.Bool().Draw(t, "D"), Z: rapid.Bool().Draw(t, "Z"),
		DtBias: rapid.Bool().Draw(t, "dt_bias"), Softplus: rapid.Bool().Draw(t, "softplus"), InitialStates: rapid.Bool().Draw(t, "initial"),
		DType: dt, StateDType: rapid.SampledFrom([]ssm.DType{ssm.F32, dt}).Draw(t, "state")}
	o.DPerChannel = o.D && rapid.Bool().Draw(t, "d_per_channel")
	if rapid.Bool().Draw(t, "limits") {
		o.DtMin, o.DtMax = 0.002, 0.05
	}
	if rapid.Bool().Draw(t, "packed") && o.Seqlen > 2 {
		o.Batch, o.CuSeqlens = 1, []int{0, rapid.IntRange(1, o.Seqlen-1).Draw(t, "cut"), o.Seqlen}
	}
	return mamba2.Generate(o, rapid.Uint64().Draw(t, "seed")).Rounded()
}

// The screen's soundness: on the screened channel the restricted problem's
// reference is the whole problem's, bit for bit (values, error scales and
// their floors), for the plain reference, every slip and every pair (a
// slip applied, then another) — so a candidate it refuses would have
// failed the whole comparison.
func TestSlipScreenIsTheWhole(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := screenDrawn(t)
		at := rapid.IntRange(0, p.XLen()-1).Draw(t, "worst")
		ratios := make([]float64, p.XLen())
		ratios[at] = 1e6
		whole, _ := mamba2.Prefill(p)
		s, ok := newSlipScreen(p, whole, ratios)
		if !ok {
			t.Fatalf("no screen for a failing y element %d", at)
		}
		L, H, P := p.Seqlen, p.Heads, p.Headdim
		same := func(what string, w *mamba2.Output, wsc *mamba2.Scale, r *mamba2.Output, rsc *mamba2.Scale) {
			if (w == nil) != (r == nil) {
				t.Fatalf("%s: the whole problem's reference is %v, the screened's %v", what, w != nil, r != nil)
			}
			if w == nil {
				return
			}
			for tt := 0; tt < s.l; tt++ {
				i := ((s.b*L+tt)*H+s.h)*P + s.pp
				for _, c := range [][2]float64{{w.Y[i], r.Y[tt]}, {wsc.Y[i], rsc.Y[tt]}, {wsc.TinyY[i], rsc.TinyY[tt]}} {
					if math.Float64bits(c[0]) != math.Float64bits(c[1]) {
						t.Fatalf("%s: step %d of row %d head %d channel %d: whole %v, screened %v", what, tt, s.b, s.h, s.pp, c[0], c[1])
					}
				}
			}
		}
		// a slip as the search takes it: applied to the whole problem
		// then restricted, or (a slip given by its reference) computed on
		// the restricted problem
		check := func(what string, q *mamba2.Problem, sl mamba2.Slip) {
			w, wsc := sl.Prefill(q)
			if sl.Apply != nil {
				a := *q
				if !sl.Apply(&a) {
					return
				}
				r, rsc := mamba2.Prefill(s.restrict(&a))
				same(what, w, wsc, r, rsc)
				return
			}
			if r, rsc := sl.Prefill(s.restrict(q)); r != nil {
				same(what, w, wsc, r, rsc)
			}
		}
		check("the reference", p, mamba2.Slip{Prefill: mamba2.Prefill})
		all := mamba2.Slips()
		for _, a := range all {
			if a.Prefill == nil {
				continue
			}
			check(a.Tag, p, a)
			q := *p
			if a.Apply == nil || !a.Apply(&q) {
				continue
			}
			for _, b := range all {
				if b.Prefill != nil {
					check(a.Tag+"+"+b.Tag, &q, b)
				}
			}
		}
	})
}

// The screen never refuses a slip that fits: a kernel that computes a
// slip (or a pair) exactly is admitted, and refused where it computes the
// plain reference instead (the screen can fail).
func TestSlipScreenAdmitsTheFit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := screenDrawn(t)
		all := mamba2.Slips()
		sl := rapid.SampledFrom(all).Draw(t, "slip")
		if sl.Prefill == nil {
			return
		}
		got, _ := sl.Prefill(p)
		if got == nil {
			return
		}
		want, sc := mamba2.Prefill(p)
		_, ratios := ssdJudged(judge.PrefillArrays(p, got, want, sc))
		s, ok := newSlipScreen(p, got, ratios["y"])
		if !ok {
			return // y right: the states alone differ, which the screen leaves to the whole
		}
		if !s.admits(p, sl) {
			t.Fatalf("%s: the screen refuses the slip the kernel computes (row %d head %d channel %d through %d)", sl.Tag, s.b, s.h, s.pp, s.l)
		}
		plain := mamba2.Slip{Tag: "reference", Prefill: mamba2.Prefill}
		if s.admits(p, plain) {
			t.Fatalf("%s: the screen admits the plain reference where y fails (ratio %v)", sl.Tag, ratios["y"][((s.b*p.Seqlen+s.l-1)*p.Heads+s.h)*p.Headdim+s.pp])
		}
	})
}
