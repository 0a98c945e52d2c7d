package verify

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

// The backward pass in the 16-bit input types (ABI: THE BACKWARD PASS,
// 16-bit inputs; SSMK_CAP_BWD_NARROW): dout and the input-typed gradients
// (du, ddelta, dz, variable dB/dC) in fp16 or bf16, the weights' in float.
// Every test rounds the problem and the cotangent to the types the kernel
// reads (backwardChecked), so that the float64 reference differentiates
// exactly what the kernel sees, and judges each input-typed gradient with
// its one rounding beyond the float32 model (judge.CompareGrads).

// TestNarrowBackwardAccuracy: TestBackwardAccuracy's property in fp16 and
// bf16, every declared method and kind of A.
func TestNarrowBackwardAccuracy(t *testing.T) {
	track(t)
	backwardAccuracy(t, t.Name(), backwardCombos(t.Name(), ssm.NarrowDTypes()))
}

// TestNarrowBackwardEveryCombination: TestBackwardEveryCombination's fixed
// cases in fp16 and bf16, and a row across the chunks of a GPU backward
// (backwardChunkSeqlens' first).
func TestNarrowBackwardEveryCombination(t *testing.T) {
	track(t)
	combos := backwardCombos(t.Name(), ssm.NarrowDTypes())
	backwardEveryCombination(t, t.Name(), combos)
	for _, cb := range combos {
		s := mamba1.MambaBlock(cb.m, 1, 2, backwardChunkSeqlens[0], 3)
		s.Complex = cb.isComplex
		name := fmt.Sprintf("%v %v %s seqlen %d", cb.m, cb.dt, ssm.AKind(cb.isComplex), s.Seqlen)
		backwardCase(t, t.Name(), name, cb, mamba1.Generate(within(s, cb.dt), 5), 5)
	}
}

// TestNarrowBackwardSpecialValues: where the 16-bit storage of the
// gradients shows, one channel group per case:
//   - a group of 64 channels whose variable dB and dC are sums of 64 terms
//     of one sign: summed in float and rounded once they are right, summed
//     in the input type they drift by up to 64 roundings;
//   - du past fp16's range: dout·D = 40000·2 must be +Inf in fp16
//     (bf16 holds it), the others finite;
//   - dz with y near ties of the 16-bit type: dz formed from y rounded to
//     16 bits (as from a 16-bit out read back) errs by up to half an ulp
//     more than dz rounded once;
//   - ddelta through softplus at δ = −6 … 6 with steps of the 16-bit type.
func TestNarrowBackwardSpecialValues(t *testing.T) {
	track(t)
	type special struct {
		name string
		p    func(m ssm.Method) (*ssm.Problem, *ssm.Cotangent)
	}
	ones := func(n int, v float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	cases := []special{
		{"64-channel group sums", func(m ssm.Method) (*ssm.Problem, *ssm.Cotangent) {
			s := mamba1.Spec{Batch: 1, Dim: 64, Seqlen: 40, Dstate: 2, Groups: 1, Method: m, VariableB: true, VariableC: true}
			p := mamba1.Generate(s, 3)
			for i := range p.U {
				p.U[i] = 0.5 + 0.25*math.Sin(float64(i))
				p.Delta[i] = 0.05 + 0.01*float64(i%7)
			}
			for i := range p.A {
				p.A[i] = -0.5
			}
			return p, &ssm.Cotangent{Out: ones(p.OutLen(), 1)}
		}},
		{"du past fp16's range", func(m ssm.Method) (*ssm.Problem, *ssm.Cotangent) {
			p := handProblem(m, []float64{1, 1, 1, 1}, 1, -1, 1, 1)
			p.D = []float64{2}
			return p, &ssm.Cotangent{Out: []float64{40000, 1000, -40000, 3}}
		}},
		{"dz near ties", func(m ssm.Method) (*ssm.Problem, *ssm.Cotangent) {
			u := make([]float64, 64)
			for i := range u {
				u[i] = 1 + float64(i)/64
			}
			p := handProblem(m, u, 0.1, -0.3, 1.0078125, 0.99609375)
			p.Z = make([]float64, len(u))
			for i := range p.Z {
				p.Z[i] = -2 + 4*float64(i)/63
			}
			return p, &ssm.Cotangent{Out: ones(len(u), 1)}
		}},
		{"softplus steps", func(m ssm.Method) (*ssm.Problem, *ssm.Cotangent) {
			p := handProblem(m, ones(64, 1), 0, -0.7, 1, 1)
			for i := range p.Delta {
				p.Delta[i] = -6 + 12*float64(i)/63
			}
			p.Softplus, p.DeltaBias = true, []float64{0.25}
			return p, &ssm.Cotangent{Out: ones(64, 0.5)}
		}},
	}
	for _, cb := range backwardCombos(t.Name(), ssm.NarrowDTypes()) {
		if cb.isComplex {
			continue
		}
		for _, c := range cases {
			p, ct := c.p(cb.m)
			cmp, pr, ctr, err := backwardChecked(t.Name(), p, ct, cb.dt, false)
			if errors.Is(err, errNotTaken) {
				continue
			}
			if err != nil {
				t.Errorf("%s %v %v: declared supported, but %v", c.name, cb.m, cb.dt, err)
				continue
			}
			if !cmp.Passed(cb.dt) {
				t.Errorf("%s %v %v: %s%s", c.name, cb.m, cb.dt, gradFailure(cmp, cb.dt), backwardDiagnosis(t.Name(), pr, ctr, cb.dt))
			}
		}
	}
}

// TestGradErrorByDType: what each method's gradients lose in each dtype
// the library's backward declares, end to end: the backward of one
// Mamba-block problem (2×16×256×16, real A, dout alone) with the inputs and
// dout rounded to what that dtype reads, against the float64 gradients of
// the unrounded ones, as mean relative errors of du, ddelta, dA and the
// variable dB (errorStats: over elements above 1e-3 of the largest). Each
// run must also pass the error model against the reference of its own
// rounded inputs (judge.CompareGrads).
func TestGradErrorByDType(t *testing.T) {
	track(t)
	table := report.Table{Name: "gradient error by dtype against the float64 gradients of the unrounded inputs (Mamba block 2×16×256×16, real A, dout alone; mean relative error)",
		Columns: []string{"method", "dtype", "du", "ddelta", "dA", "dB", "max ratio"}}
	for _, m := range ssm.Methods() {
		s := mamba1.MambaBlock(m, 2, 16, 256, 16)
		exact, err := fitProblem(t.Name(), mamba1.Generate(within(s, ssm.F32), 5), ssm.F32)
		if err != nil {
			continue
		}
		ct := mamba1.NewCotangent(exact, 5, false)
		exactGrad, err := mamba1.ScanGrad(exact, ct, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []ssm.DType{ssm.F64, ssm.F32, ssm.BF16, ssm.F16} {
			c := lib.Capabilities(m, dt, false)
			if !c.Backward() || !lib.HasBackward() {
				rep.Unsupported(t.Name(), fmt.Sprintf("the backward of %v %v (declared unsupported)", m, dt))
				continue
			}
			cmp, got, _, _, err := backwardJudged(t.Name(), exact, ct, dt, false)
			if errors.Is(err, errNotTaken) {
				continue
			}
			if err != nil {
				t.Errorf("%v %v: declared supported, but %v", m, dt, err)
				continue
			}
			if !cmp.Passed(dt) {
				t.Errorf("%v %v: %s", m, dt, gradFailure(cmp, dt))
			}
			row := []string{m.String(), dt.String()}
			for _, f := range []struct{ got, want []float64 }{{got.U, exactGrad.U}, {got.Delta, exactGrad.Delta}, {got.A, exactGrad.A}, {got.B, exactGrad.B}} {
				_, _, mean, _ := errorStats(f.got, f.want)
				row = append(row, fmt.Sprintf("%.2g", mean))
			}
			table.Rows = append(table.Rows, append(row, fmt.Sprintf("%.3g", cmp.Worst().Ratio)))
		}
	}
	logTable(t, withBlank(table))
	rep.AddTable(table)
}
