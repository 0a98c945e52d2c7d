package diagnose

import (
	"strings"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestScanNamesTwoSlips: a kernel with two slips of the catalogue — two
// problem transforms, a transform and an edit, two edits — is named with
// both ("a+b"), which neither alone explains; one slip alone is still
// named alone.
func TestScanNamesTwoSlips(t *testing.T) {
	p := problem(ssm.ZOH, false, func(s *mamba1.Spec) { s.VariableB = false })
	byTag := map[string]mamba1.Slip{}
	for _, sl := range mamba1.Slips(p.Method) {
		byTag[sl.Tag] = sl
	}
	two := func(a, b string) fake {
		sa, sb := byTag[a], byTag[b]
		f := fake{}
		for _, s := range []mamba1.Slip{sa, sb} {
			if s.Transform != nil {
				if f.transform == nil {
					f.transform = s.Transform
				} else {
					first := f.transform
					f.transform = func(q *ssm.Problem) *ssm.Problem { return s.Transform(first(q)) }
				}
			} else {
				e := s.Edit
				if f.edit != nil {
					m, ok := mergeEdits(*f.edit, e)
					if !ok {
						t.Fatalf("%s and %s do not merge", a, b)
					}
					e = m
				}
				f.edit = &e
			}
		}
		return f
	}
	for _, c := range [][2]string{{"no-D", "no-bias"}, {"no-D", "gate-no-z"}, {"output-before-update", "gate-no-z"}} {
		for _, tag := range c {
			if _, ok := byTag[tag]; !ok {
				t.Fatalf("no slip %q in the catalogue", tag)
			}
		}
		f := Scan(two(c[0], c[1]), p, ssm.F64)
		if f.Tag != c[0]+"+"+c[1] && f.Tag != c[1]+"+"+c[0] {
			t.Errorf("%s and %s: diagnosis [%s] %s", c[0], c[1], f.Tag, f.Cause)
		}
	}
	if f := Scan(fake{transform: byTag["no-D"].Transform}, p, ssm.F64); f.Tag != "no-D" {
		t.Errorf("no-D alone: diagnosis [%s] %s", f.Tag, f.Cause)
	}
}

// TestScanSeesTheSecondSlip: a shrunk case without delta_bias shows one
// of a kernel's two slips; the diagnosis names both, from a problem with
// every feature on, and says so when the one it names is all there is.
func TestScanSeesTheSecondSlip(t *testing.T) {
	byTag := map[string]mamba1.Slip{}
	for _, sl := range mamba1.Slips(ssm.ZOH) {
		byTag[sl.Tag] = sl
	}
	e := byTag["output-before-update"].Edit
	two := fake{transform: byTag["no-bias"].Transform, edit: &e}
	p := problem(ssm.ZOH, false, func(s *mamba1.Spec) { s.HasBias = false })
	if f := Scan(two, p, ssm.F32); f.Tag != "no-bias+output-before-update" {
		t.Errorf("two slips, one visible: diagnosis [%s] %s; evidence %v", f.Tag, f.Cause, f.Evidence)
	}
	one := fake{edit: &e}
	if f := Scan(one, p, ssm.F32); f.Tag != "output-before-update" || !strings.Contains(strings.Join(f.Evidence, "; "), "every failing element of a problem with every feature") {
		t.Errorf("one slip: diagnosis [%s] %s; evidence %v", f.Tag, f.Cause, f.Evidence)
	}
}
