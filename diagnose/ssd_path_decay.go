package diagnose

import (
	"fmt"
	"math"

	"ssmverify/judge"
	"ssmverify/mamba2"
)

// The decay of a chunked backward's state path. A chunked kernel takes
// the cotangent of the state at each chunk's end into the chunk's steps
// through the decay from the step to the chunk's end,
//
//	e^{cum_end − cum_t},  cum_t = Σ_{s ≤ t in the chunk} Δ_s·A,
//
// which it forms from the chunk's cumulative sums (dA_cumsum). An
// exponent read wrong there — the chunk's end negated, taken at another
// step, dropped, an exp2 for an exp — multiplies that path's part of the
// gradient by e^{α·cum_end + β·cum_t} for constants α and β: (−2, 0) for
// cum_end negated, (−1, 0) for it dropped, (0, 2) for cum_t's sign,
// (ln 2 − 1)·(1, −1) for exp2 without log2(e). Two constants fitted over
// the whole gradient are no per-element freedom: where the gradient with
// that part so rescaled passes the error model, the relation holds.

// minDecayPoints is the fewest elements whose path part the error model
// resolves that a rescaling is fitted on.
const minDecayPoints = 32

// pathDecay reports whether gradient a (dx, dz, ddt; dB and dC with a
// group per head) is the reference's with its chunk-state path's part,
// full − cut (cut: mamba2.GradWithout of PathChunkState), times
// e^{α·cum_end + β·cum_t}, α and β fitted to the logarithm of the part's
// implied factor where the model resolves it (its allowance below 5% of
// the part) and the factor is positive; the relation holds where the
// rescaled gradient passes and the fitted exponent is not zero.
func pathDecay(p *mamba2.Problem, a judge.Array, full, cut []float64, th float64) (Candidate, bool) {
	n := len(a.Got)
	if p.Chunk <= 0 || n == 0 || len(full) != n || len(cut) != n || len(a.Want) != n || len(a.Scale) != n {
		return Candidate{}, false
	}
	end, cum, ok := chunkCumsums(p, a.Name, n)
	if !ok {
		return Candidate{}, false
	}
	unit := a.Computed.Precision().UnitRoundoff()
	// log k = α·E + β·T by least squares over the resolved points
	var sEE, sET, sTT, sEy, sTy float64
	pts := 0
	for i := range a.Got {
		d := full[i] - cut[i]
		g := a.Got[i]
		if d == 0 || math.IsNaN(g) || math.IsInf(g, 0) {
			continue
		}
		tiny := 0.0
		if len(a.Tiny) == n {
			tiny = a.Tiny[i]
		}
		if th*unit*(a.Scale[i]+tiny) > 0.05*math.Abs(d) {
			continue
		}
		k := (g - cut[i]) / d
		if !(k > 0) {
			continue
		}
		y, e, t := math.Log(k), end[i], cum[i]
		sEE, sET, sTT, sEy, sTy = sEE+e*e, sET+e*t, sTT+t*t, sEy+e*y, sTy+t*y
		pts++
	}
	det := sEE*sTT - sET*sET
	if pts < minDecayPoints || !(math.Abs(det) > 1e-12*(sEE*sTT)) {
		return Candidate{}, false
	}
	alpha, beta := (sEy*sTT-sTy*sET)/det, (sTy*sEE-sEy*sET)/det
	// the exponents as the simple constants a slip gives, where they fit
	// as well
	for _, r := range []struct{ a, b float64 }{{snap(alpha), snap(beta)}, {alpha, beta}} {
		if math.Abs(r.a) < 1e-3 && math.Abs(r.b) < 1e-3 {
			continue
		}
		want := make([]float64, n)
		for i := range want {
			want[i] = cut[i] + math.Exp(r.a*end[i]+r.b*cum[i])*(full[i]-cut[i])
		}
		b := a
		b.Want = want
		if ok, _ := ssdJudged([]judge.Array{b}); ok {
			return Candidate{Tag: fmt.Sprintf("decay(chunk-state,%s,%s)", expTerm(r.a, "end"), expTerm(r.b, "t")),
				Cause: fmt.Sprintf("has its part through the state at each chunk's end times e^{%.3g·cum_end %+.3g·cum_t} (fitted on %d of its %d elements): the exponent of that path's decay, e^{cum_end − cum_t}, read wrong%s",
					r.a, r.b, pts, n, decayWords(r.a, r.b))}, true
		}
	}
	return Candidate{}, false
}

// chunkCumsums are, per element of gradient name (n elements), the
// cumulative Δ·A of its head within its chunk up to its step (cum_t) and
// over the whole chunk (cum_end), the row's chunks of p.Chunk steps from
// its start; ok false for a gradient not per step and head.
func chunkCumsums(p *mamba2.Problem, name string, n int) (end, cum []float64, ok bool) {
	L, H, Q := p.Seqlen, p.Heads, p.Chunk
	var inner int // elements per (row, step, head)
	switch name {
	case "dx", "dz":
		inner = p.Headdim
	case "ddt":
		inner = 1
	case "dB", "dC":
		if p.Groups != H {
			return nil, nil, false
		}
		inner = p.Dstate
	default:
		return nil, nil, false
	}
	if n != p.Batch*L*H*inner {
		return nil, nil, false
	}
	lo, hi := p.Limits()
	// per (row, head): the cumulative sums along the row, restarted at
	// each chunk
	c, e := make([]float64, p.Batch*L*H), make([]float64, p.Batch*L*H)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			for c0 := 0; c0 < L; c0 += Q {
				s := 0.0
				c1 := min(c0+Q, L)
				for t := c0; t < c1; t++ {
					s += mamba2.Delta(p.Dt[(b*L+t)*H+h], bias, p.Softplus, lo, hi) * p.A[h]
					c[(b*L+t)*H+h] = s
				}
				for t := c0; t < c1; t++ {
					e[(b*L+t)*H+h] = s
				}
			}
		}
	}
	end, cum = make([]float64, n), make([]float64, n)
	for i := range end {
		end[i], cum[i] = e[i/inner], c[i/inner]
	}
	return end, cum, true
}

// snap is x as the nearest of the constants a slip of an exponent gives
// (0, ±1, ±2, ±(ln 2 − 1), ±(1/ln 2 − 1)) within 2%, else x.
func snap(x float64) float64 {
	for _, c := range []float64{0, 1, -1, 2, -2, math.Ln2 - 1, 1 - math.Ln2, 1/math.Ln2 - 1, 1 - 1/math.Ln2} {
		if math.Abs(x-c) <= 0.02*math.Max(1, math.Abs(c)) {
			return c
		}
	}
	return x
}

// expTerm writes one fitted exponent for a tag: "2·end", "-2·end",
// "0.307·t"; "" for none.
func expTerm(x float64, what string) string {
	switch {
	case x == 0:
		return "0"
	case x == 1:
		return what
	case x == -1:
		return "-" + what
	}
	return fmt.Sprintf("%.3g·%s", x, what)
}

// decayWords says which slip of the exponent the constants are, where
// they are one.
func decayWords(a, b float64) string {
	switch {
	case a == -2 && b == 0:
		return " (the chunk's end negated: e^{−cum_end − cum_t})"
	case a == -1 && b == 0:
		return " (the chunk's end dropped: e^{−cum_t})"
	case a == 0 && b == 2:
		return " (the step's sign flipped: e^{cum_end + cum_t})"
	case a == 0 && b == 1:
		return " (the step's term dropped: e^{cum_end})"
	case a == math.Ln2-1 && b == 1-math.Ln2:
		return " (an exp2 for an exp, without log2(e))"
	case a == 1/math.Ln2-1 && b == 1-1/math.Ln2:
		return " (log2(e) applied to an exp)"
	}
	return ""
}
