package bridgetest

import (
	"slices"
	"testing"
)

// TestBoundaryRows: every row is a valid cu_seqlens (0 first, seqlen last,
// strictly increasing), a sequence starts at each of the five positions of
// the second chunk, one-token sequences sit at each, and one row holds
// several boundaries in one chunk; a row too short is refused.
func TestBoundaryRows(t *testing.T) {
	rows, err := BoundaryRows(64, 300)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int]bool{}
	for _, r := range rows {
		c := r.CuSeqlens
		if c[0] != 0 || c[len(c)-1] != 300 || !slices.IsSorted(c) {
			t.Errorf("%s: %v is not a cu_seqlens of 300 tokens", r.Name, c)
		}
		for i := 1; i < len(c); i++ {
			if c[i] == c[i-1] {
				t.Errorf("%s: %v has an empty sequence", r.Name, c)
			}
			if c[i] < 300 {
				starts[c[i]] = true
			}
		}
	}
	for _, at := range []int{64, 65, 96, 126, 127} {
		if !starts[at] {
			t.Errorf("no sequence starts at %d", at)
		}
	}
	if len(rows) != 11 || len(rows[len(rows)-1].CuSeqlens) != 7 {
		t.Errorf("%d rows, the last %v: want 11, the last with five boundaries in chunk 1", len(rows), rows[len(rows)-1].CuSeqlens)
	}
	if _, err := BoundaryRows(64, 128); err == nil {
		t.Error("a row of two chunks was accepted")
	}
	if got := SplitPoints(0, 100); !slices.Equal(got, []int{16, 17, 24, 30, 31}) {
		t.Errorf("SplitPoints(0, 100) = %v", got)
	}
}
