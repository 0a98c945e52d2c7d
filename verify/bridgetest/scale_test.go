package bridgetest

import (
	"strings"
	"testing"
)

// TestScaleFinding: a failure whose half-size case passes is past-size
// with both sizes and the first failing token's offset; one whose half
// fails too, or could not run, stays scale:fails.
func TestScaleFinding(t *testing.T) {
	full := ScaleRun{Size: "l=2", Where: "worst y", First: 7, Offset: 70}
	for _, c := range []struct {
		name    string
		half    ScaleRun
		ran     bool
		tag     string
		content []string
	}{
		{"half passes", ScaleRun{OK: true, Size: "l=1", Where: "ok"}, true, "scale:past-size", []string{"passes at l=1 (ok), fails at l=2", "first failing token 7 (its x offset 70)"}},
		{"half fails", ScaleRun{Size: "l=1"}, true, "scale:fails", []string{"first failing token 7"}},
		{"half not run", ScaleRun{OK: true}, false, "scale:fails", nil},
	} {
		f := ScaleFinding(full, "x", func() (ScaleRun, bool) { return c.half, c.ran })
		if f.Tag != c.tag {
			t.Errorf("%s: [%s], want [%s]", c.name, f.Tag, c.tag)
		}
		for _, w := range c.content {
			if !strings.Contains(f.Cause+"; "+f.Where, w) {
				t.Errorf("%s: %q lacks %q", c.name, f.Cause+"; "+f.Where, w)
			}
		}
	}
}
