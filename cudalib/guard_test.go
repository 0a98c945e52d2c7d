package cudalib

import (
	"strings"
	"testing"

	"ssmverify/ssm"
)

// TestGuards: every array the binding makes sits between guard regions; a
// write past its end or before its start, or into an input, is a
// MemoryError naming the call, the array and how far out, and an array the
// caller made (no guard) is not checked.
func TestGuards(t *testing.T) {
	for _, dt := range []ssm.DType{ssm.F32, ssm.F64, ssm.F16} {
		out := zeros(10, dt)
		in := NewArray([]float64{1, 2, 3}, dt)
		inputs, outputs := []NamedArray{{"delta", in}}, []NamedArray{{"out", out}}
		sums := checksums(inputs)
		if err := checkMemory("f", inputs, sums, outputs); err != nil {
			t.Fatalf("%v: untouched arrays: %v", dt, err)
		}
		size := out.elemSize()
		out.guard.raw[out.guard.hi+size] = 0 // the second element past the end
		err := checkMemory("ssmk_scan_fwd", inputs, sums, outputs)
		m, ok := IsMemoryError(err)
		if !ok || m.Kind != "overrun" || m.Array != "out" || m.Element != 2 || m.MemoryTag() != "memory:overrun:out" ||
			!strings.Contains(err.Error(), "ssmk_scan_fwd wrote past the end of out") {
			t.Errorf("%v: an overrun: %v", dt, err)
		}
		out.guard.raw[out.guard.hi+size] = guardCanary
		out.guard.raw[out.guard.lo-1] = 0
		if m, ok := IsMemoryError(checkMemory("f", inputs, sums, outputs)); !ok || m.Kind != "underrun" || m.Element != 1 {
			t.Errorf("%v: an underrun: %+v", dt, m)
		}
		out.guard.raw[out.guard.lo-1] = guardCanary
		in.Bytes()[0] ^= 1
		if m, ok := IsMemoryError(checkMemory("f", inputs, sums, outputs)); !ok || m.Kind != "input" || m.MemoryTag() != "memory:input:delta" {
			t.Errorf("%v: a modified input: %+v", dt, m)
		}
	}
	// An array a caller makes has no guard and is not checked.
	mine := Array{F32: make([]float32, 4)}
	if kind, _, _ := mine.breach(); kind != "" {
		t.Errorf("a caller's array reported %s", kind)
	}
	if g := guardBytes(8); g != 4<<10 {
		t.Errorf("guardBytes(8) = %d, want 4 KiB at least", g)
	}
	if g := guardBytes(1 << 40); g != 1<<20 {
		t.Errorf("guardBytes(1 TiB) = %d, want 1 MiB at most", g)
	}
}

// TestGuardedArraysAreCapped: the guard is outside the slice the binding
// hands out (its capacity ends with the buffer), so that Go code cannot
// write into it either.
func TestGuardedArraysAreCapped(t *testing.T) {
	a := zeros(5, ssm.F32)
	if len(a.F32) != 5 || cap(a.F32) != 5 {
		t.Errorf("len %d, cap %d: want 5 and 5", len(a.F32), cap(a.F32))
	}
}

// TestUnwritten: an Unwritten array reads NaN in every element, in every
// dtype, and is Untouched until a write inside it or into its guards; a
// write outside it is a MemoryError as for every array of the binding.
func TestUnwritten(t *testing.T) {
	for _, dt := range ssm.DTypes() {
		a := Unwritten(4, dt)
		for i, v := range a.Float64s() {
			if v == v {
				t.Fatalf("%v: element %d reads %v, want NaN", dt, i, v)
			}
		}
		if !a.Untouched() {
			t.Fatalf("%v: a fresh array reports a write", dt)
		}
		b := a.Bytes()
		b[len(b)-1] ^= 1 // the last element itself
		if a.Untouched() {
			t.Errorf("%v: a write into the last element is not seen", dt)
		}
		a = Unwritten(4, dt)
		a.guard.raw[a.guard.hi] = 0 // one byte past the end
		if a.Untouched() {
			t.Errorf("%v: a write past the end leaves it Untouched", dt)
		}
		if m, ok := IsMemoryError(checkMemory("f", nil, nil, []NamedArray{{"out", a}})); !ok || m.Kind != "overrun" || m.Element != 1 {
			t.Errorf("%v: a write past the end: %+v", dt, m)
		}
	}
}
