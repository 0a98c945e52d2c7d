package diagnose

import (
	"fmt"
	"math"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The probes of a mixed-precision kernel (fp16 or bf16 inputs, float32
// state): small scans whose float32 last state shows, exactly, the
// precision the kernel keeps its state and its Δ·a in. Every input is a
// value of both 16-bit types, so the kernel reads what the probe means.

// stateBits measures the significand the kernel keeps its state in: one
// channel, one state, a = 0 (Ā = 1 and g = 1 for every method), Δ = B =
// C = 1, u₀ = 1 and then 64 steps of u = inc. A float32 state ends at
// 1 + 64·inc exactly; a state of p bits whose ulp at 1 exceeds 2·inc
// rounds each 1 + inc back to 1 and ends at 1. With inc = 2⁻¹² (below fp16's
// and bf16's half ulp at 1) and inc = 2⁻⁹ (above fp16's, below bf16's) it
// returns 24 (float32 or better), 11 (fp16-like) or 8 (bf16-like), or 0
// when the probe cannot run or its result fits none.
func stateBits(s Scanner, m ssm.Method, dt ssm.DType) int {
	end := func(inc float64) (float64, bool) {
		u := make([]float64, 65)
		u[0] = 1
		for i := 1; i < len(u); i++ {
			u[i] = inc
		}
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: len(u), Dstate: 1, Groups: 1, Method: m,
			U: u, Delta: ones(len(u)), A: []float64{0}, B: []float64{1}, C: []float64{1}}
		o, err := s.Scan(p, dt)
		if err != nil || len(o.LastState) < 1 {
			return 0, false
		}
		return o.LastState[0], true
	}
	fine, ok1 := end(0x1p-12)
	coarse, ok2 := end(0x1p-9)
	switch {
	case !ok1 || !ok2:
		return 0
	case fine == 1+64*0x1p-12:
		return 24
	case fine == 1 && coarse == 1+64*0x1p-9:
		return 11
	case fine == 1 && coarse == 1:
		return 8
	}
	return 0
}

// xRounded tells whether the kernel rounds x = Δ·a to 16 bits before its
// coefficients: Δ = 1 + 2⁻⁷ and a = −(1 + 2⁻¹²) give x = −(1 + 2⁻⁷ + 2⁻¹² +
// 2⁻¹⁹), which fp16 and bf16 both round to −(1 + 2⁻⁷), changing Ā by a
// relative 2.4·10⁻⁴. Two steps (u = 1, then 0) leave the state Ā·Bcoef after
// Bcoef, so the kernel's Ā is the ratio of the last states of a two-step
// and a one-step scan, to float32's precision. It returns the relative
// distances of that Ā from the method's Ā at x and at x rounded.
func xRounded(s Scanner, m ssm.Method, dt ssm.DType) (exact, rounded float64, ok bool) {
	delta, a := 1+0x1p-7, -(1 + 0x1p-12)
	state := func(u []float64) (float64, bool) {
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: len(u), Dstate: 1, Groups: 1, Method: m,
			U: u, Delta: fill(len(u), delta), A: []float64{a}, B: []float64{1}, C: []float64{1}}
		o, err := s.Scan(p, dt)
		if err != nil || len(o.LastState) < 1 || o.LastState[0] == 0 {
			return 0, false
		}
		return o.LastState[0], true
	}
	one, ok1 := state([]float64{1})
	two, ok2 := state([]float64{1, 0})
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	got := two / one
	x := delta * a
	want, _ := mamba1.Real(m, x)
	wantRounded, _ := mamba1.Real(m, dt.Round(x))
	return math.Abs(got-want) / math.Abs(want), math.Abs(got-wantRounded) / math.Abs(wantRounded), true
}

// explainNarrow runs the probes for a failing kernel of a 16-bit dtype:
// a state of fewer than 24 bits, or x = Δ·a rounded to the input type.
func explainNarrow(s Scanner, m ssm.Method, dt ssm.DType) (tag, cause string, ok bool) {
	if bits := stateBits(s, m, dt); bits == 8 || bits == 11 {
		return "state-16bit", fmt.Sprintf("the state is kept in %d-bit significands (%s) between steps, not in float32: "+
			"from 1, 64 steps of +2^-12 leave it at 1 (the probe's last state), where a float32 state reaches 1 + 2^-6",
			bits, map[int]string{8: "bfloat16", 11: "fp16"}[bits]), true
	}
	if exact, rounded, ok := xRounded(s, m, dt); ok && rounded < 1e-5 && exact > 1e-4 {
		return "dA-16bit", fmt.Sprintf("x = Δ·a is rounded to 16 bits before the coefficients: at x = −(1 + 2^-7)(1 + 2^-12) the kernel's Ā "+
			"is the method's at x rounded to %v (relative distance %.2g) and not at x (%.2g)", dt, rounded, exact), true
	}
	return "", "", false
}

func ones(n int) []float64 { return fill(n, 1) }
