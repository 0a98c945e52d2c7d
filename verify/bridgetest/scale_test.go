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
// tried.
func TestScaleFinding(t *testing.T) {
	full := ScaleRun{Size: "l=8", Where: "worst y", First: 7, Offset: 70}
	run := func(passFrom int, ran bool) func(k int) (ScaleRun, bool) {
		return func(k int) (ScaleRun, bool) {
			l := 8 >> k
			return ScaleRun{OK: l <= passFrom, Size: fmt.Sprintf("l=%d", l), Where: fmt.Sprintf("at %d", l)}, ran
		}
	}
	for _, c := range []struct {
		name             string
		smaller          func(k int) (ScaleRun, bool)
		tag              string
		content, lacking []string
	}{
		{"half passes", run(4, true), "scale:past-size", []string{"passes at l=4 (at 4), fails at l=8", "first failing token 7 (its x offset 70)"}, nil},
		{"a quarter passes", run(2, true), "scale:past-size", []string{"passes at l=2 (at 2), fails at l=4 (at 4)", "first failing token 7"}, nil},
		{"every size fails", run(0, true), "scale:fails", []string{"every size tried", "l=4 (at 4), l=2 (at 2), l=1 (at 1)", "first failing token 7"}, []string{"l=0"}},
		{"smaller not run", run(8, false), "scale:fails", []string{"wrong at this size"}, []string{"passes"}},
	} {
		f := ScaleFinding(full, "x", c.smaller)
		if f.Tag != c.tag {
			t.Errorf("%s: [%s], want [%s]", c.name, f.Tag, c.tag)
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
