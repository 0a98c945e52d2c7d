package diagnose

import (
	"strings"
	"testing"

	"ssmverify/mamba2"
)

// TestSSDBackwardSliceRelations: Mamba-2 backwards whose forward is right
// and whose gradient no relation explains, made by an offset (group 0's dB
// from group 1's B, the initial states' gradient stored without its batch
// stride), are named by the slice relation their runs show; without a
// backward runner they are not.
func TestSSDBackwardSliceRelations(t *testing.T) {
	p, ct, out := ssdBackwardCase()
	var left []float64
	cts := map[*mamba2.Problem]*mamba2.Cotangent{} // the cotangent each probe ran with
	ctOf := func(q *mamba2.Problem) *mamba2.Cotangent { return cts[q] }
	cases := []struct {
		name, want string
		slip       func(q *mamba2.Problem, g *mamba2.Grads)
	}{
		// group 0's dB from group 1's B (an offset into the wrong group)
		{"dB of group 0 from group 1's B", "bwd:dB:b-input-head-crossed", func(q *mamba2.Problem, g *mamba2.Grads) {
			N, G := q.Dstate, q.Groups
			for r := 0; r < q.Batch*q.Seqlen; r++ {
				for n := 0; n < N; n++ {
					b := q.B[(r*G+G-1)*N+n]
					g.B[(r*G)*N+n] = 0.3 * b * b
				}
			}
		}},
		// the initial states' gradient stored without its batch stride:
		// row b written from element b, over row 0, and row 1's slots
		// left as the previous call left them
		{"dinitial_states without its batch stride", "bwd:dinitial_states:batch-stale", func(q *mamba2.Problem, g *mamba2.Grads) {
			w := q.Heads * q.Headdim * q.Dstate
			buf := make([]float64, len(g.InitialStates))
			copy(buf, left)
			for b := 0; b < q.Batch; b++ {
				copy(buf[b:b+w], g.InitialStates[b*w:(b+1)*w])
			}
			left = append([]float64(nil), g.InitialStates...)
			g.InitialStates = buf
		}},
		// dx of head 0 from the last group's B and dB of group 0 from
		// the last head's x (the heads' group map wrong both ways): each
		// gradient named by the input that crosses it
		{"dx by the last group's B, dB by the last head's x", "bwd:dx:b-input-head-crossed+bwd:dB:x-input-head-crossed", func(q *mamba2.Problem, g *mamba2.Grads) {
			N, G, H, P := q.Dstate, q.Groups, q.Heads, q.Headdim
			for r := 0; r < q.Batch*q.Seqlen; r++ {
				for k := 0; k < min(N, P); k++ {
					b := q.B[(r*G+G-1)*N+k]
					x := q.X[(r*H+H-1)*P+k]
					g.X[(r*H)*P+k] = 0.3 * b * b
					g.B[(r*G)*N+k] = 0.3 * x * x
				}
			}
		}},
		// dC from the cotangent of the head below its own (the head
		// offset negated in dy's pointer): only a change of the first
		// head's dy shows it
		{"dC from the head below's dy", "bwd:dC:dy-input-head-crossed", func(q *mamba2.Problem, g *mamba2.Grads) {
			g.C = mamba2.Grad(q, shiftedCotangent(q, ctOf(q), q.Headdim)).C
		}},
		// dC from the cotangent one token before its own (a row offset
		// off by one): a row's first token reads the row before's last,
		// which only a change of the first row's dy shows
		{"dC from the token before's dy", "bwd:dC:dy-input-batch-crossed", func(q *mamba2.Problem, g *mamba2.Grads) {
			g.C = mamba2.Grad(q, shiftedCotangent(q, ctOf(q), q.Heads*q.Headdim)).C
		}},
	}
	for _, c := range cases {
		left = nil
		runBwd := func(q *mamba2.Problem, qct *mamba2.Cotangent) (*mamba2.Output, *mamba2.Grads, error) {
			o, _ := mamba2.Prefill(q)
			g := mamba2.Grad(q, qct)
			cts[q] = qct
			c.slip(q, g)
			return o, g, nil
		}
		_, g, _ := runBwd(p, ct)
		f := SSDBackward(p, ct, out, g, nil, runBwd)
		if f.Tag != c.want {
			t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
		}
		if f := SSDBackward(p, ct, out, g, nil, nil); strings.Contains(f.Tag, "-crossed") || strings.Contains(f.Tag, "-stale") {
			t.Errorf("%s without a backward runner: diagnosis [%s] %s", c.name, f.Tag, f)
		}
	}
}

// shiftedCotangent is ct with y's cotangent read k elements before its own
// (zero before the array): an offset too small by k in a kernel's pointer
// into dy.
func shiftedCotangent(p *mamba2.Problem, ct *mamba2.Cotangent, k int) *mamba2.Cotangent {
	c := *ct
	c.Y = make([]float64, len(ct.Y))
	copy(c.Y[k:], ct.Y)
	return &c
}
