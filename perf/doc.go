// Package perf decides every performance verdict of the suite, from
// measurements alone: the seven checks of CHECKS.md (the TestCheckN tests
// of package verify measure, and call these functions to decide), the
// gate's comparison of Check7 with a stored baseline, and make bench's
// speed targets. Each decision is tested on synthetic samples that must
// make it fail, and on noise that must leave it undecided.
//
// # Samples and intervals
//
// A measurement is Samples: per-launch times in µs. Its centre is the
// median, its noise the relative interquartile range (Spread), its
// uncertainty a 95% percentile-bootstrap interval of the median
// (BootstrapCI) or of the ratio of two medians (RatioCI; fixed seeds, so a
// report is reproducible). A baseline comparison uses benchstat's
// statistics instead (golang.org/x/perf/benchmath: medians with
// distribution-free intervals, a Mann–Whitney U test at α = 0.05).
//
// # Three outcomes
//
// A decision passes only when its interval lies wholly on the passing side
// of its bound, fails only when it lies wholly on the failing side, and is
// undecided otherwise, with the reason: a timer whose readings carry ±60%
// noise gets no passing check. Noise is not the only way to look slow: a
// cold start (a run of slow launches, then steady ones) is a step change,
// which Warmup finds before it measures the steady state's spread, so that
// twenty launches at ten times the steady time fail Check5 instead of
// widening its band until nothing can be decided.
//
// # Figures that cannot be true
//
// A copy bandwidth beyond any memory built (MaxCopyBandwidthGBps) or a
// time that is not positive and finite is a broken timer or probe, and the
// check that reads it says so instead of dividing by it.
package perf
