package fuzz

import (
	"strings"
	"testing"

	"ssmverify/cudalib"
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
