package bridge

import (
	"bytes"
	"math"
	"testing"

	"ssmverify/ssm"
)

// TestMessageCrossesLargeArrays: a message with arrays below and above
// the size written where it lies (ssm.ParallelGrain bytes) reads back in
// order, every value bit for bit in each dtype, through the parallel
// encode and decode.
func TestMessageCrossesLargeArrays(t *testing.T) {
	n := ssm.ParallelGrain + 5
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(float64(i)) * 300
	}
	var arrays []Array
	var want [][]float64
	for _, dt := range ssm.AllDTypes() {
		for _, m := range []int{3, n} {
			r := dt.RoundAll(v[:m])
			arrays = append(arrays, Floats("x", r, dt, m))
			want = append(want, r)
		}
	}
	var buf bytes.Buffer
	if err := writeMessage(&buf, header{Kind: "call"}, arrays); err != nil {
		t.Fatal(err)
	}
	rep, err := readMessage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Arrays) != len(arrays) || buf.Len() != 0 {
		t.Fatalf("%d arrays back of %d, %d bytes left over", len(rep.Arrays), len(arrays), buf.Len())
	}
	for k, a := range rep.Arrays {
		got, err := a.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range want[k] {
			if math.Float64bits(got[i]) != math.Float64bits(want[k][i]) {
				t.Fatalf("array %d (%s): element %d = %g, sent %g", k, a.Tag, i, got[i], want[k][i])
			}
		}
	}
	// a short array is an error, not a panic
	if _, err := (Array{Name: "y", Tag: "bf16", Shape: []int{4}, Data: make([]byte, 6)}).Float64s(); err == nil {
		t.Fatal("Float64s of 6 bytes for 4 bf16 elements: no error")
	}
}
