package bridgetest

import (
	"math"
	"slices"
	"testing"
)

// TestFuzzBytes: zeros past the end, picks and divisors by the byte, and
// boundaries sorted, distinct and within the row.
func TestFuzzBytes(t *testing.T) {
	r := NewFuzzBytes([]byte{7, 3})
	if a, b, c := r.Next(), r.Next(), r.Next(); a != 7 || b != 3 || c != 0 {
		t.Errorf("Next: %d %d %d, want 7 3 0", a, b, c)
	}
	if got := NewFuzzBytes([]byte{4}).Pick([]int{10, 20, 30}); got != 20 {
		t.Errorf("Pick: %d, want 20 (4 mod 3)", got)
	}
	if got := NewFuzzBytes([]byte{2}).Divisor(8); got != 4 {
		t.Errorf("Divisor(8) by 2: %d, want 4 (of 1 2 4 8)", got)
	}
	if got := NewFuzzBytes([]byte{5, 5, 0, 12}).CuSeqlens(4, 10); !slices.Equal(got, []int{0, 2, 5, 10}) {
		t.Errorf("CuSeqlens: %v, want [0 2 5 10]", got)
	}
	if !math.IsNaN(Poison(0)) || !math.IsInf(Poison(1), 1) || !math.IsInf(Poison(5), -1) {
		t.Error("Poison: want NaN, +Inf, −Inf in turn")
	}
}
