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
	}
	for _, c := range cases {
		left = nil
		runBwd := func(q *mamba2.Problem, qct *mamba2.Cotangent) (*mamba2.Output, *mamba2.Grads, error) {
			o, _ := mamba2.Prefill(q)
			g := mamba2.Grad(q, qct)
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
