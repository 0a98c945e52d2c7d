package mamba2

import (
	"reflect"
	"testing"

	"ssmverify/ssm"
)

// TestRoundInPlaceIsRounded: rounding a problem in place gives what
// Rounded's copy gives, for every dtype pair and optional array.
func TestRoundInPlaceIsRounded(t *testing.T) {
	for _, dt := range []ssm.DType{ssm.F32, ssm.F16, ssm.BF16} {
		for _, st := range []ssm.DType{ssm.F32, dt} {
			o := Options{Batch: 2, Seqlen: 5, Heads: 2, Headdim: 3, Groups: 1, Dstate: 4, Chunk: 2, D: true, Z: true, DtBias: true,
				Softplus: true, InitialStates: true, DType: dt, StateDType: st}
			want := Generate(o, 3).Rounded()
			if got := Generate(o, 3).RoundInPlace(); !reflect.DeepEqual(got, want) {
				t.Errorf("%v/state-%v: RoundInPlace differs from Rounded", dt, st)
			}
		}
	}
}
