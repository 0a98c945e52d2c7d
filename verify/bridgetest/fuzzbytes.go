package bridgetest

import (
	"math"
	"sort"
)

// FuzzBytes reads a fuzzer's input a byte at a time, zeros past its end,
// so that every input, the empty one too, decodes to a complete problem.
// The bridged families' fuzz targets share it.
type FuzzBytes struct {
	b []byte
	i int
}

// NewFuzzBytes reads data.
func NewFuzzBytes(data []byte) *FuzzBytes { return &FuzzBytes{b: data} }

// Next is the next byte, 0 past the end.
func (r *FuzzBytes) Next() int {
	r.i++
	if r.i > len(r.b) {
		return 0
	}
	return int(r.b[r.i-1])
}

// Pick is one of choices, chosen by the next byte.
func (r *FuzzBytes) Pick(choices []int) int { return choices[r.Next()%len(choices)] }

// Divisor is a divisor of n (the groups of n heads, the heads sharing q
// and k), chosen by the next byte.
func (r *FuzzBytes) Divisor(n int) int {
	var ds []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	return r.Pick(ds)
}

// CuSeqlens is a packed row's boundaries over seqlen steps, [0, …,
// seqlen], with up to n inner boundaries read from the next n bytes
// (repeats and zeros dropped).
func (r *FuzzBytes) CuSeqlens(n, seqlen int) []int {
	set := map[int]bool{}
	for i := 0; i < n; i++ {
		if c := r.Next() % seqlen; c > 0 {
			set[c] = true
		}
	}
	cu := []int{0}
	for c := range set {
		cu = append(cu, c)
	}
	sort.Ints(cu)
	return append(cu, seqlen)
}

// Poison is the non-finite value k picks: NaN, +Inf or −Inf.
func Poison(k int) float64 { return []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[k%3] }
