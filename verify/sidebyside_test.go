package verify

import (
	"fmt"
	"math"
	"os"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

// TestSideBySide: the library under test and a second one (the path in
// SSMK_COMPARE_LIB: another backend of the same engine, say ggml's CPU
// beside its CUDA) on the same inputs, drawn within what both declare: each
// judged against the float64 reference, and the largest difference between
// the two, relative to the output's largest magnitude. Lengths on both
// sides of the switches a backend may make by length (ggml's CUDA backend
// takes another algorithm above 128 tokens), Δ as trained models feed it,
// and a scan from a state. Fails where either library fails the reference;
// skipped without SSMK_COMPARE_LIB.
func TestSideBySide(t *testing.T) {
	path := os.Getenv("SSMK_COMPARE_LIB")
	if path == "" {
		t.Skip("SSMK_COMPARE_LIB not set: no second library to compare with")
	}
	track(t)
	other, err := cudalib.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	devA, _ := lib.DeviceName()
	devB, _ := other.DeviceName()
	t.Logf("A: %s (%s)\nB: %s (%s)", lib.Path, devA, other.Path, devB)
	table := report.Table{Name: "side by side: A = " + devA + ", B = " + devB,
		Columns: []string{"problem", "dtype", "A ratio", "B ratio", "max |A − B| / max |y|", "A ulp*", "B ulp*"}}
	type caseSpec struct {
		name    string
		s       mamba1.Spec
		trained bool
		state   bool
	}
	var cases []caseSpec
	for _, L := range []int{1, 2, 8, 9, 128, 129, 256, 1024, 4100} {
		cases = append(cases, caseSpec{fmt.Sprintf("seqlen %d", L), mamba1.MambaBlock(ssm.ZOH, 1, 128, L, 16), false, false})
	}
	cases = append(cases,
		caseSpec{"trained Δ, seqlen 2048", mamba1.MambaBlock(ssm.ZOH, 1, 128, 2048, 16), true, false},
		caseSpec{"from a state, seqlen 1", mamba1.MambaBlock(ssm.ZOH, 1, 128, 1, 16), true, true},
		caseSpec{"from a state, seqlen 300", mamba1.MambaBlock(ssm.ZOH, 1, 128, 300, 16), true, true})
	judgedAny := false
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				ca, cb := lib.Capabilities(m, dt, isComplex), other.Capabilities(m, dt, isComplex)
				if !ca.Supported() || !cb.Supported() {
					continue
				}
				fa := featuresOf(m, dt, isComplex)
				fb, err := other.Features(m, dt, isComplex)
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range cases {
					if c.state && !(ca.InitialState() && cb.InitialState()) {
						continue
					}
					s := c.s
					s.Method, s.Complex = m, isComplex
					p := mamba1.Generate(s.Within(fa).Within(fb), uint64(70+i))
					if c.trained {
						mamba1.TrainedDeltas(p, uint64(80+i))
					}
					if c.state {
						mamba1.SetInitialState(p, uint64(90+i))
					}
					q, _, errA := fa.Fit(p)
					if errA == nil {
						q, _, errA = fb.Fit(q)
					}
					if errA == nil {
						_, errA = fa.Exact(q)
					}
					if errA != nil {
						rep.Unsupported(t.Name(), fmt.Sprintf("%s %v %v %s: not taken by both (%v)", c.name, m, dt, ssm.AKind(isComplex), errA))
						continue
					}
					if dt == ssm.F32 {
						q.RoundToFloat32()
					}
					judgedAny = true
					row, ok := compareTwo(t, other, q, dt)
					table.Rows = append(table.Rows, append([]string{fmt.Sprintf("%s %v %s %d×%d×%d×%d", c.name, m, ssm.AKind(isComplex), q.Batch, q.Dim, q.Seqlen, q.Dstate)}, row...))
					if !ok {
						t.Errorf("%s %v %v %s: ratios A %s, B %s (threshold %g)", c.name, m, dt, ssm.AKind(isComplex), row[1], row[2], judge.Threshold(dt))
					}
				}
			}
		}
	}
	if !judgedAny {
		t.Skip("no combination that both libraries declare")
	}
	logTable(t, table)
	rep.AddTable(table)
}

// compareTwo scans q on the library under test (A) and on other (B) and
// returns the table row after the problem: dtype, each ratio to the
// reference, their difference, each ulp*; ok when both pass.
func compareTwo(t *testing.T, other *cudalib.Library, q *ssm.Problem, dt ssm.DType) ([]string, bool) {
	t.Helper()
	ref, err := mamba1.Scan(q, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	var outs [2]*ssm.Output
	var cmps [2]judge.Comparison
	ok := true
	cells := []string{dt.String()}
	for k, l := range []*cudalib.Library{lib, other} {
		o, err := l.Scan(q, dt)
		if err != nil {
			cells = append(cells, "refused")
			ok = false
			continue
		}
		outs[k] = o
		cmps[k], err = judge.CompareScan(q, o, dt, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, fmt.Sprintf("%.3g", cmps[k].Worst.Ratio))
		ok = ok && cmps[k].Passed(dt)
	}
	diff := "—"
	if outs[0] != nil && outs[1] != nil {
		d, big := 0.0, 0.0
		for i := range ref.Out {
			d = math.Max(d, math.Abs(outs[0].Out[i]-outs[1].Out[i]))
			big = math.Max(big, math.Abs(ref.Out[i]))
		}
		diff = fmt.Sprintf("%.3g", d/big)
	}
	cells = append(cells, diff, fmt.Sprintf("%.3g", cmps[0].Worst.ULP), fmt.Sprintf("%.3g", cmps[1].Worst.ULP))
	return cells, ok
}
