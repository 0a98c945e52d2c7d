package mamba1

import (
	"math"
	"reflect"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"ssmverify/ssm"
)

// checkFloat32Range fails t if some intermediate of p's scan, by the
// reference's magnitude bounds, leaves float32's range: the states and the
// outputs of any order of evaluation (Mag), the states on the way to them
// (PathMag) and the products of Ā over runs of steps that a time-parallel
// scan forms (Decay).
func checkFloat32Range(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string, p *ssm.Problem) {
	t.Helper()
	sc, err := ErrorScale(p)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, b := range []struct {
		name string
		v    []float64
	}{{"MagState", sc.MagState}, {"MagOut", sc.MagOut}, {"PathMagState", sc.PathMagState}, {"PathMagOut", sc.PathMagOut},
		{"DecayState", sc.DecayState}, {"DecayOut", sc.DecayOut}} {
		for i, v := range b.v {
			if !(v <= math.MaxFloat32) {
				t.Fatalf("%s: %s[%d] = %g exceeds float32's largest %g", what, b.name, i, v, math.MaxFloat32)
			}
		}
	}
}

// Stress promises inputs that stretch the kernels but keep every
// intermediate of the scan finite in float32: a float32 kernel cannot be
// expected to produce an exact result beyond 3.4e38, so a problem that
// needs one is a generator bug, not a test of the kernel.
func TestStressStaysInFloat32Range(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := Problems(Limits{MaxBatch: 2, MaxDim: 8, MaxSeqlen: 64, MaxDstate: 64,
			ExtraDstate: []int{256}, Dists: []Dist{Stress}}).Draw(rt, "case")
		checkFloat32Range(rt, c.String(), c.Problem)
	})
}

// TestStressBilinearAwayFromPole: bilinear's Ā = (1 + x/2)/(1 − x/2) has a
// pole at x = Δ·a = 2 and grows faster than e^x before it. Cases the
// accuracy suite drew in CI, where a positive a put Δ·a within 0.01 of the
// pole for many steps: the float64 reference reached 6.6e38 and the float32
// state overflowed.
func TestStressBilinearAwayFromPole(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		seed uint64
	}{
		{Spec{Batch: 1, Dim: 17, Seqlen: 16, Dstate: 256, Groups: 17, Method: ssm.Bilinear,
			Softplus: true, HasBias: true, Dist: Stress}, 5439},
		{Spec{Batch: 1, Dim: 8, Seqlen: 16, Dstate: 256, Groups: 1, Method: ssm.Bilinear,
			Softplus: true, HasBias: true, Dist: Stress}, 5439},
	} {
		for _, isComplex := range []bool{false, true} {
			s := tc.s
			s.Complex = isComplex
			checkFloat32Range(t, s.String(), Generate(s, tc.seed))
		}
	}
	// Sequences short enough that the bound on Δ·a·seqlen lets x reach the
	// pole, wide rows (many draws of a), softplus with large biases (Δ
	// nearly constant along the row, so x stays near the pole step after
	// step): before the fix, 5 of these 192 problems (4 real, 1 complex) left
	// float32's range.
	for L := 1; L <= 24; L++ {
		for seed := uint64(0); seed < 8; seed++ {
			s := Spec{Batch: 1, Dim: 16, Seqlen: L, Dstate: 256, Groups: 1, Method: ssm.Bilinear,
				Complex: seed%2 == 1, Softplus: true, HasBias: true, Dist: Stress}
			checkFloat32Range(t, s.String()+" seed="+strconv.FormatUint(seed, 10), Generate(s, seed))
		}
	}
}

// TestWithin: a spec moved within a declaration gives problems that fit it.
func TestWithin(t *testing.T) {
	decls := []ssm.Features{
		ssm.AllFeatures,
		{Options: ssm.OptSoftplusOn | ssm.OptVariableBC, DimMultiple: 128, MaxGroups: 1, Dstates: 1 << 4},
		{Options: ssm.OptSoftplusOn | ssm.OptVariableBC, HeadDim: 16, DimMultiple: 1, Dstates: 1<<7 | 1<<8},
		{Options: ssm.OptSoftplusOff | ssm.OptConstantBC, DimMultiple: 4},
	}
	for _, f := range decls {
		for seed := uint64(1); seed <= 20; seed++ {
			s := Spec{Batch: 1, Dim: int(seed%7) + 1, Seqlen: 3, Dstate: int(seed%5) + 1, Groups: 1 + int(seed%2), Method: ssm.ZOH,
				VariableB: seed%3 == 0, VariableC: true, HasD: true, HasZ: seed%2 == 0, HasBias: true, Softplus: seed%2 == 1}
			if s.Dim%s.Groups != 0 {
				s.Dim *= s.Groups
			}
			w := s.Within(f)
			p := Generate(w, seed)
			if _, _, err := f.Fit(p); err != nil {
				t.Errorf("%v: %v within %v: %v", f, s, w, err)
			}
		}
	}
}

// ForAnyMethod is a promise to callers that draw one problem for every
// method: where it holds, New draws the same values for each method, and
// where it does not (Stress, whose unstable A is bounded by the method's
// growth) some method's draw differs, so the promise is not vacuous.
func TestForAnyMethod(t *testing.T) {
	for _, dist := range []Dist{Realistic, Stress} {
		for _, isComplex := range []bool{false, true} {
			s := MambaBlock(ssm.ZOH, 2, 8, 64, 4)
			s.Dist, s.Complex = dist, isComplex
			want := Generate(s, 3)
			differs := false
			for _, m := range ssm.Methods() {
				s.Method = m
				got := Generate(s, 3)
				got.Method = ssm.ZOH
				differs = differs || !reflect.DeepEqual(got, want)
			}
			if s.ForAnyMethod() == differs {
				t.Errorf("%v %s: ForAnyMethod() = %t, but the draws differ between methods: %t", dist, ssm.AKind(isComplex), s.ForAnyMethod(), differs)
			}
		}
	}
}
