package kernels

import (
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestNarrowScan: every method, real and complex A, fp16 and bf16, with
// and without the options, within the error model of judge.CompareScan
// (float32 arithmetic plus the output's one rounding); plans compute what
// the scan computes, bit for bit; the inputs are left alone.
func TestNarrowScan(t *testing.T) {
	l := open(t)
	for _, dt := range ssm.NarrowDTypes() {
		for _, m := range ssm.Methods() {
			for _, isComplex := range []bool{false, true} {
				if !l.Capabilities(m, dt, isComplex).Supported() {
					continue // the CUDA build's complex A with 16-bit inputs (declared)
				}
				for fi, full := range []bool{false, true} {
					s := mamba1.Spec{Batch: 2, Dim: 6, Seqlen: 37, Dstate: 5, Groups: 3, Method: m, Complex: isComplex,
						VariableB: full, VariableC: full, Softplus: full, HasD: full, HasZ: full, HasBias: full}
					c := judgedScan(t, l, s, uint64(fi+1), full, dt)
					assert.True(t, c.Passed(dt), "%v %v: %s", s, dt, c.Worst)
				}
			}
		}
		p := mamba1.Generate(mamba1.MambaBlock(ssm.RK4, 2, 8, 64, 16), 5)
		p.RoundTo(dt)
		want, err := l.Scan(p, dt)
		require.NoError(t, err)
		b, err := l.NewScanBuffers(p, dt)
		require.NoError(t, err)
		before := make([][]byte, 0)
		for _, in := range b.Inputs() {
			before = append(before, append([]byte(nil), in.Bytes()...))
		}
		plan, err := l.NewPlan(b)
		require.NoError(t, err)
		require.NoError(t, plan.Launch())
		out, last, err := plan.Fetch()
		require.NoError(t, err)
		plan.Close()
		assert.Equal(t, want.Out, out, "%v: a plan computes what ssmk_scan_fwd computes", dt)
		assert.Equal(t, want.LastState, last)
		for i, in := range b.Inputs() {
			assert.Equal(t, before[i], in.Bytes(), "%v: %s changed", dt, in.Name)
		}
	}
}

// judgedScan draws the problem of s (seed; with an initial state where h0),
// rounds its inputs to dt, runs it through l in dt and compares the outputs
// with the reference by judge.CompareScan's error model.
func judgedScan(t *testing.T, l *cudalib.Library, s mamba1.Spec, seed uint64, h0 bool, dt ssm.DType) judge.Comparison {
	t.Helper()
	p := mamba1.Generate(s, seed)
	if h0 {
		mamba1.SetInitialState(p, 3)
	}
	p.RoundTo(dt)
	got, err := l.Scan(p, dt)
	require.NoError(t, err, "%v %v", s, dt)
	c, err := judge.CompareScan(p, got, dt, nil, nil)
	require.NoError(t, err)
	return c
}
