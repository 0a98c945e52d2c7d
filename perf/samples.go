package perf

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Samples are per-launch times in microseconds.
type Samples []float64

// Median of the samples (NaN when empty).
func (s Samples) Median() float64 { return s.Quantile(0.5) }

// Quantile by linear interpolation between order statistics.
func (s Samples) Quantile(q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	v := slices.Clone(s)
	slices.Sort(v)
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(v)-1)
	return v[lo] + (pos-float64(lo))*(v[hi]-v[lo])
}

// Spread is the relative interquartile range (Q3 − Q1)/median, the noise
// measure every check uses.
func (s Samples) Spread() float64 {
	m := s.Median()
	if m == 0 || math.IsNaN(m) {
		return math.NaN()
	}
	return (s.Quantile(0.75) - s.Quantile(0.25)) / m
}

// BootstrapCI is the 95% percentile-bootstrap confidence interval of the
// median (2000 resamples, a fixed seed so that reports are reproducible).
func (s Samples) BootstrapCI() (lo, hi float64) {
	if len(s) < 2 {
		m := s.Median()
		return m, m
	}
	r := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, 2000)
	buf := make(Samples, len(s))
	for i := range meds {
		for j := range buf {
			buf[j] = s[r.IntN(len(s))]
		}
		meds[i] = buf.Median()
	}
	m := Samples(meds)
	return m.Quantile(0.025), m.Quantile(0.975)
}

// RatioCI is the 95% bootstrap interval of median(a)/median(b), resampling
// both independently.
func RatioCI(a, b Samples) (lo, hi float64) {
	r := rand.New(rand.NewPCG(3, 4))
	ratios := make(Samples, 2000)
	ba, bb := make(Samples, len(a)), make(Samples, len(b))
	for i := range ratios {
		for j := range ba {
			ba[j] = a[r.IntN(len(a))]
		}
		for j := range bb {
			bb[j] = b[r.IntN(len(b))]
		}
		ratios[i] = ba.Median() / bb.Median()
	}
	return ratios.Quantile(0.025), ratios.Quantile(0.975)
}
