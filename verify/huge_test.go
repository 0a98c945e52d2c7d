package verify

import (
	"flag"
	"math/rand/v2"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

var flagHuge = flag.Bool("huge", false, "run TestHugeIndices: arrays past 2³¹ elements (about 80 GB of host memory and 30 GB of device memory; a GPU machine)")

// TestHugeIndices: sizes where 32-bit index arithmetic wraps, in float32
// with the method the library declares first.
//
//   - long rows: batch·dim·seqlen = 2³¹ + 128 (dim 8, seqlen 2²⁸ + 16), the
//     flat index of channel 7 passing 2³¹ 128 steps before its end;
//   - a wide carry: batch·dim·dstate = 257·32768·256 > 2³¹ with seqlen 1,
//     the size of a chunked kernel's buffer of chunk states
//     (batch·dim·chunks·dstate), last_state NULL.
//
// A full reference would need the error scale of 2³¹ elements; instead the
// states decay fast (a in −5…−1, Δ in ½…1: |Ā| ≤ e^{−½} per step), so a
// window of steps started 256 steps early from a zero state has the same
// reference to within e^{−64} relatively, and rows are independent: the
// first and last steps of every channel, and the first and last batch
// rows, are judged as problems of their own.
func TestHugeIndices(t *testing.T) {
	if !*flagHuge {
		t.Skip("-huge not set: arrays past 2³¹ elements need about 80 GB of host memory (scripts/gpu.sh, VERIFY_FLAGS=-huge)")
	}
	track(t)
	m, ok := firstDeclared(t, ssm.F32)
	if !ok {
		return
	}
	// Each case runs first at the harness's small size: a failure only at
	// the large one is diagnosed as the index wrapping (the large run may
	// leave the device unusable, so nothing is probed after it).
	for _, c := range []struct {
		name       string
		small, big func(t *testing.T)
		size       string
	}{
		{"long rows", func(t *testing.T) { hugeRows(t, m, 3, 3000) }, func(t *testing.T) { hugeRows(t, m, 8, 1<<28+16) },
			"batch·dim·seqlen = 2³¹ + 128"},
		{"wide carry", func(t *testing.T) { hugeCarry(t, m, 4, 8, 16) }, func(t *testing.T) { hugeCarry(t, m, 257, 32768, 256) },
			"batch·dim·dstate = 2155872256 > 2³¹ (a chunked kernel's buffer of chunk states)"},
	} {
		smallOK := t.Run(c.name+" small", c.small)
		if !t.Run(c.name, c.big) && smallOK && rep.WantDiagnosis(t.Name()+"/"+c.name, m, ssm.F32, false) {
			why := "fails only past 2³¹ elements (" + c.size + "); the same judgement passes at small sizes: " +
				"32-bit index arithmetic wraps (an int or uint32 offset or stride)"
			rep.AddDiagnosis(t.Name()+"/"+c.name, m, ssm.F32, false, report.Finding{Tag: "index-wrap", Cause: why})
			t.Logf("diagnosis [index-wrap]: %s", why)
		}
	}
}

// TestHugeIndicesHarness runs the same judgement at small sizes, where the
// whole reference is cheap: the windows must pass a correct library.
func TestHugeIndicesHarness(t *testing.T) {
	m, ok := firstDeclared(t, ssm.F32)
	if !ok {
		return
	}
	t.Run("long rows", func(t *testing.T) { hugeRows(t, m, 3, 3000) })
	t.Run("wide carry", func(t *testing.T) { hugeCarry(t, m, 4, 8, 16) })
}

func firstDeclared(t *testing.T, dt ssm.DType) (ssm.Method, bool) {
	for _, m := range ssm.Methods() {
		if judged(t.Name(), "huge scans of", m, dt, false, false) {
			return m, true
		}
	}
	return 0, false
}

// decaying is a real problem, with variable B and C in one group, whose
// states forget within a few steps.
func decaying(m ssm.Method, batch, dim, seqlen, dstate int) *ssm.Problem {
	r := rand.New(rand.NewPCG(31, 31))
	p := &ssm.Problem{Batch: batch, Dim: dim, Seqlen: seqlen, Dstate: dstate, Groups: 1, Method: m, VariableB: true, VariableC: true}
	uniform := func(n int, lo, hi float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(float32(lo + (hi-lo)*r.Float64()))
		}
		return s
	}
	p.U, p.Delta = uniform(batch*dim*seqlen, -1, 1), uniform(batch*dim*seqlen, 0.5, 1)
	p.A = uniform(dim*dstate, -5, -1)
	p.B, p.C = uniform(batch*dstate*seqlen, -1, 1), uniform(batch*dstate*seqlen, -1, 1)
	return p
}

// window is steps s … t1 of row (b, d) of p as a problem of its own.
func window(p *ssm.Problem, b, d, s, t1 int) *ssm.Problem {
	L, N := t1-s, p.Dstate
	row := (b*p.Dim + d) * p.Seqlen
	bc := func(v []float64) []float64 {
		out := make([]float64, 0, N*L)
		for n := 0; n < N; n++ {
			i := p.BCIndex(true, b, d, n, s)
			out = append(out, v[i:i+L]...)
		}
		return out
	}
	q := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: L, Dstate: N, Groups: 1, Method: p.Method, VariableB: true, VariableC: true,
		Softplus: p.Softplus, U: p.U[row+s : row+t1], Delta: p.Delta[row+s : row+t1], A: p.A[d*N : (d+1)*N], B: bc(p.B), C: bc(p.C)}
	if p.DeltaBias != nil {
		q.DeltaBias = p.DeltaBias[d : d+1]
	}
	return q
}

// judgeWindow judges the kernel's out[b][d][t0:t1] (and its last state when
// t1 is the end) on the window problem of steps t0−warm … t1 of row (b, d).
func judgeWindow(t *testing.T, p *ssm.Problem, out []float32, state []float32, b, d, t0, t1, warm int) {
	t.Helper()
	s := max(0, t0-warm)
	N, row := p.Dstate, (b*p.Dim+d)*p.Seqlen
	q := window(p, b, d, s, t1)
	ref, err := mamba1.Scan(q, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	got := &ssm.Output{Out: append([]float64(nil), ref.Out...), LastState: append([]float64(nil), ref.LastState...)}
	for i := t0; i < t1; i++ {
		got.Out[i-s] = float64(out[row+i])
	}
	if t1 == p.Seqlen && state != nil {
		for n := 0; n < N; n++ {
			got.LastState[n] = float64(state[(b*p.Dim+d)*N+n])
		}
	}
	c, err := judge.CompareScan(q, got, ssm.F32, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep.Add(t.Name(), p.Method, ssm.F32, false, c.Worst.Ratio, c.Worst.ULP, c.Passed(ssm.F32), c.Worst.String())
	if !c.Passed(ssm.F32) {
		t.Errorf("batch %d channel %d steps %d…%d (flat index from %d): worst %s", b, d, t0, t1, row+t0, c.Worst)
	}
}

func hugeRows(t *testing.T, m ssm.Method, dim, seqlen int) {
	p, err := fitProblem(t.Name(), decaying(m, 1, dim, seqlen, 2), ssm.F32)
	if err != nil {
		t.Skip(err)
	}
	b, err := lib.NewScanBuffers(p, ssm.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.RunScan(b); err != nil {
		t.Fatalf("declared supported, but %v (dim·seqlen = %d)", err, dim*seqlen)
	}
	for d := 0; d < dim; d++ {
		judgeWindow(t, p, b.Out.F32, b.LastState.F32, 0, d, 0, 512, 0)
		judgeWindow(t, p, b.Out.F32, b.LastState.F32, 0, d, seqlen-512, seqlen, 256)
	}
}

func hugeCarry(t *testing.T, m ssm.Method, batch, dim, dstate int) {
	if lib.MaxDstate() < dstate {
		t.Skipf("ssmk_max_dstate() = %d < %d", lib.MaxDstate(), dstate)
	}
	p, err := fitProblem(t.Name(), decaying(m, batch, dim, 1, dstate), ssm.F32)
	if err != nil {
		t.Skip(err)
	}
	b, err := lib.NewScanBuffers(p, ssm.F32)
	if err != nil {
		t.Fatal(err)
	}
	b.LastState = cudalib.Array{} // NULL: only the library's own carry buffer is that large
	if err := lib.RunScan(b); err != nil {
		t.Fatalf("declared supported, but %v (batch·dim·dstate = %d)", err, batch*dim*dstate)
	}
	for _, bb := range []int{0, batch - 2, batch - 1} {
		for _, d := range []int{0, dim / 2, dim - 1} {
			judgeWindow(t, p, b.Out.F32, nil, bb, d, 0, 1, 0)
		}
	}
	t.Logf("rows judged: batch 0, %d, %d × channels 0, %d, %d (the carry index of the last row is %d)",
		batch-2, batch-1, dim/2, dim-1, (batch*dim-1)*dstate)
}
