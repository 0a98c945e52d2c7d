package fuzz

import (
	"math"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/reference"
)

// TestGuards: a write just past an output buffer is reported with its
// element, one inside is not; a buffer kept back for a NULL output notices
// any write at all.
func TestGuards(t *testing.T) {
	for _, dt := range cudalib.DTypes() {
		g := newGuarded("out", 4, dt)
		if g.check() != nil || !g.untouched() {
			t.Fatalf("%v: a fresh buffer reports a write", dt)
		}
		set := func(i int) { // element i of the backing array
			if dt == cudalib.F64 {
				g.backing.F64[i] = 1
			} else {
				g.backing.F32[i] = 1
			}
		}
		set(guard + 3) // the last element of the buffer itself
		if err := g.check(); err != nil || g.untouched() {
			t.Errorf("%v: a write inside the buffer: check %v, untouched %t", dt, err, g.untouched())
		}
		set(guard + 4) // one past the end
		if err := g.check(); err == nil || !strings.Contains(err.Error(), "element 4 (buffer is 0…3)") {
			t.Errorf("%v: a write one past the end: %v", dt, err)
		}
	}
}

// TestJudgeScanAfterStateOverflow: a state that overflows float64 on finite
// inputs and is then multiplied by an Ā of 0 (zoh, x = −1e30) is NaN in the
// sequential float64 recurrence, but the value is finite (Δ·B·u = 1e30 at
// the last step), and a time-parallel kernel computes it (FuzzScan on the
// H200, corpus entry ab74c4a62db06962). Both answers are accepted; any other
// finite value is not.
func TestJudgeScanAfterStateOverflow(t *testing.T) {
	p := &reference.Problem{Batch: 1, Dim: 1, Seqlen: 3, Dstate: 1, Groups: 1, Method: reference.ZOH,
		VariableB: true, VariableC: true,
		U: []float64{1e300, 0, 1}, Delta: []float64{1, -700, 1e30}, A: []float64{-1},
		B: []float64{1, 1, 1}, C: []float64{1, 1, 1}}
	h0 := 1e300 // Δ·B·u at step 0; step 1 multiplies it by e^700 (2^1010 > MaxFloat64)
	for _, c := range []struct {
		name string
		out  []float64
		ok   bool
	}{
		{"the sequential order", []float64{h0, math.Inf(1), math.NaN()}, true},
		{"the time-parallel order", []float64{h0, math.Inf(1), 1e30}, true},
		{"the time-parallel order, one rounding off", []float64{h0, math.Inf(1), math.Nextafter(1e30, 0)}, true},
		{"a wrong finite value", []float64{h0, math.Inf(1), 1.001e30}, false},
		{"a wrong first step", []float64{1.001 * h0, math.Inf(1), 1e30}, false},
	} {
		err := judgeScan(&Failure{Input: c.name}, p, p, cudalib.F64, c.out, nil)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: accepted %t, want %t: %v", c.name, got, c.ok, err)
		}
	}
}
