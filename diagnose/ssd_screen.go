package diagnose

import (
	"math"

	"ssmverify/judge"
	"ssmverify/mamba2"
)

// A catalogued slip fits a failed prefill only where its reference
// matches the kernel's every element. The search tries every slip and
// every pair of slips (some two hundred references of the whole problem
// for a failure no pair explains), so each candidate is screened first on
// one channel: the one whose y fails worst, in its row, through the end of
// that element's chunk. Mamba-2's reference is separable there — a
// channel of a head is a recurrence of its own (mamba2.Problem.ChannelsOf),
// a row is its own problem, and y_t depends on steps up to t alone — so
// the screened reference equals the whole one at those elements, bit for
// bit (TestSlipScreenIsTheWhole), and a slip the screen refuses would have
// failed the whole comparison there. The screen changes no verdict; it
// makes a refused candidate cost one channel's prefix rather than the
// problem.

// slipScreen is the channel a slip must explain first, and the kernel's y
// there.
type slipScreen struct {
	b, h, pp, l int
	packed      bool
	gotY        []float64 // the kernel's y at (b, t, h, pp), t < l
}

// newSlipScreen is the screen of p's failure, at y's worst element; false
// where y passes (the failure is in the states, which the screen does
// not see) or the ratios do not fit p.
func newSlipScreen(p *mamba2.Problem, got *mamba2.Output, yRatios []float64) (slipScreen, bool) {
	L, H, P := p.Seqlen, p.Heads, p.Headdim
	if got == nil || len(yRatios) != p.XLen() || len(got.Y) != p.XLen() || L == 0 {
		return slipScreen{}, false
	}
	th := judge.Threshold(p.DType)
	worst, at := 0.0, -1
	for i, r := range yRatios {
		if math.IsNaN(r) {
			at = i
			break // NaN: the worst there is
		}
		if r > th && (at < 0 || r > worst) {
			worst, at = r, i
		}
	}
	if at < 0 {
		return slipScreen{}, false
	}
	pp, h, t, b := at%P, at/P%H, at/(H*P)%L, at/(L*H*P)
	s := slipScreen{b: b, h: h, pp: pp, l: L, packed: p.CuSeqlens != nil}
	if !s.packed {
		// through the end of t's chunk: a slip of the chunk's products
		// shows in the chunk, not before it
		if q := p.Chunk; q > 0 {
			s.l = min(L, (t/q+1)*q)
		} else {
			s.l = t + 1
		}
	} else {
		s.b = 0 // a packed row is the problem's one row
	}
	s.gotY = make([]float64, s.l)
	for tt := 0; tt < s.l; tt++ {
		s.gotY[tt] = got.Y[((s.b*L+tt)*H+h)*P+pp]
	}
	return s, true
}

// restrict is q's screened part: row b's first l steps (the packed row
// whole), head h's channel pp alone.
func (s slipScreen) restrict(q *mamba2.Problem) *mamba2.Problem {
	r := q
	if !s.packed {
		r = q.Row(s.b, 0, s.l)
	}
	return r.ChannelsOf([]int{s.h}, []int{s.pp})
}

// admits reports whether slip sl, applied to q (a problem the search may
// already have applied another slip to), can fit: false only where its
// reference fails on the screened channel; true where the screen cannot
// tell (the slip does not apply to the part alone).
func (s slipScreen) admits(q *mamba2.Problem, sl mamba2.Slip) bool {
	var r *mamba2.Problem
	var want *mamba2.Output
	var sc *mamba2.Scale
	if sl.Apply != nil {
		// applied to the whole problem first: a slip of the heads' groups
		// is not one of a head alone
		w := *q
		if !sl.Apply(&w) {
			return false // its Prefill is nil on q: no fit either way
		}
		r = s.restrict(&w)
		want, sc = mamba2.Prefill(r)
	} else {
		r = s.restrict(q)
		if want, sc = sl.Prefill(r); want == nil {
			return true
		}
	}
	if len(want.Y) != len(s.gotY) {
		return true
	}
	y := judge.PrefillArrays(r, &mamba2.Output{Y: s.gotY}, want, sc)[:1]
	return ssdPasses(y)
}
