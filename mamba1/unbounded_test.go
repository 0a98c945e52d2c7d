package mamba1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// Where Scan's float64 evaluation stays in range, the unbounded one is the
// same arithmetic: equal within the error model (bit for bit but where an
// intermediate is subnormal in float64 and not in the unbounded range), and
// finite wherever Scan is; outputs and last state, from 0 or from an initial
// state (the unbounded scan once started every row from 0, and the fuzz
// judge, which puts it in place of a row that overflows, then held a
// kernel's state scanned from h0 to one scanned from 0:
// FuzzScan/c0579dd63ba65369).
func TestPropUnboundedMatchesScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := mamba1.Problems(mamba1.Small).Draw(t, "case")
		p := c.Problem
		if rapid.Bool().Draw(t, "initial state") {
			mamba1.SetInitialState(p, rapid.Uint64().Draw(t, "seed"))
		}
		ref, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err)
		same := func(what string, i int, s, w, scale, tiny float64) {
			if math.IsNaN(s) || math.IsInf(s, 0) || math.Float64bits(s) == math.Float64bits(w) {
				return
			}
			if r := mamba1.Ratio(s-w, scale, tiny, ssm.Float64); !(r <= 1) {
				t.Fatalf("%v: %s[%d]: Scan %.17g, unbounded %.17g: ratio %.3g > 1", c, what, i, s, w, r)
			}
		}
		S := p.StateLen() / (p.Batch * p.Dim)
		for row := 0; row < p.Batch*p.Dim; row++ {
			out, state, err := mamba1.ScanRowUnbounded(p, row/p.Dim, row%p.Dim)
			require.NoError(t, err)
			for tt, w := range out {
				i := row*p.Seqlen + tt
				same("out", i, ref.Out[i], w, sc.Out[i], sc.TinyOut[i])
			}
			for k, w := range state {
				i := row*S + k
				same("last_state", i, ref.LastState[i], w, sc.LastState[i/(S/p.Dstate)], sc.TinyState[i/(S/p.Dstate)])
			}
		}
	})
}

// A state beyond float64's range that a later Ā of 0 annihilates: Scan meets
// ∞·0 = NaN, the unbounded evaluation gives the finite value (zoh, a = −1:
// Δ·B·u = 1e300 at step 0, multiplied by e^700 at step 1, by e^(−1e30) = 0
// at step 2, which adds Δ·B·u = 1e30). Real and complex A alike; an Ā that
// overflows itself (x = 800) stays non-finite in both.
func TestScanRowUnbounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		complex bool
		delta   []float64
		want    []float64 // the unbounded outputs
		scanNaN bool      // Scan's last output is NaN
	}{
		{"real: the state overflows, then Ā = 0", false, []float64{1, -700, 1e30}, []float64{1e300, math.Inf(1), 1e30}, true},
		{"complex: the state overflows, then Ā = 0", true, []float64{1, -700, 1e30}, []float64{2e300, math.Inf(1), 2e30}, true},
		{"real: Ā itself overflows", false, []float64{1, -800, 1}, []float64{1e300, math.Inf(1), math.Inf(1)}, false},
		{"real: in range, as Scan", false, []float64{1, 2, 3}, nil, false},
	} {
		p := &ssm.Problem{Batch: 1, Dim: 2, Seqlen: 3, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			VariableB: true, VariableC: true, U: []float64{1e300, 0, 1, 1, 2, 3}, Delta: append(tc.delta, 1, 1, 1),
			A: []float64{-1, -2}, B: []float64{1, 1, 1}, C: []float64{1, 1, 1}}
		if tc.complex { // a = −1 + 0i and −2 + 0i; B, C = 1 + 0i: twice the real outputs (2·Re Σ C·h)
			p.Complex, p.A, p.B, p.C = true, []float64{-1, 0, -2, 0}, []float64{1, 0, 1, 0, 1, 0}, []float64{1, 0, 1, 0, 1, 0}
		}
		ref, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err, tc.name)
		out, state, err := mamba1.ScanRowUnbounded(p, 0, 0)
		require.NoError(t, err, tc.name)
		if tc.want == nil {
			assert.Equal(t, ref.Out[:3], out, tc.name)
		} else {
			assert.Equal(t, tc.want, out, tc.name)
		}
		assert.Equal(t, tc.scanNaN, math.IsNaN(ref.Out[2]), "%s: Scan's last output %v", tc.name, ref.Out[2])
		assert.Len(t, state, len(ref.LastState)/2, tc.name)
		// The other row is ordinary: the same bits as Scan.
		out1, _, err := mamba1.ScanRowUnbounded(p, 0, 1)
		require.NoError(t, err, tc.name)
		assert.Equal(t, ref.Out[3:], out1, tc.name)
	}
}

func TestScanRowUnboundedValidation(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		U: []float64{1}, Delta: []float64{1}, A: []float64{-1}, B: []float64{1}, C: []float64{1}}
	for _, row := range [][2]int{{1, 0}, {0, 1}, {-1, 0}} {
		_, _, err := mamba1.ScanRowUnbounded(p, row[0], row[1])
		assert.ErrorContains(t, err, "outside batch 1 × dim 1", "row %v", row)
	}
	p.U = nil
	_, _, err := mamba1.ScanRowUnbounded(p, 0, 0)
	assert.ErrorContains(t, err, "U", "an invalid problem is rejected as Scan rejects it")
}
