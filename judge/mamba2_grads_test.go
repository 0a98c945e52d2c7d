package judge

import (
	"math"
	"strings"
	"testing"

	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// TestMamba2GradArrays: the float64 adjoint rounded to its type passes
// far within the threshold (a 16-bit gradient is allowed its one
// rounding: ratio 0); one element moved by five times its allowance fails at
// about 5; a gradient missing or of the wrong length is an error naming
// it.
func TestMamba2GradArrays(t *testing.T) {
	for _, dt := range []ssm.DType{ssm.F32, ssm.BF16} {
		p := mamba2.Generate(mamba2.Options{Batch: 1, Seqlen: 20, Heads: 2, Headdim: 2, Groups: 1, Dstate: 4, D: true, InitialStates: true,
			DType: dt, StateDType: ssm.F32}, 3).Rounded()
		ct := mamba2.GenerateCotangent(p, 4, true).Rounded(p)
		want, sc := mamba2.Grad(p, ct), mamba2.GradErrorScale(p, ct)
		judged := func(g *mamba2.Grads) Comparison {
			t.Helper()
			a, err := Mamba2GradArrays(p, g, want, sc)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := CompareArrays(a)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		got := *want
		got.X = dt.RoundAll(want.X)
		if c := judged(&got); c.Worst.Ratio > 1 {
			t.Errorf("%v: the reference rounded to its type judged at ratio %.3g", dt, c.Worst.Ratio)
		}
		if dt == ssm.F32 {
			moved := append([]float64(nil), want.D...)
			u := dt.Precision().UnitRoundoff()
			moved[1] += 5 * ThresholdF32 * u * sc.Scale.D[1]
			got = *want
			got.D = moved
			if c := judged(&got); c.Worst.Array != "dD" || c.Worst.Ratio < 4*ThresholdF32 {
				t.Errorf("dD moved by 5 allowances judged %.3g at %s", c.Worst.Ratio, c.Worst)
			}
		}
		got = *want
		got.InitialStates = nil
		if _, err := Mamba2GradArrays(p, &got, want, sc); err == nil || !strings.Contains(err.Error(), "dinitial_states") {
			t.Errorf("a missing dinitial_states: %v", err)
		}
		got = *want
		got.B = got.B[:3]
		if _, err := Mamba2GradArrays(p, &got, want, sc); err == nil || !strings.Contains(err.Error(), "dB") {
			t.Errorf("a short dB: %v", err)
		}
	}
}

// TestArraysAcceptOverflowOfTheStoredType: a 16-bit value whose
// reference lies past the type's range may be stored as the ∞ of its sign,
// and only then.
func TestArraysAcceptOverflowOfTheStoredType(t *testing.T) {
	idx := func(i int) []int { return []int{i} }
	for _, c := range []struct {
		got, want float64
		ok        bool
	}{{math.Inf(-1), -269727, true}, {math.Inf(1), 70000, true}, {math.Inf(1), -70000, false}, {math.Inf(1), 100, false}, {math.NaN(), 1e6, false}} {
		a := Array{Name: "ddt", Got: []float64{c.got}, Want: []float64{c.want}, Scale: []float64{1e3}, Tiny: []float64{1}, Stored: ssm.F16, Computed: ssm.F32, Index: idx}
		cmp, _, err := CompareArrays([]Array{a})
		if err != nil {
			t.Fatal(err)
		}
		if ok := cmp.NonFinite == 0 && cmp.Worst.Ratio <= ThresholdF32; ok != c.ok {
			t.Errorf("fp16 %g for %g: passes %v, want %v", c.got, c.want, ok, c.ok)
		}
	}
}
