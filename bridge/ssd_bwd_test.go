package bridge

import (
	"math"
	"testing"

	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// TestNumPyAdjointAgrees holds the numpy path's hand-written backward
// (ssd_bwd, written independently of mamba2.Grad) to the Go adjoint in
// float64, every element of every gradient, on problems with packed
// sequences and an initial state, groups, D, z, the bias and softplus, and
// the clamp. Both are the same recurrence's adjoint in float64, summed in
// different orders (numpy's einsum over P and N, the Go loop per channel):
// they differ by a few ulps of the sums' magnitudes, 10⁻¹² of a gradient's
// largest element asked. With the backward's slips planted the agreement
// fails (TestNumPyAdjointSlipsFail), so this can fail.
func TestNumPyAdjointAgrees(t *testing.T) { adjointAgreement(t, "", "") }

// TestNumPyAdjointSlipsFail: each of the numpy backward's planted slips
// breaks the agreement in the gradient it touches.
func TestNumPyAdjointSlipsFail(t *testing.T) {
	for slip, grad := range map[string]string{"bwd-da-no-delta": "A", "bwd-dx-no-skip": "x", "bwd-dinit-undecayed": "initial_states"} {
		t.Run(slip, func(t *testing.T) { adjointAgreement(t, slip, grad) })
	}
}

// adjointAgreement compares ssd_bwd with slip planted to mamba2.Grad; with
// a slip the gradient named wrong must differ on some case and no other.
func adjointAgreement(t *testing.T, slip, wrong string) {
	needPython(t)
	var args []string
	if slip != "" {
		args = []string{"slip=" + slip}
	}
	w, err := Start(Spec{Adapter: "numpy_ssd", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	k := &SSD{W: w}
	differed := false
	for _, c := range adjointCases() {
		t.Run(c.name, func(t *testing.T) {
			p := mamba2.Generate(c.o, 3)
			ct := mamba2.GenerateCotangent(p, 5, c.states)
			out, g, err := k.Backward(p, ct)
			if err != nil {
				t.Fatal(err)
			}
			want := mamba2.Grad(p, ct)
			ref, _ := mamba2.Prefill(p)
			for _, f := range gradFields(g, want) {
				if (f.got == nil) != (f.want == nil) || len(f.got) != len(f.want) {
					t.Fatalf("d%s: %d elements, want %d", f.name, len(f.got), len(f.want))
				}
				d, big := maxDiff(f.got, f.want)
				switch ok := d <= 1e-12*math.Max(big, 1e-3); {
				case f.name == wrong && !ok:
					differed = true
				case !ok:
					t.Errorf("d%s differs from mamba2.Grad by %.3g (largest element %.3g)", f.name, d, big)
				}
			}
			if d, big := maxDiff(out.Y, ref.Y); !(d <= 1e-12*math.Max(big, 1)) {
				t.Errorf("the backward's y differs from the reference's by %.3g", d)
			}
		})
	}
	if wrong != "" && !differed {
		t.Errorf("slip %s: d%s agrees with mamba2.Grad on every case", slip, wrong)
	}
}

type adjointCase struct {
	name   string
	o      mamba2.Options
	states bool // cotangents of the returned states too
}

func adjointCases() []adjointCase {
	f64 := func(o mamba2.Options) mamba2.Options { o.DType, o.StateDType, o.Chunk = ssm.F64, ssm.F64, 4; return o }
	return []adjointCase{
		{"plain", f64(mamba2.Options{Batch: 2, Seqlen: 9, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3}), false},
		{"all", f64(mamba2.Options{Batch: 2, Seqlen: 9, Heads: 4, Headdim: 2, Groups: 2, Dstate: 3, D: true, Z: true, DtBias: true, Softplus: true, InitialStates: true}), true},
		{"packed+initial", f64(mamba2.Options{Batch: 1, Seqlen: 11, Heads: 2, Headdim: 3, Groups: 1, Dstate: 3, D: true, Softplus: true, DtBias: true, InitialStates: true, CuSeqlens: []int{0, 4, 5, 11}}), true},
		{"D per channel+z", f64(mamba2.Options{Batch: 2, Seqlen: 9, Heads: 2, Headdim: 3, Groups: 1, Dstate: 2, D: true, DPerChannel: true, Z: true}), true},
		{"clamped", f64(mamba2.Options{Batch: 1, Seqlen: 10, Heads: 2, Headdim: 2, Groups: 2, Dstate: 2, Softplus: true, DtBias: true, DtMin: 0.004, DtMax: 0.05}), true},
	}
}

type gradField struct {
	name      string
	got, want []float64
}

func gradFields(g, w *mamba2.Grads) []gradField {
	return []gradField{{"x", g.X, w.X}, {"dt", g.Dt, w.Dt}, {"A", g.A, w.A}, {"B", g.B, w.B}, {"C", g.C, w.C}, {"D", g.D, w.D},
		{"z", g.Z, w.Z}, {"dt_bias", g.DtBias, w.DtBias}, {"initial_states", g.InitialStates, w.InitialStates}}
}

func maxDiff(a, b []float64) (d, big float64) {
	for i := range b {
		d = math.Max(d, math.Abs(a[i]-b[i]))
		big = math.Max(big, math.Abs(b[i]))
	}
	return d, big
}

// TestBackwardChecksCotangents: a cotangent of the wrong length is an
// error naming it, before any call.
func TestBackwardChecksCotangents(t *testing.T) {
	k := &SSD{}
	p := smallProblem()
	for _, ct := range []*mamba2.Cotangent{nil, {Y: make([]float64, 3)}, {Y: make([]float64, p.XLen()), FinalStates: make([]float64, 2)}} {
		if _, _, err := k.Backward(p, ct); err == nil {
			t.Errorf("cotangent %v: no error", ct)
		}
	}
}
