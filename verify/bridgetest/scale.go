package bridgetest

import (
	"fmt"
	"slices"
	"strings"

	"ssmverify/report"
)

// A ScaleRun is one call of a scale case at one size: whether it passed,
// whether the kernel crashed (raised: an illegal access, a refusal of the
// size), the size and the verdict in words, the first failing token (−1:
// none) and that token's element offset in the case's largest input.
type ScaleRun struct {
	OK, Crashed   bool
	Size, Where   string
	First, Offset int
}

// ScaleChannels are the channels of a head of P that the scale cases
// judge: the first, second, a middle and the last (a head's edges, where
// an index slips). Each is a recurrence of its own (its row of the
// state), so a million tokens' float64 reference costs seconds at these,
// where all of a head's would cost half an hour.
func ScaleChannels(P int) []int {
	var ch []int
	for _, c := range []int{0, 1, P / 2, P - 1} {
		if c >= 0 && c < P && !slices.Contains(ch, c) {
			ch = append(ch, c)
		}
	}
	return ch
}

// ScaleHalvings is how many times ScaleFinding halves a failing case
// looking for a size that passes: 2³¹ elements of the largest array is
// reached from the cases' sizes within three (a case's second array, its
// chunk states, may lie past 2³¹ at half of its first's size).
const ScaleHalvings = 3

// ScaleFinding is the finding of a scale case that failed at full size
// (a crash included): the case is run again at half the size, and half
// again (smaller(k): the size halved k times; false where it could not
// run), up to ScaleHalvings times, until a size passes — or, where the
// full size crashed, until one runs at all. Where one does, the failure
// appears only past a size — the mark of an offset that wraps — and the
// finding is scale:past-size with the largest size that passes (or runs)
// and the smallest that fails; where none does, scale:fails with every
// size tried. The full run's first failing token and its offset in input
// go with either. The second result is the k of the size that ended the
// search (0: none did): where a crash past a size gave way to numbers
// that are wrong, their cause is the caller's to diagnose at that size (a
// property of every size, beside the crash of the large ones).
func ScaleFinding(full ScaleRun, input string, smaller func(k int) (ScaleRun, bool)) (report.Finding, int) {
	f := report.Finding{Tag: "scale:fails", Cause: "wrong at this size", Where: full.Size + "; " + full.Where}
	if full.First >= 0 {
		f.Where += fmt.Sprintf("; first failing token %d (its %s offset %d)", full.First, input, full.Offset)
	}
	what := "wrong" // the full size's failure, in words
	if full.Crashed {
		what = "crashes" // and, while the search goes on, every smaller size
	}
	failing := full
	var tried []string
	for k := 1; k <= ScaleHalvings; k++ {
		h, ran := smaller(k)
		if !ran {
			break
		}
		fails := "fails at " + failing.Size
		if failing.Size != full.Size {
			fails += fmt.Sprintf(" (%s)", failing.Where)
		}
		switch {
		case h.OK:
			f.Tag, f.Cause = "scale:past-size", fmt.Sprintf("%s only past a size: passes at %s (%s), %s", what, h.Size, h.Where, fails)
			return f, k
		case full.Crashed && !h.Crashed: // every larger size crashed
			f.Tag, f.Cause = "scale:past-size", fmt.Sprintf("crashes only past a size: runs at %s, though wrong there (%s); %s", h.Size, h.Where, fails)
			return f, k
		}
		failing = h
		tried = append(tried, fmt.Sprintf("%s (%s)", h.Size, h.Where))
	}
	if len(tried) > 0 {
		f.Cause = what + " at every size tried: at this one and at " + strings.Join(tried, ", ")
	}
	return f, 0
}
