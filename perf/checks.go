package perf

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"ssmverify/report"
)

// Outcome is what a decision decided.
type Outcome int

const (
	Pass Outcome = iota
	Fail
	Undecided // the figures cannot decide: never a pass
)

func (o Outcome) String() string { return [...]string{"pass", "fail", "undecided"}[o] }

// Hash is the hex sha256 of a byte slice.
func Hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// DecideIdenticalInputs (Check1) takes, per method, the hash of every input
// array the kernel was given, and fails unless every method got
// byte-identical inputs.
func DecideIdenticalInputs(hashes map[string]map[string]string) error {
	var ref string
	var refHashes map[string]string
	methods := sortedKeys(hashes)
	for _, m := range methods {
		if refHashes == nil {
			ref, refHashes = m, hashes[m]
			continue
		}
		for _, array := range sortedKeys(refHashes) {
			if hashes[m][array] != refHashes[array] {
				return fmt.Errorf("%s got different %s from %s: sha256 %.12s… vs %.12s…", m, array, ref, hashes[m][array], refHashes[array])
			}
		}
		if len(hashes[m]) != len(refHashes) {
			return fmt.Errorf("%s got %d input arrays, %s got %d", m, len(hashes[m]), ref, len(refHashes))
		}
	}
	return nil
}

// DecideRepeatedLaunches compares the output of a plan's first launch with
// its output after more launches: they must be bitwise equal (NaN where NaN),
// else the kernel changed the inputs it keeps on the device, or is not
// deterministic.
func DecideRepeatedLaunches(first, later []float64) error {
	if len(first) != len(later) {
		return fmt.Errorf("the plan's output has %d elements after its first launch and %d later", len(first), len(later))
	}
	for i := range first {
		if math.Float64bits(first[i]) != math.Float64bits(later[i]) && !(math.IsNaN(first[i]) && math.IsNaN(later[i])) {
			return fmt.Errorf("a plan's later launches give another output than its first (element %d: %v, then %v): "+
				"the kernel modified the inputs it keeps on the device, or is not deterministic", i, first[i], later[i])
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// RatioDecision is the comparison of two interleaved measurements by the
// ratio of their medians against a band [Min, Max]: the ratio with its 95%
// bootstrap interval, whether it decided, and whether the ratio is in the
// band.
type RatioDecision struct {
	Ratio, Lo, Hi float64
	Decided, In   bool
}

// Outcome is the decision's: in the band passes, out of it fails, else
// undecided.
func (d RatioDecision) Outcome() Outcome {
	switch {
	case !d.Decided:
		return Undecided
	case d.In:
		return Pass
	}
	return Fail
}

// DecideRatio decides median(a)/median(b) against [lo, hi] by the ratio's
// 95% interval: wholly outside the band is out (decided); wholly inside it
// and no wider than resolution is in (decided); anything else decides
// nothing. A median inside the band with an interval reaching out of it is
// no pass, and neither is an interval wider than the differences the check
// exists to see (its tolerance on either side): ±60% noise can leave a
// wide interval inside a one-sided band by chance. Check2 and Check6 decide
// by it.
func DecideRatio(a, b Samples, lo, hi, resolution float64) RatioDecision {
	d := RatioDecision{Ratio: a.Median() / b.Median()}
	d.Lo, d.Hi = RatioCI(a, b)
	switch {
	case !(d.Lo <= d.Hi) || math.IsNaN(d.Ratio) || math.IsInf(d.Ratio, 0):
		// A median of zero or NaN: a broken timer decides nothing.
	case d.Lo > hi || d.Hi < lo:
		d.Decided = true
	case d.Lo >= lo && d.Hi <= hi && d.Hi-d.Lo <= resolution:
		d.Decided, d.In = true, true
	}
	return d
}

// SyncTolerance is how far the synced host time may sit from the event
// time: 10% (host clocks add the launch and sync overhead, a few µs, to
// each launch).
const SyncTolerance = 0.10

// DecideSync (Check2) compares the synced host time with the event time,
// measured interleaved, by DecideRatio against 1 ± SyncTolerance: decided
// and out fails (one of the two timers is wrong). It returns how many
// times the unsynced host time underestimates the event time (1 on a
// synchronous backend).
func DecideSync(unsynced, synced, events Samples) (underestimate float64, d RatioDecision, err error) {
	ev, sy := events.Median(), synced.Median()
	underestimate = ev / unsynced.Median()
	d = DecideRatio(synced, events, 1-SyncTolerance, 1+SyncTolerance, 2*SyncTolerance)
	if d.Decided && !d.In {
		err = fmt.Errorf("synced host time %.4g µs and event time %.4g µs: ratio %.3f (95%% CI %.3f–%.3f) outside 1 ± %.2f: one of the two timers is wrong",
			sy, ev, d.Ratio, d.Lo, d.Hi, SyncTolerance)
	}
	return underestimate, d, err
}

// ThreadSetting is one assignment of a threading variable in a script.
type ThreadSetting struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Var   string `json:"var"`
	Value string `json:"value"`
}

var threadVarRE = regexp.MustCompile(`\b(OMP_NUM_THREADS|MKL_NUM_THREADS|OPENBLAS_NUM_THREADS)=("?)([^"\s;]*)`)

// ScanScripts finds every OMP/MKL/OpenBLAS thread-count assignment in the
// shell and Slurm scripts under dir (*.sh, *.bash, *.slurm, *.sbatch, and
// files starting with #!), skipping comment lines.
func ScanScripts(dir string) ([]ThreadSetting, error) {
	var out []ThreadSetting
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		n := 0
		script := false
		switch filepath.Ext(path) {
		case ".sh", ".bash", ".slurm", ".sbatch":
			script = true
		}
		for sc.Scan() {
			n++
			line := sc.Text()
			if n == 1 && strings.HasPrefix(line, "#!") {
				script = true
			}
			if !script {
				return nil
			}
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
				continue
			}
			for _, m := range threadVarRE.FindAllStringSubmatch(line, -1) {
				out = append(out, ThreadSetting{File: path, Line: n, Var: m[1], Value: m[3]})
			}
		}
		return sc.Err()
	})
	return out, err
}

// DecideScripts (Check3) fails when the scripts set one variable to
// different values, listing every file and value.
func DecideScripts(settings []ThreadSetting) error {
	byVar := map[string][]ThreadSetting{}
	for _, s := range settings {
		byVar[s.Var] = append(byVar[s.Var], s)
	}
	var problems []string
	for _, v := range sortedKeys(byVar) {
		values := map[string]bool{}
		for _, s := range byVar[v] {
			values[s.Value] = true
		}
		if len(values) > 1 {
			var where []string
			for _, s := range byVar[v] {
				where = append(where, fmt.Sprintf("%s:%d %s=%s", s.File, s.Line, v, s.Value))
			}
			problems = append(problems, fmt.Sprintf("%s has %d different values: %s", v, len(values), strings.Join(where, "; ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("inconsistent thread settings across scripts (methods run by them are not comparable):\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// DecideThreadResult (Check3, every backend): the output of method with 1
// host thread and with n must be bitwise equal; a library whose result
// depends on its thread count makes benchmarks under different settings
// compare different computations.
func DecideThreadResult(method string, n int, one, all []byte) error {
	if bytes.Equal(one, all) {
		return nil
	}
	first := 0
	for first < min(len(one), len(all)) && one[first] == all[first] {
		first++
	}
	return fmt.Errorf("%s: the output with 1 and %d host threads differs (first at byte %d of %d): the result depends on the thread setting", method, n, first, len(one))
}

// ThreadNoise is the tolerance within which throughput must not depend on
// the host thread count on a GPU backend: 5% or three times the larger
// spread.
func ThreadNoise(one, all Samples) float64 {
	return math.Max(0.05, 3*math.Max(one.Spread(), all.Spread()))
}

// MaxThreadNoise is the widest tolerance at which Check3 can still see the
// time depend on the host threads: 25%. Past it (spreads over 8%) the
// timer's noise hides any dependence a benchmark would care about.
const MaxThreadNoise = 0.25

// DecideThreadIndependence (Check3, GPU backends): time with 1 host thread
// and with all must agree within ThreadNoise; a tolerance over
// MaxThreadNoise decides nothing (undecided, with the reason).
func DecideThreadIndependence(one, all Samples) (ratio float64, o Outcome, reason string) {
	ratio = one.Median() / all.Median()
	tol := ThreadNoise(one, all)
	switch {
	case math.Abs(ratio-1) > tol:
		return ratio, Fail, fmt.Sprintf("time with 1 host thread / with all = %.3f, outside 1 ± %.3f: the GPU backend's speed depends on host threads", ratio, tol)
	case tol > MaxThreadNoise || math.IsNaN(ratio):
		return ratio, Undecided, fmt.Sprintf("time with 1 host thread / with all = %.3f within 1 ± %.3f, a tolerance the timer's spread makes wider than %.2f: it cannot tell", ratio, tol, MaxThreadNoise)
	}
	return ratio, Pass, ""
}

// Collision names two methods whose outputs are indistinguishable.
type Collision struct {
	A, B    string
	RelDiff float64
}

// NonFinite lists the methods whose output has a NaN or an infinity, which
// Fingerprint cannot compare: an output that is not a number says nothing
// of the code path that computed it (the accuracy tests judge it), so the
// pairs with such a method are undecided, not collisions.
func NonFinite(outs map[string][]float64) []string {
	var bad []string
	for _, m := range sortedKeys(outs) {
		for _, v := range outs[m] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				bad = append(bad, m)
				break
			}
		}
	}
	return bad
}

// Fingerprint (Check4) compares every pair of methods' outputs on an input
// where the formulas differ: each pair must differ, relative to the output's
// size, by at least minRel (far above rounding). It returns the pairs that
// do not: a method that runs another's code path, or a fallback. Methods
// with a non-finite output (NonFinite) are left out.
func Fingerprint(outs map[string][]float64, minRel float64) []Collision {
	bad := NonFinite(outs)
	var names []string
	for _, m := range sortedKeys(outs) {
		if !slices.Contains(bad, m) {
			names = append(names, m)
		}
	}
	var out []Collision
	for i, a := range names {
		for _, b := range names[i+1:] {
			var diff, size float64
			for k := range outs[a] {
				diff = math.Max(diff, math.Abs(outs[a][k]-outs[b][k]))
				size = math.Max(size, math.Max(math.Abs(outs[a][k]), math.Abs(outs[b][k])))
			}
			rel := diff / size
			if !(rel >= minRel) {
				out = append(out, Collision{a, b, rel})
			}
		}
	}
	return out
}

// SteadyWithin is Check5's steady-state band: within 5% of the steady
// median, or within twice the steady iterations' own spread when the
// machine is noisier than that (noise is not warm-up).
const SteadyWithin = 0.05

// SteadyState (Check5) returns the cold-start cost (first iteration over the
// steady median) and the number of iterations until steady state: the
// first k whose iteration, and the median of the window of 5 from it, sit
// within the steady band. The steady median and band are those of the
// series' steady tail (SteadyFrom). A single noise spike after a warm start
// is not leading and does not count; every slow iteration at the start
// does, one alone included.
func SteadyState(s Samples) (cold float64, warmupNeeded int) {
	tail := s[SteadyFrom(s):]
	steady := tail.Median()
	band := bandOf(tail)
	cold = s[0] / steady
	// The warm-up is the leading run of iterations outside the band: it ends
	// at the first iteration within it whose next few agree (their median
	// is within it too), so that one lucky sample inside a warm-up does not
	// end it, and one slow first iteration is counted, not smoothed away.
	const window = 5
	for k := 0; k < len(s); k++ {
		within := func(v float64) bool { return math.Abs(v-steady)/steady <= band }
		if within(s[k]) && within(Samples(s[k:min(len(s), k+window)]).Median()) {
			return cold, k
		}
	}
	return cold, len(s)
}

// SteadyBand is the band SteadyState counts as steady for the series s:
// SteadyWithin, or twice the interquartile spread of its steady tail.
func SteadyBand(s Samples) float64 { return bandOf(s[SteadyFrom(s):]) }

func bandOf(tail Samples) float64 { return math.Max(SteadyWithin, 2*tail.Spread()) }

// SteadyFrom is where the steady tail of s starts: its second half, unless
// that half's band is wider than MaxSteadyBand because a cold start runs
// into it. A cold start is a step change, not noise: a leading run whose
// lower quartile lies above the rest's upper quartile by more than
// MaxSteadyBand, after which the rest (at least a quarter of the series,
// and 5 iterations) is steady within MaxSteadyBand; the tail then starts at
// the first such step. Twenty launches at ten times the steady time in a
// series of thirty are such a step, where the second half's band (±1339%)
// would have called them noise; noise of ±60% has no such step.
func SteadyFrom(s Samples) int {
	half := len(s) / 2
	if bandOf(s[half:]) <= MaxSteadyBand {
		return half
	}
	minTail := max(5, len(s)/4)
	for k := 1; k <= len(s)-minTail; k++ {
		lead, tail := s[:k], s[k:]
		if lead.Quantile(0.25) > (1+MaxSteadyBand)*tail.Quantile(0.75) && bandOf(tail) <= MaxSteadyBand {
			return k
		}
	}
	return half
}

// MaxSteadyBand is the widest steady band in which a warm-up can still be
// told from noise: a cold start costs the fresh iterations a factor (2×
// and more for the warm-ups Check5 exists for), which a band of ±50% or
// wider swallows. A measurement that noisy decides nothing (Check5 then
// measures another fresh plan, and is undecided if none is quieter).
const MaxSteadyBand = 0.5

// PairedRatios are fresh[i]/warm[i]: what PairedWarmup judges.
func PairedRatios(fresh, warm Samples) Samples {
	n := min(len(fresh), len(warm))
	r := make(Samples, n)
	for i := range r {
		r[i] = fresh[i] / warm[i]
	}
	return r
}

// PairedWarmup (Check5) judges a fresh plan's iterations against a warm
// plan's, each fresh iteration timed next to one warm iteration: the
// ratios fresh/warm go through SteadyState, so that a burst of machine noise,
// which slows both of a pair alike, cancels instead of widening the steady
// band or raising the steady median until a genuine warm-up hides inside
// them. It returns the cold-start cost (first ratio over the steady ratio)
// and the iterations until steady state.
func PairedWarmup(fresh, warm Samples) (cold float64, warmupNeeded int) {
	return SteadyState(PairedRatios(fresh, warm))
}

// DecideWarmup (Check5): the harness's warm-up must cover the iterations
// the measurement needed.
func DecideWarmup(needed, harnessWarmup int) error {
	if needed > harnessWarmup {
		return fmt.Errorf("the first %d iterations are outside 5%% of the steady median, but the harness warms up only %d", needed, harnessWarmup)
	}
	return nil
}

// LessWorkTolerance is how much longer than the full scan a scan with a
// feature removed may take before Check6 calls it costlier: 10%.
const LessWorkTolerance = 0.10

// DecideLessWork (Check6): a scan with a feature removed (no D, no z,
// constant B/C) does less work than the full scan, measured interleaved
// with it, and must not take longer: by DecideRatio against
// [0, 1 + LessWorkTolerance], decided and out fails (the simpler problem's
// path is slower: a dispatch bug); undecided decides nothing.
func DecideLessWork(name string, full, less Samples) (d RatioDecision, err error) {
	d = DecideRatio(less, full, 0, 1+LessWorkTolerance, 2*LessWorkTolerance)
	if d.Decided && !d.In {
		err = fmt.Errorf("%s takes %.3g× the full scan's time (95%% CI %.3g–%.3g, over 1 + %.2g): doing less work costs more", name, d.Ratio, d.Lo, d.Hi, LessWorkTolerance)
	}
	return d, err
}

// NoiseBound is Check6's bound on a measurement's spread: beyond it the
// figure is measured again and, if still noisy, marked noisy.
const NoiseBound = 0.10

// StableMeasure (Check6) measures, re-measures once when the spread exceeds
// NoiseBound, and reports noisy when it still does.
func StableMeasure(measure func() (Samples, error)) (s Samples, noisy bool, err error) {
	for attempt := 0; attempt < 2; attempt++ {
		if s, err = measure(); err != nil {
			return nil, false, err
		}
		if s.Spread() <= NoiseBound {
			return s, false, nil
		}
	}
	return s, true, nil
}

// MoreWorkThanZOH reports whether a method does at least zoh's work per
// state update (zoh's exp plus more). Bilinear does not: it replaces the exp
// by a division, which can legitimately be cheaper.
func MoreWorkThanZOH(method string) bool { return method != "zoh" && method != "bilinear" }

// DecideMethod (Check7) compares a method with zoh by the ratio of their
// medians and its 95% interval. It fails when the method is slower than
// zoh beyond maxSlowdown (the interval's lower end above it), and flags as
// suspicious a method that does at least zoh's work (MoreWorkThanZOH) yet
// runs significantly faster (the interval's upper end below 1 − margin,
// margin = max(5%, 3·spread)): the +63.76% pattern, where the "faster"
// method ran another code path. It passes only where the figures decide:
// an interval that reaches over maxSlowdown, or one that spans a factor
// wider than maxSlowdown or ResolvedFactor (it cannot resolve the
// differences the check judges), is undecided, with the reason, never
// "ok".
func DecideMethod(method string, s, zoh Samples, maxSlowdown float64) (c report.Check7Row, d Outcome, reason string) {
	c.Method = method
	c.MedianUS = s.Median()
	c.CILowUS, c.CIHighUS = s.BootstrapCI()
	c.RatioToZOH = s.Median() / zoh.Median()
	c.RatioCILow, c.RatioCIHigh = RatioCI(s, zoh)
	c.Verdict = "ok"
	if method == "zoh" {
		return c, Pass, ""
	}
	if !(c.RatioCILow <= c.RatioCIHigh) || math.IsNaN(c.RatioToZOH) || math.IsInf(c.RatioToZOH, 0) || c.RatioToZOH <= 0 {
		c.Verdict = "undecided"
		return c, Undecided, fmt.Sprintf("%s: the ratio to zoh is %v: a timer reading zero, NaN or ∞ decides nothing", method, c.RatioToZOH)
	}
	if c.RatioCILow > maxSlowdown {
		c.Verdict = "too slow"
		return c, Fail, fmt.Sprintf("%s takes %.3f× zoh's time (95%% CI %.3f–%.3f), over the allowed %.2f×", method, c.RatioToZOH, c.RatioCILow, c.RatioCIHigh, maxSlowdown)
	}
	margin := math.Max(0.05, 3*math.Max(s.Spread(), zoh.Spread()))
	if MoreWorkThanZOH(method) && c.RatioCIHigh < 1-margin {
		c.Verdict = "SUSPICIOUS"
		return c, Fail, fmt.Sprintf("SUSPICIOUS: %s does at least zoh's work but takes %.3f× its time (95%% CI %.3f–%.3f): is it running a different code path?", method, c.RatioToZOH, c.RatioCILow, c.RatioCIHigh)
	}
	if c.RatioCIHigh > maxSlowdown {
		c.Verdict = "undecided"
		return c, Undecided, fmt.Sprintf("%s: %.3f× zoh with a 95%% interval %.3f–%.3f across the allowed %.2f×: too noisy to tell", method, c.RatioToZOH, c.RatioCILow, c.RatioCIHigh, maxSlowdown)
	}
	if w, res := c.RatioCIHigh/c.RatioCILow, math.Min(maxSlowdown, ResolvedFactor); w > res {
		c.Verdict = "undecided"
		return c, Undecided, fmt.Sprintf("%s: %.3f× zoh with a 95%% interval %.3f–%.3f, a factor %.2f wide: wider than the %.2f× the check must resolve, it cannot tell a slow method or a different code path",
			method, c.RatioToZOH, c.RatioCILow, c.RatioCIHigh, w, res)
	}
	return c, Pass, ""
}

// ResolvedFactor is the widest ratio interval (its upper end over its
// lower) on which Check7 decides a method: the +63.76% pattern, a method
// that does zoh's work in 1/1.64 of its time, must stand out of an
// interval around 1, so an interval spanning a factor of more than 1.6
// cannot tell it (nor, with a bound under 1.6, a slow method).
const ResolvedFactor = 1.6

// MaxCopyBandwidthGBps bounds a plausible device-to-device copy bandwidth:
// 20 000 GB/s, over twice the fastest memory built today (HBM3e at about
// 8 TB/s). A library's ssmk_copy_bandwidth above it, or not positive, is a
// broken probe or timer, and every fraction of it Check7 reports would be
// false.
const MaxCopyBandwidthGBps = 20000

// CheckCopyBandwidth (Check7) refuses a copy bandwidth no memory can have.
func CheckCopyBandwidth(gbps float64) error {
	if !(gbps > 0) || gbps > MaxCopyBandwidthGBps || math.IsInf(gbps, 0) {
		return fmt.Errorf("the library's copy bandwidth (ssmk_copy_bandwidth) is %.4g GB/s, outside (0, %d]: its probe or timer is broken, so no fraction of it can be reported", gbps, MaxCopyBandwidthGBps)
	}
	return nil
}
