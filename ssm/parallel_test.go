package ssm

import (
	"math"
	"sync/atomic"
	"testing"
)

// TestParallelBlocks: every index of [0, n) is visited exactly once, in
// blocks that never straddle ParallelGrain, at the sizes around a block's.
func TestParallelBlocks(t *testing.T) {
	for _, n := range []int{0, 1, ParallelGrain - 1, ParallelGrain, ParallelGrain + 1, 5*ParallelGrain + 3} {
		seen := make([]atomic.Int32, n)
		ParallelBlocks(n, func(lo, hi int) {
			if lo < 0 || hi > n || lo >= hi || (n > ParallelGrain && hi-lo > ParallelGrain) {
				t.Errorf("n=%d: block [%d, %d)", n, lo, hi)
				return
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, c)
			}
		}
	}
}

// TestRoundAllParallel: the parallel rounding of an array of several
// blocks equals Round element by element, in a copy and in place.
func TestRoundAllParallel(t *testing.T) {
	v := make([]float64, 3*ParallelGrain+7)
	for i := range v {
		v[i] = math.Sin(float64(i)) * 1e3
	}
	for _, d := range []DType{F32, F16, BF16} {
		got := d.RoundAll(v)
		in := append([]float64(nil), v...)
		d.RoundInPlace(in)
		for i, x := range v {
			if w := d.Round(x); got[i] != w || in[i] != w {
				t.Fatalf("%v: element %d: RoundAll %v, RoundInPlace %v, Round %v", d, i, got[i], in[i], w)
			}
		}
	}
}
