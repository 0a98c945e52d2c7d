package ssm

import (
	"math"
	"strings"
	"testing"
)

// block is a Mamba block's problem with every option, filled with distinct
// values so that sharing is visible.
func block(dim, groups, dstate int, complexA bool) *Problem {
	p := &Problem{Batch: 2, Dim: dim, Seqlen: 3, Dstate: dstate, Groups: groups, Complex: complexA,
		VariableB: true, VariableC: true, Softplus: true}
	l := p.Lens()
	fill := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i) + 0.5
		}
		return v
	}
	p.U, p.Delta, p.A, p.B, p.C = fill(l["U"]), fill(l["Delta"]), fill(l["A"]), fill(l["B"]), fill(l["C"])
	p.D, p.Z, p.DeltaBias = fill(dim), fill(l["Z"]), fill(dim)
	return p
}

// ggmlCPU is what the ggml adapter declares in Mamba-1 mode: zoh's scan
// without D, z and delta_bias, softplus always.
var ggmlCPU = Features{Options: OptSoftplusOn | OptConstantBC | OptVariableBC, DimMultiple: 1}

func TestFitOptions(t *testing.T) {
	p := block(4, 2, 3, false)
	q, notes, err := ggmlCPU.Fit(p)
	if err != nil {
		t.Fatal(err)
	}
	if q.D != nil || q.Z != nil || q.DeltaBias != nil || !q.Softplus {
		t.Fatalf("fitted %s", q.Shape())
	}
	if got := strings.Join(notes, "; "); got != "without D; without z; delta_bias folded into Δ" {
		t.Fatalf("notes %q", got)
	}
	// The steps are the problem's: softplus(Δ' ) = softplus(Δ + bias).
	for i := range q.Delta {
		if got, want := Softplus(q.Delta[i]), Softplus(p.Delta[i]+p.DeltaBias[i/p.Seqlen%p.Dim]); got != want {
			t.Fatalf("step %d: %v, want %v", i, got, want)
		}
	}
	if p.D == nil || p.Z == nil {
		t.Fatal("Fit modified its argument")
	}
	// Softplus on for a problem without it: Δ is its inverse, the same steps.
	p.Softplus, p.DeltaBias = false, nil
	q, notes, _ = ggmlCPU.Fit(p)
	if !q.Softplus || notes[len(notes)-1] != "softplus on, Δ its inverse (the same steps)" {
		t.Fatalf("softplus not turned on: %v", notes)
	}
	for i := range q.Delta {
		if got, want := Softplus(q.Delta[i]), p.Delta[i]; math.Abs(got-want) > 1e-14*want {
			t.Fatalf("step %d: %v, want %v", i, got, want)
		}
	}
	// Softplus off for a library that never applies it: applied ahead.
	off := Features{Options: OptAll &^ OptSoftplusOn, DimMultiple: 1}
	p.Softplus, p.DeltaBias = true, []float64{-3, 0.25, 1, 40}
	q, notes, _ = off.Fit(p)
	if q.Softplus || notes[0] != "softplus off, applied to Δ ahead" {
		t.Fatalf("softplus not turned off: %v", notes)
	}
	for i := range q.Delta {
		b := p.DeltaBias[i/p.Seqlen%p.Dim]
		if got, want := q.Delta[i]+b, Softplus(p.Delta[i]+b); math.Abs(got-want) > 1e-14*want {
			t.Fatalf("step %d: %v, want %v", i, got, want)
		}
	}
	if q, notes, _ := AllFeatures.Fit(p); q != p || notes != nil {
		t.Fatal("AllFeatures changed a problem")
	}
}

func TestFitHeads(t *testing.T) {
	for _, complexA := range []bool{false, true} {
		f := Features{Options: OptSoftplusOn | OptVariableBC, HeadDim: 2, DimMultiple: 1}
		p := block(8, 2, 3, complexA)
		q, _, err := f.Fit(p)
		if err != nil {
			t.Fatal(err)
		}
		w := q.ElemWords()
		for d := 0; d < q.Dim; d++ {
			h := d / 2 * 2
			for n := 0; n < q.Dstate; n++ {
				for k := 0; k < w; k++ {
					if got, want := q.A[(d*q.Dstate+n)*w+k], p.A[h*q.Dstate*w+k]; got != want {
						t.Fatalf("complex=%t A[%d][%d] = %v, want head %d's %v", complexA, d, n, got, h, want)
					}
				}
			}
			for b := 0; b < q.Batch; b++ {
				for s := 0; s < q.Seqlen; s++ {
					if got, want := q.Delta[(b*q.Dim+d)*q.Seqlen+s], p.Delta[(b*q.Dim+h)*q.Seqlen+s]+p.DeltaBias[h]; got != want {
						t.Fatalf("Δ[%d][%d][%d] = %v, want %v", b, d, s, got, want)
					}
				}
			}
		}
	}
}

func TestFitRefuses(t *testing.T) {
	for _, c := range []struct {
		f    Features
		p    *Problem
		want string
	}{
		{Features{Options: OptAll, DimMultiple: 128}, block(64, 1, 16, false), "multiples of 128"},
		{Features{Options: OptAll, DimMultiple: 1, MaxGroups: 1}, block(4, 2, 16, false), "at most 1"},
		{Features{Options: OptAll, DimMultiple: 1, Dstates: 1 << 16}, block(4, 1, 16, false), "dstate = 16"},
		{Features{Options: OptAll, DimMultiple: 1, HeadDim: 4}, block(8, 4, 3, false), "heads of 4"},
		{Features{Options: OptSoftplusOn | OptVariableBC, DimMultiple: 1}, func() *Problem { p := block(4, 1, 3, false); p.VariableB = false; return p }(), "variable B/C only"},
		{Features{Options: OptSoftplusOn | OptConstantBC, DimMultiple: 1}, block(4, 1, 3, false), "constant B/C only"},
		{Features{Options: OptD | OptVariableBC, DimMultiple: 1}, block(4, 1, 3, false), "neither softplus"},
		{Features{Options: 1 << 9, DimMultiple: 1}, block(4, 1, 3, false), "reserved"},
		{Features{Options: OptAll}, block(4, 1, 3, false), "dim_multiple = 0"},
	} {
		if _, _, err := c.f.Fit(c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v on %s: error %v, want one containing %q", c.f, c.p.Shape(), err, c.want)
		}
	}
}

func TestFeaturesSizes(t *testing.T) {
	for _, c := range []struct {
		f                        Features
		dim, dstate, groups      int
		wantDim, wantN, wantGrps int
	}{
		{AllFeatures, 5, 3, 1, 5, 3, 1},
		{Features{Options: OptAll, DimMultiple: 128, MaxGroups: 1, Dstates: 1 << 4}, 5, 3, 2, 128, 16, 1},
		{Features{Options: OptAll, DimMultiple: 1, Dstates: 1<<7 | 1<<8}, 64, 200, 1, 64, 256, 1},
		{Features{Options: OptAll, DimMultiple: 1, Dstates: 1<<7 | 1<<8}, 64, 300, 1, 64, 256, 1},
		{Features{Options: OptAll, DimMultiple: 1, HeadDim: 16}, 40, 8, 2, 48, 8, 1},
		{Features{Options: OptAll, DimMultiple: 1, HeadDim: 64}, 60, 8, 32, 64, 8, 1},
		{Features{Options: OptAll, DimMultiple: 1, HeadDim: 16}, 60, 8, 2, 64, 8, 2},
	} {
		d, n, g := c.f.Sizes(c.dim, c.dstate, c.groups)
		if d != c.wantDim || n != c.wantN || g != c.wantGrps {
			t.Errorf("%v: Sizes(%d, %d, %d) = %d, %d, %d; want %d, %d, %d", c.f, c.dim, c.dstate, c.groups, d, n, g, c.wantDim, c.wantN, c.wantGrps)
		}
		p := block(d, g, n, false)
		if _, _, err := c.f.Fit(p); err != nil && !strings.Contains(err.Error(), "B/C") {
			t.Errorf("%v: sizes %d, %d, %d do not fit: %v", c.f, d, n, g, err)
		}
	}
}

func TestFeaturesString(t *testing.T) {
	f := Features{Options: OptSoftplusOn | OptVariableBC, HeadDim: 64, DimMultiple: 1, Dstates: 1<<7 | 1<<8}
	want := "options: softplus on, variable B/C; Mamba-2 heads of 64 channels (A and Δ shared per head); dstate ∈ {128, 256}"
	if got := f.String(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestExact(t *testing.T) {
	p := block(4, 1, 3, false)
	p.Softplus = false
	if _, err := ggmlCPU.Exact(p); err == nil || !strings.Contains(err.Error(), "D is not taken") {
		t.Fatalf("D dropped accepted: %v", err)
	}
	p.D, p.Z = nil, nil
	q, err := ggmlCPU.Exact(p)
	if err != nil || !q.Softplus || q.DeltaBias != nil {
		t.Fatalf("steps kept: %v", err)
	}
	p.Delta[0] = -1
	if _, err := ggmlCPU.Exact(p); err == nil {
		t.Fatal("softplus over Δ ≤ 0 accepted")
	}
	heads := Features{Options: OptAll, HeadDim: 2, DimMultiple: 1}
	if _, err := heads.Exact(block(4, 1, 3, false)); err == nil {
		t.Fatal("unshared heads accepted")
	}
	shared, _, _ := heads.Fit(block(4, 1, 3, false))
	if _, err := heads.Exact(shared); err != nil {
		t.Fatalf("shared heads refused: %v", err)
	}
}
