package diagnose

import (
	"math"
	"strings"
	"testing"

	"ssmverify/mamba2"
)

// TestSSDBackwardPathDecay: a backward whose dx (or dB) takes the
// cotangent of each chunk's end state into the chunk's steps through a
// decay with its exponent read wrong — the chunk's end negated (a
// kernel's dA_cs_last loaded with its sign flipped), dropped, the step's
// sign flipped, an exp2 for an exp — is named by the exponent fitted, the
// constants snapped to the slip's; a per-chunk factor that is no such
// exponent is not, nor is the reference.
func TestSSDBackwardPathDecay(t *testing.T) {
	p, ct, out := ssdBackwardCase()
	q := *p
	q.Chunk = 16
	p = &q
	ref := mamba2.Grad(p, ct)
	cut := mamba2.GradWithout(p, ct, mamba2.PathChunkState)
	L, H, Q := p.Seqlen, p.Heads, p.Chunk
	lo, hi := p.Limits()
	// the cumulative Δ·A of (row, step, head) within its chunk, and the
	// chunk's whole, written out here apart from the diagnosis' own
	cumAt := func(b, t, h int) (cum, end float64) {
		c0 := t / Q * Q
		for s := c0; s < min(c0+Q, L); s++ {
			d := mamba2.Delta(p.Dt[(b*L+s)*H+h], p.DtBias[h], p.Softplus, lo, hi) * p.A[h]
			if s <= t {
				cum += d
			}
			end += d
		}
		return cum, end
	}
	// rescaled is gradient full's chunk-state part times f(cum, end),
	// inner elements per (row, step, head)
	rescaled := func(full, cut []float64, inner int, f func(b, t, h int, cum, end float64) float64) []float64 {
		out := make([]float64, len(full))
		for i := range out {
			r := i / inner
			h, t, b := r%H, r/H%L, r/(H*L)
			cm, e := cumAt(b, t, h)
			out[i] = cut[i] + f(b, t, h, cm, e)*(full[i]-cut[i])
		}
		return out
	}
	exp := func(a, b float64) func(_, _, _ int, cum, end float64) float64 {
		return func(_, _, _ int, cum, end float64) float64 { return math.Exp(a*end + b*cum) }
	}
	for _, c := range []struct {
		name, want string
		grad       string
		f          func(b, t, h int, cum, end float64) float64
	}{
		{"dx with the chunk's end negated", "bwd:dx:decay(chunk-state,-2·end,0)", "dx", exp(-2, 0)},
		{"dx with the chunk's end dropped", "bwd:dx:decay(chunk-state,-end,0)", "dx", exp(-1, 0)},
		{"dx with the step's sign flipped", "bwd:dx:decay(chunk-state,0,2·t)", "dx", exp(0, 2)},
		{"dx through exp2", "bwd:dx:decay(chunk-state,-0.307·end,0.307·t)", "dx", exp(math.Ln2-1, 1-math.Ln2)},
		{"dB with the chunk's end negated", "bwd:dB:decay(chunk-state,-2·end,0)", "dB", exp(-2, 0)},
		// a factor per chunk that no exponent of the decay gives
		{"dx with each chunk's part times its index plus two", "", "dx", func(_, t, _ int, _, _ float64) float64 { return float64(t/Q + 2) }},
	} {
		g := mamba2.Grad(p, ct)
		switch c.grad {
		case "dx":
			g.X = rescaled(ref.X, cut.X, p.Headdim, c.f)
		case "dB":
			// a group per head in this case's layer? B's part is per
			// group: rescale on the ungrouped problem instead
			u := ssdUngrouped(p)
			uref, ucut := mamba2.Grad(u, ct), mamba2.GradWithout(u, ct, mamba2.PathChunkState)
			g = mamba2.Grad(u, ct)
			g.B = rescaled(uref.B, ucut.B, u.Dstate, c.f)
			uout, _ := mamba2.Prefill(u)
			f := SSDBackward(u, ct, uout, g, nil, nil)
			if f.Tag != c.want {
				t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
			}
			continue
		}
		f := SSDBackward(p, ct, out, g, nil, nil)
		switch {
		case c.want == "" && strings.Contains(f.Tag, "decay("):
			t.Errorf("%s: diagnosis [%s] %s; want no decay relation", c.name, f.Tag, f)
		case c.want != "" && f.Tag != c.want:
			t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
		}
	}
	// the reference itself: nothing to fit
	if f := SSDBackward(p, ct, out, mamba2.Grad(p, ct), nil, nil); f.Tag != "" {
		t.Errorf("the reference: diagnosis [%s] %s", f.Tag, f)
	}
}
