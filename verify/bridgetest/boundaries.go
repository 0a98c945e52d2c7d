package bridgetest

import (
	"fmt"
	"slices"
)

// A Boundary is one placement of sequence boundaries (cu_seqlens) in a
// packed row of a chunked kernel, named by where it falls in a chunk.
type Boundary struct {
	Name      string
	CuSeqlens []int
}

// boundaryOffsets are the positions within a chunk of q tokens where a
// chunked kernel's paths change: its first token (the state entering the
// chunk alone), its second, one in the middle, its second-to-last and its
// last (the chunk's state formed from one token).
func boundaryOffsets(q int) []struct {
	name string
	off  int
} {
	all := []struct {
		name string
		off  int
	}{{"first", 0}, {"second", 1}, {"middle", q / 2}, {"second-to-last", q - 2}, {"last", q - 1}}
	var out []struct {
		name string
		off  int
	}
	seen := map[int]bool{}
	for _, o := range all {
		if o.off >= 0 && o.off < q && !seen[o.off] {
			seen[o.off] = true
			out = append(out, o)
		}
	}
	return out
}

// BoundaryRows returns the packed rows that draw a row of seqlen tokens'
// sequence boundaries systematically against the kernel's chunk of q
// tokens (0, a sequential kernel: 16 stands in): a sequence starting at
// each position of the second chunk (its first, second, middle,
// second-to-last and last token), a sequence of one token at each, and
// several boundaries in one chunk. seqlen must exceed two chunks.
func BoundaryRows(q, seqlen int) ([]Boundary, error) {
	if q <= 0 {
		q = 16
	}
	if seqlen <= 2*q {
		return nil, fmt.Errorf("bridgetest: seqlen %d must exceed two chunks of %d", seqlen, q)
	}
	var out []Boundary
	for _, o := range boundaryOffsets(q) {
		at := q + o.off
		out = append(out, Boundary{"starts-at-" + o.name, []int{0, at, seqlen}})
	}
	for _, o := range boundaryOffsets(q) {
		at := q + o.off
		out = append(out, Boundary{"one-token-at-" + o.name, []int{0, at, at + 1, seqlen}})
	}
	several := []int{0}
	for _, o := range boundaryOffsets(q) {
		if at := q + o.off; at > 0 && !slices.Contains(several, at) {
			several = append(several, at)
		}
	}
	out = append(out, Boundary{"several-in-one-chunk", append(several, seqlen)})
	return out, nil
}

// SplitPoints are the steps at which a chunked kernel's prefill is split
// and resumed, drawn like BoundaryRows' starts: each position of the
// second chunk.
func SplitPoints(q, seqlen int) []int {
	if q <= 0 {
		q = 16
	}
	var out []int
	for _, o := range boundaryOffsets(q) {
		if k := q + o.off; k > 0 && k < seqlen {
			out = append(out, k)
		}
	}
	return out
}
