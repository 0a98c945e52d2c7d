package ssm

import (
	"strings"
	"testing"
)

// TestStepsAndInitialState: Steps cuts every time-indexed array and
// refuses an empty or out-of-range window by name; an initial state of the
// wrong length is refused naming InitialState and its layout.
func TestStepsAndInitialState(t *testing.T) {
	p := &Problem{Batch: 2, Dim: 2, Seqlen: 5, Dstate: 3, Groups: 1, Method: ZOH, Complex: true, VariableB: true}
	fill := func(n int, base float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = base + float64(i)
		}
		return s
	}
	l := p.Lens()
	p.U, p.Delta, p.A, p.B, p.C = fill(l["U"], 0), fill(l["Delta"], 100), fill(l["A"], 200), fill(l["B"], 300), fill(l["C"], 400)
	p.InitialState = fill(p.StateLen(), 500)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	q, err := p.Steps(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if q.Seqlen != 2 || q.InitialState != nil || q.U[0] != 1 || q.U[2] != 6 || q.B[0] != 302 || q.B[4] != 312 || len(q.C) != len(p.C) {
		t.Errorf("Steps(1, 3): seqlen %d, h0 %v, U %v, B[:6] %v", q.Seqlen, q.InitialState, q.U, q.B[:6])
	}
	out := make([]float64, p.OutLen())
	p.PutSteps(out, []float64{1, 2, 3, 4, 5, 6, 7, 8}, 1, 3)
	if out[1] != 1 || out[2] != 2 || out[6] != 3 || out[17] != 8 {
		t.Errorf("PutSteps: %v", out)
	}
	for _, w := range [][2]int{{3, 3}, {-1, 2}, {2, 6}} {
		if _, err := p.Steps(w[0], w[1]); err == nil || !strings.Contains(err.Error(), "want 0 ≤ t0 < t1 ≤ 5") {
			t.Errorf("Steps(%d, %d): %v", w[0], w[1], err)
		}
	}
	p.InitialState = p.InitialState[:5]
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "len(InitialState) = 5, want 24 (batch·dim·dstate×2") {
		t.Errorf("a short initial state: %v", err)
	}
}
