package bridgetest

import (
	"fmt"

	"ssmverify/report"
)

// A ScaleRun is one call of a scale case at one size: whether it passed,
// the size and the verdict in words, the first failing token (−1: none)
// and that token's element offset in the case's largest input.
type ScaleRun struct {
	OK            bool
	Size, Where   string
	First, Offset int
}

// ScaleFinding is the finding of a scale case that failed at full size:
// scale:fails, or scale:past-size where the same case at half the size
// (half, which reports false where it could not run) passes — a failure
// that appears only past a size, the mark of an offset that wraps — with
// both sizes and the first failing token's offset in input.
func ScaleFinding(full ScaleRun, input string, half func() (ScaleRun, bool)) report.Finding {
	f := report.Finding{Tag: "scale:fails", Cause: "wrong at this size", Where: full.Size + "; " + full.Where}
	if full.First >= 0 {
		f.Where += fmt.Sprintf("; first failing token %d (its %s offset %d)", full.First, input, full.Offset)
	}
	if h, ran := half(); ran && h.OK {
		f.Tag, f.Cause = "scale:past-size", fmt.Sprintf("wrong only past a size: passes at %s (%s), fails at %s", h.Size, h.Where, full.Size)
	}
	return f
}
