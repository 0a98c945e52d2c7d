package diagnose

import (
	"fmt"
	"math"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// narrowBackward explains a failing backward of a 16-bit dtype by the slips
// of its storage, each tested against the gradients it would give:
//
//   - bwd-weights-16bit: the failing gradients are weights' (dA, constant
//     dB/dC, dD, ddelta_bias, dinitial_state), which the ABI keeps in
//     float, and every value of them is a value of the 16-bit type: they
//     were stored as if they were inputs;
//   - bwd-truncated: only input-typed gradients fail, at least 9 in 10 of
//     the failing elements toward 0 from the reference within one ulp of
//     the 16-bit type: they are truncated, not rounded to nearest;
//   - bwd-16bit-sum: only variable dB and dC fail, the sums over a group's
//     channels, and the library's float32 backward of the same problem
//     gets them right: the sum is kept in the 16-bit type;
//   - bwd-y-16bit: only dz fails, and nine in ten of its failing elements
//     pass against the gate's derivative at y rounded to the input type,
//     dz = dout·round(y)·σ(z)·(1 + z·(1 − σ(z))): a second rounding (a
//     backward that reads y back from a 16-bit out).
func narrowBackward(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, got, want *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType, failing []judge.GradWorst) (tag, cause string, ok bool) {
	if !dt.Narrow() {
		return "", "", false
	}
	gotBy, wantBy := got.ByName(), want.ByName()
	inputOnly, weightsNarrow, weights := true, true, 0
	for _, g := range failing {
		if ssm.InputTyped(p, g.Name) {
			continue
		}
		inputOnly = false
		weights++
		exact := true
		for i, v := range gotBy[g.Name] {
			weightsNarrow = weightsNarrow && dt.Round(v) == v
			exact = exact && dt.Round(wantBy[g.Name][i]) == wantBy[g.Name][i]
		}
		weightsNarrow = weightsNarrow && !exact
	}
	if weights > 0 && weightsNarrow {
		return "bwd-weights-16bit", fmt.Sprintf("%d gradients of float weights fail and every value of them is a %v value: they are stored in the input type, which the ABI keeps for du, ddelta, dz and variable dB/dC", weights, dt), true
	}
	if !inputOnly {
		return "", "", false
	}
	if len(failing) == 1 && failing[0].Name == "dz" && p.Z != nil {
		if alt := yRoundedDz(p, ct, want, dt); alt != nil {
			w := *want
			w.Z = alt
			// Where the kernel's float32 y and the reference's lie on two
			// sides of a rounding boundary of the 16-bit type, their rounded
			// values differ by an ulp: a few elements may fail the model at y
			// rounded too, nine in ten of the failures must go.
			before, after := failingCount(p, got, dt, want, sc, "dz"), failingCount(p, got, dt, &w, sc, "dz")
			if before > 0 && 10*after <= before {
				return "bwd-y-16bit", fmt.Sprintf("only dz is wrong, and it is the gate's derivative at y rounded to %v (%d of its %d failing elements pass at the rounded y): "+
					"a second rounding (y read back from a 16-bit out), where the ABI rounds dz once", dt, before-after, before), true
			}
		}
	}
	if tag, cause, ok := groupSum16(l, p, ct, want, sc, dt, failing); ok {
		return tag, cause, true
	}
	failed, toward := 0, 0
	judgeEach(p, got, dt, want, sc, func(name string, i int, r float64) {
		if !ssm.InputTyped(p, name) || !(r > judge.Threshold(dt) || math.IsNaN(r)) {
			return
		}
		failed++
		g, w := gotBy[name][i], wantBy[name][i]
		if math.Abs(g) <= math.Abs(w) && (g == 0 || math.Signbit(g) == math.Signbit(w)) && judge.ULPs(g, w, dt) <= 1 {
			toward++
		}
	})
	// 9 in 10, not all: where a gradient cancels, the float32 value a
	// kernel truncates differs from the reference by more than an ulp of it.
	if failed > 0 && 10*toward >= 9*failed {
		return "bwd-truncated", fmt.Sprintf("%d of the %d failing input-typed gradients lie toward 0 from the reference within one %v ulp: they are truncated, not rounded to nearest", toward, failed, dt), true
	}
	return "", "", false
}

// groupSum16 explains failures of the variable dB and dC alone, which are
// sums over the channels of a group, when the library's float32 backward
// of the same problem passes them (bwd-16bit-sum). want and sc are the
// reference gradients of p and ct and their scale, which for a 16-bit dtype
// is float32's.
func groupSum16(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, want *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType, failing []judge.GradWorst) (tag, cause string, ok bool) {
	for _, g := range failing {
		if !(g.Name == "dB" && p.VariableB || g.Name == "dC" && p.VariableC) {
			return "", "", false
		}
	}
	if p.Dim/p.Groups < 2 {
		return "", "", false
	}
	got, err := l.Backward(p, ct, ssm.F32, false)
	if err != nil {
		return "", "", false
	}
	c := judge.CompareGrads(p, got, ssm.F32, want, sc)
	if contains(c.Failing(ssm.F32), "dB") || contains(c.Failing(ssm.F32), "dC") {
		return "", "", false
	}
	return "bwd-16bit-sum", fmt.Sprintf("only the variable dB and dC fail, the sums over a group's %d channels, and the library's float32 backward of the same inputs gets them right: "+
		"the sum is kept in %v (16-bit atomics, say), not in float", p.Dim/p.Groups, dt), true
}

// failingCount is the number of elements of the gradient name beyond the
// threshold.
func failingCount(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, want *ssm.Grads, sc *mamba1.GradScale, name string) int {
	n := 0
	judge.EachGradRatio(p, got, dt, want, sc, func(g string, _ int, r float64) {
		if g == name && (r > judge.Threshold(dt) || math.IsNaN(r)) {
			n++
		}
	})
	return n
}

// judgeEach is judge.EachGradRatio over real arrays (the input-typed
// gradients of the 16-bit dtypes' real A) with the element's flat index.
func judgeEach(p *ssm.Problem, got *ssm.Grads, dt ssm.DType, want *ssm.Grads, sc *mamba1.GradScale, f func(name string, i int, r float64)) {
	judge.EachGradRatio(p, got, dt, want, sc, func(name string, e int, r float64) {
		if p.Complex && (name == "dB" || name == "dC") {
			e *= 2
		}
		f(name, e, r)
	})
}

// yRoundedDz is dz as a backward forms it from y rounded to the input type:
// dout·round(y)·σ(z)·(1 + z·(1 − σ(z))), y the float64 reference's output
// before the gate (nil if the reference refuses).
func yRoundedDz(p *ssm.Problem, ct *ssm.Cotangent, want *ssm.Grads, dt ssm.DType) []float64 {
	q := p.Clone()
	q.Z = nil
	y, err := mamba1.Scan(q, ssm.Float64)
	if err != nil {
		return nil
	}
	dz := make([]float64, len(want.Z))
	for i, z := range p.Z {
		sig := 1 / (1 + math.Exp(-z))
		dz[i] = ct.Out[i] * dt.Round(y.Out[i]) * sig * (1 + z*(1-sig))
	}
	return dz
}
