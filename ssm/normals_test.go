package ssm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNormalsBigArray: an array of BigArray elements, drawn in parallel
// blocks, is the same for the same seed, differs between seeds and between
// blocks, and is standard normal (mean and variance within five standard
// errors); below BigArray the draws are rng's own, in order.
func TestNormalsBigArray(t *testing.T) {
	rng := func(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }
	a, b, c := Normals(rng(5), BigArray), Normals(rng(5), BigArray), Normals(rng(6), BigArray)
	var sum, sq float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 5 twice: element %d differs (%g, %g)", i, a[i], b[i])
		}
		sum += a[i]
		sq += a[i] * a[i]
	}
	if a[0] == c[0] && a[len(a)-1] == c[len(c)-1] {
		t.Fatal("seeds 5 and 6 draw the same array")
	}
	if a[0] == a[ParallelGrain] {
		t.Fatal("two blocks start with the same draw")
	}
	n := float64(len(a))
	if m, v := sum/n, sq/n-(sum/n)*(sum/n); math.Abs(m) > 5/math.Sqrt(n) || math.Abs(v-1) > 5*math.Sqrt(2/n) {
		t.Fatalf("mean %g, variance %g over %d draws", m, v, len(a))
	}
	r, small := rng(7), Normals(rng(7), 100)
	for i, x := range small {
		if w := r.NormFloat64(); x != w {
			t.Fatalf("below BigArray, draw %d = %g, rng's own %g", i, x, w)
		}
	}
}
