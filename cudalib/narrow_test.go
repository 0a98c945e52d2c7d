package cudalib

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/gen"
	"ssmverify/judge"
	"ssmverify/ssm"
)

// TestNarrowBuffers: a 16-bit dtype's buffers hold u, Δ, z, out and the
// variable one of B and C as its bit patterns, the weights and the states
// as float32, and ScanBytes counts each in its own size.
func TestNarrowBuffers(t *testing.T) {
	l := open(t)
	s := gen.MambaBlock(ssm.ZOH, 2, 4, 16, 8)
	s.VariableC = false
	p := gen.New(s, 1)
	gen.SetInitialState(p, 2)
	for _, dt := range ssm.NarrowDTypes() {
		b, err := l.NewScanBuffers(p, dt)
		require.NoError(t, err)
		for _, a := range []NamedArray{{"u", b.U}, {"delta", b.Delta}, {"z", b.Z}, {"B", b.B}, {"out", b.Out}} {
			assert.True(t, a.N16 != nil && a.Narrow == dt, "%v: %s in 16 bits", dt, a.Name)
		}
		for _, a := range []NamedArray{{"A", b.A}, {"C", b.C}, {"D", b.D}, {"delta_bias", b.DeltaBias}, {"initial_state", b.InitialState}, {"last_state", b.LastState}} {
			assert.NotNil(t, a.F32, "%v: %s in float32", dt, a.Name)
		}
		seq, vb := int64(2*4*16), int64(2*1*8*16)
		weights := int64(4*8 /* A */ + 4*8 /* C */ + 4 + 4 /* D, bias */ + 2*4*8 /* last state */)
		assert.Equal(t, (4*seq+vb)*2+weights*4, ScanBytes(p, dt), "%v", dt)
	}
}

// TestNarrowScan: every method, real and complex A, fp16 and bf16, with
// and without the options, within the error model of judge.CompareScan
// (float32 arithmetic plus the output's one rounding); plans compute what
// the scan computes, bit for bit; the inputs are left alone; and
// ssmk_discretize refuses the 16-bit dtypes (scan only).
func TestNarrowScan(t *testing.T) {
	l := open(t)
	for _, dt := range ssm.NarrowDTypes() {
		for _, m := range ssm.Methods() {
			for _, isComplex := range []bool{false, true} {
				if !l.Capabilities(m, dt, isComplex).Supported() {
					continue // the CUDA build's complex A with 16-bit inputs (declared)
				}
				for fi, full := range []bool{false, true} {
					s := gen.Spec{Batch: 2, Dim: 6, Seqlen: 37, Dstate: 5, Groups: 3, Method: m, Complex: isComplex,
						VariableB: full, VariableC: full, Softplus: full, HasD: full, HasZ: full, HasBias: full}
					c := judgedScan(t, l, s, uint64(fi+1), full, dt)
					assert.True(t, c.Passed(dt), "%v %v: %s", s, dt, c.Worst)
				}
			}
		}
		p := gen.New(gen.MambaBlock(ssm.RK4, 2, 8, 64, 16), 5)
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
		_, _, err = l.Discretize(ssm.ZOH, dt, false, []float64{1}, []float64{-1})
		assert.ErrorContains(t, err, "ssmk_discretize has no 16-bit dtypes")
		err = l.DiscretizeInto(ssm.ZOH, false, NewArray([]float64{1}, dt), NewArray([]float64{-1}, dt), zeros(1, dt), zeros(1, dt))
		assert.ErrorContains(t, err, "ssmk_discretize has no 16-bit dtypes")
		// and the library itself refuses them (SSMK_EUNSUPPORTED), whatever its caller
		one := []uint16{0x3c00}
		st := l.fn.discretize(0, int32(dt), 0, 1, unsafePtr(one), unsafePtr(one), unsafePtr(one), unsafePtr(one))
		assert.Equal(t, int32(EUnsupported), st, "%v: ssmk_discretize's status", dt)
	}
}

// judgedScan draws the problem of s (seed; with an initial state where h0),
// rounds its inputs to dt, runs it through l in dt and compares the outputs
// with the reference by judge.CompareScan's error model.
func judgedScan(t *testing.T, l *Library, s gen.Spec, seed uint64, h0 bool, dt ssm.DType) judge.Comparison {
	t.Helper()
	p := gen.New(s, seed)
	if h0 {
		gen.SetInitialState(p, 3)
	}
	p.RoundTo(dt)
	got, err := l.Scan(p, dt)
	require.NoError(t, err, "%v %v", s, dt)
	c, err := judge.CompareScan(p, got, dt, nil, nil)
	require.NoError(t, err)
	return c
}

func unsafePtr(s []uint16) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
