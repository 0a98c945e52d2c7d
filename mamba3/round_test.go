package mamba3

import (
	"reflect"
	"testing"

	"ssmverify/ssm"
)

// TestRoundInPlaceIsRounded: rounding a problem in place gives what
// Rounded's copy gives, with and without states, D and the gate.
func TestRoundInPlaceIsRounded(t *testing.T) {
	for _, dt := range []ssm.DType{ssm.F32, ssm.F16, ssm.BF16} {
		for _, opt := range []bool{false, true} {
			o := Options{Batch: 2, Seqlen: 5, HeadsQK: 1, Heads: 2, N: 4, P: 3, AngleDim: 2, D: opt, Z: opt, State: opt}
			a, b := Generate(o, 3), Generate(o, 3)
			a.DType, b.DType = dt, dt
			if got, want := b.RoundInPlace(), a.Rounded(); !reflect.DeepEqual(got, want) {
				t.Errorf("%v (optional arrays %v): RoundInPlace differs from Rounded", dt, opt)
			}
		}
	}
}
