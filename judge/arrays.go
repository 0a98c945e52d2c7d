package judge

import (
	"fmt"
	"math"

	"ssmverify/contain"
	"ssmverify/mamba1"
	"ssmverify/mamba2"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// Array is one array of a bridged kernel's result (Mamba-2's prefill or
// decode step, Mamba-3's forward, step or gradients) judged against its
// reference: got and want with the error model's scale (mamba2.Scale,
// mamba3.Scale), the dtype the kernel stores it in (its 16-bit rounding is
// allowed once) and the arithmetic it computes in.
type Array struct {
	Name             string
	Got, Want        []float64
	Scale, Tiny      []float64
	Stored, Computed ssm.DType
	Index            func(i int) []int // the element's index, for messages
	// Period, when set, compares values modulo it (angles modulo 2π).
	Period float64
}

// CompareArrays judges the arrays of a result: the worst scaled
// ratio over all of them (OutputRatio, in the computing dtype's u and η,
// less the stored type's one rounding), non-finite values where the
// reference is finite counted as failures (but the ∞ a 16-bit stored type
// takes where the value may pass its range: outputMayOverflow), and the per-element ratios
// (for the diagnosis and the error-growth tables).
func CompareArrays(arrays []Array) (c Comparison, ratios map[string][]float64, err error) {
	defer func() {
		if e := contain.Recovered(recover(), "judge.CompareArrays", func() string { return fmt.Sprintf("%d arrays", len(arrays)) }); e != nil {
			c, ratios, err = Comparison{}, nil, e
		}
	}()
	return compareArrays(arrays)
}

func compareArrays(arrays []Array) (Comparison, map[string][]float64, error) {
	var c Comparison
	ratios := map[string][]float64{}
	for _, a := range arrays {
		if len(a.Got) != len(a.Want) {
			return c, nil, fmt.Errorf("judge: %s has %d elements, want %d", a.Name, len(a.Got), len(a.Want))
		}
		if len(a.Scale) != len(a.Want) || len(a.Tiny) != len(a.Want) {
			return c, nil, fmt.Errorf("judge: the error scale of %s has %d elements, want %d: a caller's inconsistency", a.Name, len(a.Scale), len(a.Want))
		}
		rs := make([]float64, len(a.Got))
		for i, g := range a.Got {
			w := a.Want[i]
			c.Elements++
			diff := g - w
			if a.Period > 0 {
				diff = math.Remainder(diff, a.Period)
			}
			r := ssdRatio(diff, w, a.Scale[i], a.Tiny[i], a.Stored, a.Computed)
			switch {
			case math.IsInf(g, 0) && outputMayOverflow(g, w, a.Scale[i], a.Tiny[i], a.Stored):
				r = 0 // a 16-bit value past the type's range, stored as the ∞ of its sign
			case math.IsNaN(g) || math.IsInf(g, 0):
				c.NonFinite++
				r = math.Inf(1)
			}
			rs[i] = r
			if r > c.Worst.Ratio || c.Elements == 1 {
				c.Worst = Worst{Ratio: r, ULP: ULPsOf(g-w, math.Abs(w), a.Stored), Array: a.Name, Index: a.Index(i), Got: g, Want: w}
			}
		}
		ratios[a.Name] = rs
	}
	return c, ratios, nil
}

// ssdRatio is OutputRatio for a value computed in computed's arithmetic
// and stored in stored's type: a 16-bit stored value is allowed its one
// rounding (roundedRatio).
func ssdRatio(diff, want, scale, tiny float64, stored, computed ssm.DType) float64 {
	if stored.Narrow() {
		return roundedRatio(diff, math.Abs(want), scale, tiny, stored, 1)
	}
	if diff == 0 {
		return 0
	}
	return mamba1.Ratio(diff, scale, tiny, computed.Precision())
}

// PrefillArrays returns the arrays of a prefill to judge: y (in the input
// type), the rows' final states and, for a packed row, every sequence's
// (in the state type).
func PrefillArrays(p *mamba2.Problem, got, want *mamba2.Output, sc *mamba2.Scale) []Array {
	if got == nil {
		got = &mamba2.Output{} // no output: every array judged missing
	}
	H, P, N, L := p.Heads, p.Headdim, p.Dstate, p.Seqlen
	computed := p.DType
	if computed.Narrow() {
		computed = ssm.F32
	}
	stateIdx := func(i int) []int { return []int{i / (H * P * N), i / (P * N) % H, i / N % P, i % N} }
	arrays := []Array{
		{Name: "y", Got: got.Y, Want: want.Y, Scale: sc.Y, Tiny: sc.TinyY, Stored: p.DType, Computed: computed,
			Index: func(i int) []int { return []int{i / (L * H * P), i / (H * P) % L, i / P % H, i % P} }},
		{Name: "final_states", Got: got.FinalStates, Want: want.FinalStates, Scale: sc.FinalStates, Tiny: sc.TinyFinal, Stored: p.StateDType, Computed: computed, Index: stateIdx},
	}
	if p.CuSeqlens != nil {
		arrays = append(arrays, Array{Name: "seq_states", Got: got.SeqStates, Want: want.SeqStates, Scale: sc.SeqStates, Tiny: sc.TinySeq, Stored: p.StateDType, Computed: computed, Index: stateIdx})
	}
	return arrays
}

// StepArrays returns the arrays of a decode step to judge: y and the pool
// of states.
func StepArrays(s *mamba2.Step, got, want *mamba2.StepOutput, sc *mamba2.StepScale) []Array {
	if got == nil {
		got = &mamba2.StepOutput{}
	}
	H, P, N := s.Heads, s.Headdim, s.Dstate
	computed := s.DType
	if computed.Narrow() {
		computed = ssm.F32
	}
	return []Array{
		{Name: "y", Got: got.Y, Want: want.Y, Scale: sc.Y, Tiny: sc.TinyY, Stored: s.DType, Computed: computed,
			Index: func(i int) []int { return []int{i / (H * P), i / P % H, i % P} }},
		{Name: "state", Got: got.State, Want: want.State, Scale: sc.State, Tiny: sc.TinyState, Stored: s.StateDType, Computed: computed,
			Index: func(i int) []int { return []int{i / (H * P * N), i / (P * N) % H, i / N % P, i % N} }},
	}
}

// Mamba3Arrays returns the arrays of a Mamba-3 forward of p to judge: y
// and the previous key and value (in p's input type, as the kernel stores
// them), the final angles (compared modulo 2π: an angle within its error
// of 0 may wrap to just under 2π) and the SSM state (float32, float64 for
// an fp64 problem).
func Mamba3Arrays(p *mamba3.Problem, y, wantY []float64, st, want *mamba3.State, sc *mamba3.Scale) []Array {
	if st == nil {
		st = &mamba3.State{}
	}
	idx := func(i int) []int { return []int{i} }
	in, w := p.DType, p.DType.Weight()
	return []Array{
		{Name: "y", Got: y, Want: wantY, Scale: sc.Y, Tiny: sc.TinyY, Stored: in, Computed: w, Index: idx},
		{Name: "angle_state", Got: st.Angle, Want: want.Angle, Scale: sc.Angle, Tiny: sc.TinyAngle, Stored: w, Computed: w, Index: idx, Period: 2 * math.Pi},
		{Name: "ssm_state", Got: st.SSM, Want: want.SSM, Scale: sc.SSM, Tiny: sc.TinySSM, Stored: w, Computed: w, Index: idx},
		{Name: "k_state", Got: st.K, Want: want.K, Scale: sc.K, Tiny: sc.TinyK, Stored: in, Computed: w, Index: idx},
		{Name: "v_state", Got: st.V, Want: want.V, Scale: sc.V, Tiny: sc.TinyV, Stored: in, Computed: w, Index: idx},
	}
}

// Mamba3GradArrays returns the gradients of a Mamba-3 backward to judge,
// each against the float64 gradient with GradErrorScale's scale: the
// gradients of the inputs the kernel reads in p.DType (Q, K, V, Trap,
// Angles, Z, the state's k and v) are stored in it, the rest in its weight
// type. A gradient the reference has and the kernel did not return is an
// error (a kernel that computes no dD when D is given has not done its
// job); one the reference lacks is ignored.
func Mamba3GradArrays(p *mamba3.Problem, got, want *mamba3.Grads, sc *mamba3.GradScale) (arrays []Array, err error) {
	defer func() {
		if e := contain.Recovered(recover(), "judge.Mamba3GradArrays", nil); e != nil {
			arrays, err = nil, e
		}
	}()
	if got == nil {
		return nil, fmt.Errorf("judge: the kernel returned no gradients")
	}
	idx := func(i int) []int { return []int{i} }
	in, w := p.DType, p.DType.Weight()
	gf, sf, tf := got.Fields(), sc.Scale.Fields(), sc.Tiny.Fields()
	var out []Array
	for i, f := range want.Fields() {
		if f.Values == nil {
			continue
		}
		if len(gf[i].Values) != len(f.Values) {
			return nil, fmt.Errorf("judge: the kernel returned %d elements of %s, want %d", len(gf[i].Values), f.Name, len(f.Values))
		}
		stored := w
		if f.InputTyped {
			stored = in
		}
		out = append(out, Array{Name: f.Name, Got: gf[i].Values, Want: f.Values, Scale: sf[i].Values, Tiny: tf[i].Values, Stored: stored, Computed: w, Index: idx})
	}
	return out, nil
}

// Mamba2GradArrays returns the gradients of a Mamba-2 backward to judge,
// each against the float64 gradient with mamba2.GradErrorScale's scale,
// stored in the type the kernel returns it in (mamba2.GradField.Typed:
// the inputs' type, the weights' or the states'). A gradient the
// reference has and the kernel did not return, or returned with another
// length, is an error naming it; one the reference lacks is ignored.
func Mamba2GradArrays(p *mamba2.Problem, got, want *mamba2.Grads, sc *mamba2.GradScale) (arrays []Array, err error) {
	defer func() {
		if e := contain.Recovered(recover(), "judge.Mamba2GradArrays", nil); e != nil {
			arrays, err = nil, e
		}
	}()
	if got == nil {
		return nil, fmt.Errorf("judge: the kernel returned no gradients")
	}
	computed := p.DType
	if computed.Narrow() {
		computed = ssm.F32
	}
	stored := map[string]ssm.DType{"input": p.DType, "weight": p.DType.Weight(), "state": p.StateDType}
	index := gradIndex(p)
	gf, sf, tf := got.Fields(), sc.Scale.Fields(), sc.Tiny.Fields()
	var out []Array
	for i, f := range want.Fields() {
		if f.Values == nil {
			continue
		}
		if len(gf[i].Values) != len(f.Values) {
			return nil, fmt.Errorf("judge: the kernel returned %d elements of %s, want %d", len(gf[i].Values), f.Name, len(f.Values))
		}
		out = append(out, Array{Name: f.Name, Got: gf[i].Values, Want: f.Values, Scale: sf[i].Values, Tiny: tf[i].Values,
			Stored: stored[f.Typed], Computed: computed, Index: index[f.Name]})
	}
	return out, nil
}

// gradIndex gives each of a Mamba-2 backward's gradients its element's
// index in the layout of what it differentiates (mamba2.Problem).
func gradIndex(p *mamba2.Problem) map[string]func(int) []int {
	L, H, P, G, N := p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate
	x := func(i int) []int { return []int{i / (L * H * P), i / (H * P) % L, i / P % H, i % P} }
	bc := func(i int) []int { return []int{i / (L * G * N), i / (G * N) % L, i / N % G, i % N} }
	head := func(i int) []int { return []int{i} }
	return map[string]func(int) []int{"dx": x, "dz": x, "ddt": func(i int) []int { return []int{i / (L * H), i / H % L, i % H} },
		"dA": head, "dD": head, "ddt_bias": head, "dB": bc, "dC": bc,
		"dinitial_states": func(i int) []int { return []int{i / (H * P * N), i / (P * N) % H, i / N % P, i % N} }}
}
