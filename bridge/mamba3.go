package bridge

import (
	"fmt"

	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// The operations of Mamba-3's SISO kernels behind the bridge.
const (
	OpMamba3Forward = "mamba3_fwd"
	OpMamba3Step    = "mamba3_step"
	// OpMamba3Backward is the forward under autograd and its backward for
	// the cotangents "dy" (like y, in the input type) and, optionally,
	// "d_state_angle", "d_state_ssm" (weight type), "d_state_k",
	// "d_state_v" (input type) of the final state; it returns the
	// forward's outputs and "dQ", "dK", … of every input ("dD", "dZ" with
	// D and Z; "dstate_angle", … with an initial state).
	OpMamba3Backward = "mamba3_bwd"
)

// Mamba3 is Mamba-3's SISO forward (mamba3_siso_combined) and decode step
// (mamba3_siso_step) through a worker.
type Mamba3 struct {
	W       *Worker
	Configs map[string]any
}

// Arithmetic returns what the adapter declares of an operation's
// arithmetic ("arithmetic": chunk, operands, approx), for the error model.
func (k *Mamba3) Arithmetic(op string, dt ssm.DType) (mamba3.Arithmetic, error) {
	c, ok := k.W.Hello().Capabilities[op]
	if !ok {
		return mamba3.Arithmetic{}, fmt.Errorf("the adapter declares no %s", op)
	}
	a := mamba3.Arithmetic{Chunk: c.Arithmetic.Chunk, Approx: c.Arithmetic.Approx, U: dt.Precision().UnitRoundoff()}
	if c.Arithmetic.Operands != "" {
		od, ok := DTypeOf(c.Arithmetic.Operands)
		if !ok {
			return a, fmt.Errorf("the adapter declares operands %q, want a dtype tag", c.Arithmetic.Operands)
		}
		a.OperandU = od.OutputRoundoff()
		if !od.Narrow() {
			a.OperandU = od.Precision().UnitRoundoff()
		}
	}
	return a, nil
}

// Supports says why a problem is not declared for op ("" when it is).
func (k *Mamba3) Supports(op string, p *mamba3.Problem) string {
	c, ok := k.W.Hello().Capabilities[op]
	if !ok {
		return "the adapter declares no " + op
	}
	if !c.HasDType(Tag(p.DType)) {
		return fmt.Sprintf("dtype %v not declared (declared: %v)", p.DType, c.DTypes)
	}
	for f, on := range map[string]bool{"D": p.D != nil, "z": p.Z != nil, "state": p.State != nil, "cu_seqlens": p.CuSeqlens != nil} {
		if on && !c.Has(f) {
			return fmt.Sprintf("%s not declared (declared: %v)", f, c.Features)
		}
	}
	return ""
}

func mamba3Message(p *mamba3.Problem, step bool) (map[string]any, []Array) {
	in, w := p.DType, p.DType.Weight()
	B, L, Hqk, H, N, P, A := p.Batch, p.Seqlen, p.HeadsQK, p.Heads, p.N, p.P, p.AngleDim
	seq := func(shape ...int) []int { // drop the l axis for a step
		if !step {
			return shape
		}
		out := []int{shape[0]}
		return append(out, shape[2:]...)
	}
	hl := func() []int {
		if step {
			return []int{B, H}
		}
		return []int{B, H, L}
	}
	arrays := []Array{Floats("Q", p.Q, in, seq(B, L, Hqk, N)...), Floats("K", p.K, in, seq(B, L, Hqk, N)...), Floats("V", p.V, in, seq(B, L, H, P)...),
		Floats("ADT", p.ADT, w, hl()...), Floats("DT", p.DT, w, hl()...), Floats("Trap", p.Trap, in, hl()...),
		Floats("Q_bias", p.QBias, w, H, N), Floats("K_bias", p.KBias, w, H, N), Floats("Angles", p.Angles, in, seq(B, L, H, A)...)}
	if p.D != nil {
		arrays = append(arrays, Floats("D", p.D, w, H))
	}
	if p.Z != nil {
		arrays = append(arrays, Floats("Z", p.Z, in, seq(B, L, H, P)...))
	}
	if s := p.State; s != nil {
		S := p.NumSeqs()
		arrays = append(arrays, Floats("state_angle", s.Angle, w, S, H, A), Floats("state_ssm", s.SSM, w, S, H, P, N),
			Floats("state_k", s.K, in, S, H, N), Floats("state_v", s.V, in, S, H, P))
	}
	if p.CuSeqlens != nil {
		arrays = append(arrays, Ints("cu_seqlens", p.CuSeqlens, len(p.CuSeqlens)))
	}
	return map[string]any{"chunk_size": p.Arithmetic.Chunk}, arrays
}

// Backward runs the kernel's forward and backward on p (Problem.Rounded
// first) for the cotangent ct (its Y rounded to p.DType by the caller, its
// State may be nil). It returns y, the final state and the gradients.
func (k *Mamba3) Backward(p *mamba3.Problem, ct *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, nil, err
	}
	B, L, Hqk, H, N, P, A, S := p.Batch, p.Seqlen, p.HeadsQK, p.Heads, p.N, p.P, p.AngleDim, p.NumSeqs()
	if len(ct.Y) != B*L*H*P {
		return nil, nil, nil, fmt.Errorf("bridge: cotangent Y has %d elements, want %d", len(ct.Y), B*L*H*P)
	}
	params, arrays := mamba3Message(p, false)
	in, w := p.DType, p.DType.Weight()
	arrays = append(arrays, Floats("dy", ct.Y, in, B, L, H, P))
	if c := ct.State; c != nil {
		if len(c.Angle) != S*H*A || len(c.SSM) != S*H*P*N || len(c.K) != S*H*N || len(c.V) != S*H*P {
			return nil, nil, nil, fmt.Errorf("bridge: cotangent State has %d/%d/%d/%d elements, want %d/%d/%d/%d", len(c.Angle), len(c.SSM), len(c.K), len(c.V), S*H*A, S*H*P*N, S*H*N, S*H*P)
		}
		arrays = append(arrays, Floats("d_state_angle", c.Angle, w, S, H, A), Floats("d_state_ssm", c.SSM, w, S, H, P, N),
			Floats("d_state_k", c.K, in, S, H, N), Floats("d_state_v", c.V, in, S, H, P))
	}
	rep, err := k.W.Call("call", OpMamba3Backward, params, arrays)
	if err != nil {
		return nil, nil, nil, err
	}
	k.Configs = rep.Configs
	want := map[string]int{"y": B * L * H * P, "angle": S * H * A, "ssm": S * H * P * N, "k": S * H * N, "v": S * H * P,
		"dQ": B * L * Hqk * N, "dK": B * L * Hqk * N, "dV": B * L * H * P, "dADT": B * H * L, "dDT": B * H * L, "dTrap": B * H * L,
		"dQ_bias": H * N, "dK_bias": H * N, "dAngles": B * L * H * A}
	if p.D != nil {
		want["dD"] = H
	}
	if p.Z != nil {
		want["dZ"] = B * L * H * P
	}
	if p.State != nil {
		want["dstate_angle"], want["dstate_ssm"], want["dstate_k"], want["dstate_v"] = S*H*A, S*H*P*N, S*H*N, S*H*P
	}
	got, err := outputs(rep, want)
	if err != nil {
		return nil, nil, nil, err
	}
	g := &mamba3.Grads{Q: got["dQ"], K: got["dK"], V: got["dV"], ADT: got["dADT"], DT: got["dDT"], Trap: got["dTrap"],
		QBias: got["dQ_bias"], KBias: got["dK_bias"], Angles: got["dAngles"], D: got["dD"], Z: got["dZ"]}
	if p.State != nil {
		g.State = &mamba3.State{Angle: got["dstate_angle"], SSM: got["dstate_ssm"], K: got["dstate_k"], V: got["dstate_v"]}
	}
	return got["y"], &mamba3.State{Angle: got["angle"], SSM: got["ssm"], K: got["k"], V: got["v"]}, g, nil
}

// Forward runs the kernel's forward on p (Problem.Rounded first); a step
// when op is OpMamba3Step (p.Seqlen must be 1). It returns y and the final
// four-part states.
func (k *Mamba3) Forward(op string, p *mamba3.Problem) ([]float64, *mamba3.State, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	step := op == OpMamba3Step
	if step && p.Seqlen != 1 {
		return nil, nil, fmt.Errorf("bridge: a Mamba-3 step takes one token, Seqlen = %d", p.Seqlen)
	}
	params, arrays := mamba3Message(p, step)
	rep, err := k.W.Call("call", op, params, arrays)
	if err != nil {
		return nil, nil, err
	}
	k.Configs = rep.Configs
	S, H, N, P, A := p.NumSeqs(), p.Heads, p.N, p.P, p.AngleDim
	got, err := outputs(rep, map[string]int{"y": p.Batch * p.Seqlen * H * P, "angle": S * H * A, "ssm": S * H * P * N, "k": S * H * N, "v": S * H * P})
	if err != nil {
		return nil, nil, err
	}
	return got["y"], &mamba3.State{Angle: got["angle"], SSM: got["ssm"], K: got["k"], V: got["v"]}, nil
}
