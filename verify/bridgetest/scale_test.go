package bridgetest

import (
	"fmt"
	"strings"
	"testing"
)

// TestScaleFinding: a failure is halved until a size passes: past-size
// with the largest size that passes and the smallest that fails, and the
// first failing token's offset; one that fails at every size tried, or
// whose smaller runs could not run, stays scale:fails, with the sizes it
// tried. A crash is past-size where a smaller size runs, even wrong (the
// k of that size returned, for the caller to diagnose its numbers), and
// crashes at every size tried where none does.
func TestScaleFinding(t *testing.T) {
	ok, crash := ScaleRun{Size: "l=8", Where: "worst y", First: 7, Offset: 70}, ScaleRun{Crashed: true, Size: "l=8", Where: "the call: fault", First: -1}
	// run: sizes up to passFrom pass, up to runFrom run (wrong), larger crash
	run := func(passFrom, runFrom int, ran bool) func(k int) (ScaleRun, bool) {
		return func(k int) (ScaleRun, bool) {
			l := 8 >> k
			return ScaleRun{OK: l <= passFrom, Crashed: l > runFrom, Size: fmt.Sprintf("l=%d", l), Where: fmt.Sprintf("at %d", l)}, ran
		}
	}
	for _, c := range []struct {
		name             string
		full             ScaleRun
		smaller          func(k int) (ScaleRun, bool)
		tag              string
		k                int
		content, lacking []string
	}{
		{"half passes", ok, run(4, 8, true), "scale:past-size", 1, []string{"wrong only past a size: passes at l=4 (at 4), fails at l=8", "first failing token 7 (its x offset 70)"}, nil},
		{"a quarter passes", ok, run(2, 8, true), "scale:past-size", 2, []string{"passes at l=2 (at 2), fails at l=4 (at 4)", "first failing token 7"}, nil},
		{"every size fails", ok, run(0, 8, true), "scale:fails", 0, []string{"wrong at every size tried", "l=4 (at 4), l=2 (at 2), l=1 (at 1)", "first failing token 7"}, []string{"l=0"}},
		{"smaller not run", ok, run(8, 8, false), "scale:fails", 0, []string{"wrong at this size"}, []string{"passes"}},
		{"a crash, half passes", crash, run(4, 4, true), "scale:past-size", 1, []string{"crashes only past a size: passes at l=4 (at 4), fails at l=8", "the call: fault"}, []string{"first failing token"}},
		{"a crash, a quarter runs wrong", crash, run(0, 2, true), "scale:past-size", 2,
			[]string{"crashes only past a size: runs at l=2, though wrong there (at 2); fails at l=4 (at 4)"}, []string{"passes"}},
		{"a crash, wrong numbers smaller are not a pass", ok, run(0, 2, true), "scale:fails", 0, []string{"wrong at every size tried"}, nil},
		{"a crash at every size", crash, run(0, 0, true), "scale:fails", 0, []string{"crashes at every size tried", "l=1 (at 1)"}, []string{"wrong at every"}},
	} {
		f, k := ScaleFinding(c.full, "x", c.smaller)
		if f.Tag != c.tag || k != c.k {
			t.Errorf("%s: [%s] at k=%d, want [%s] at k=%d", c.name, f.Tag, k, c.tag, c.k)
		}
		text := f.Cause + "; " + f.Where
		for _, w := range c.content {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q lacks %q", c.name, text, w)
			}
		}
		for _, w := range c.lacking {
			if strings.Contains(text, w) {
				t.Errorf("%s: %q has %q", c.name, text, w)
			}
		}
	}
}
