package bridge

import (
	"fmt"
	"math"

	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// The operations of Mamba-2's kernels behind the bridge.
const (
	OpPrefill = "ssd_prefill"
	OpStep    = "ssd_step"
	// OpBackward is the prefill under autograd and its backward for the
	// cotangents "dy" (like y, in the input type) and, optionally,
	// "d_final_states" and "d_seq_states" (like the states returned, in the
	// state type); it returns the prefill's outputs and "dx", "ddt", "dA",
	// "dB", "dC" ("dD", "dz", "ddt_bias", "dinitial_states" with those
	// inputs), each shaped as what it differentiates.
	OpBackward = "ssd_bwd"
	// OpSteps is several decode steps of every row in one call
	// (mamba2.Steps: speculative decoding's verification): "state" (slots,
	// h, p, n), "x" (b, t, h, p), "dt" (b, t, h), "A" (h), "B", "C" (b, t,
	// g, n), optional "D", "z" (b, t, h, p), "dt_bias"; "read_slots" (b,
	// reads) int32, optional "accepted" (b) int32, "write_slots" (b, t)
	// int32. It returns "y" (b, t, h, p) and "state", the pool after.
	OpSteps = "ssd_steps"
	// OpDecodeChain is a request served as an engine serves it: the
	// prefill's arrays (rows, no cu_seqlens) and params with
	// "prefill_tokens" k; the copy prefills each row's first k tokens and
	// decodes every later token with one decode step of all rows at once,
	// its state kept as the copy keeps it between calls. It returns "y"
	// (b, l, h, p): the prefill's for tokens below k, the steps' after;
	// and, optionally, "final_states" (b, h, p, n), the state after the
	// last token (FeatureStepLoop's adapters return it).
	OpDecodeChain = "ssd_decode_chain"
)

// FeatureStepLoop, declared for OpDecodeChain, is the adapter's word that
// the chain's decode is its OpStep kernel launched once a token, all rows
// at once, the state kept on the device between launches as an engine
// keeps its pool (and returned as "final_states" after the last token):
// the suite may then chain thousands of steps in one call
// (TestMamba2DecodeDrift) rather than one round trip a token, whose
// latency, not the kernel, bounds a chain on a shared GPU.
const FeatureStepLoop = "step_loop"

// FeatureBitwisePrefill, declared for OpDecodeChain, is the copy's claim
// that the chain's y equals its own one-pass prefill of the whole rows
// bit for bit (Megatron-LM's batch-invariant decode, which replays each
// chunk with the prefill's arithmetic).
const FeatureBitwisePrefill = "bitwise_prefill"

// SSD is Mamba-2's prefill and decode step through a worker.
type SSD struct {
	W *Worker
	// Configs is what the worker said its autotuner chose in the last call.
	Configs map[string]any
}

// Cap returns the adapter's declaration of an operation (ok false when
// it declares none).
func (k *SSD) Cap(op string) (Cap, bool) {
	c, ok := k.W.Hello().Capabilities[op]
	return c, ok
}

// Supports says why a prefill problem is not declared ("" when it is).
func (k *SSD) Supports(p *mamba2.Problem) string { return k.SupportsOp(OpPrefill, p) }

// SupportsOp says why a problem is not declared for op, the prefill or
// its backward ("" when it is).
func (k *SSD) SupportsOp(op string, p *mamba2.Problem) string {
	c, ok := k.Cap(op)
	if !ok {
		return "the adapter declares no " + op
	}
	return declared(c, p.DType, p.StateDType, map[string]bool{"D": p.D != nil, "D_per_channel": p.DPerChannel(), "z": p.Z != nil, "dt_bias": p.DtBias != nil,
		"softplus": p.Softplus, "dt_limit": !p.DefaultLimits(), "initial_states": p.InitialStates != nil, "cu_seqlens": p.CuSeqlens != nil}, p.Chunk)
}

// SupportsStep says why a decode step is not declared ("" when it is).
func (k *SSD) SupportsStep(s *mamba2.Step) string {
	c, ok := k.Cap(OpStep)
	if !ok {
		return "the adapter declares no " + OpStep
	}
	return declared(c, s.DType, s.StateDType, map[string]bool{"D": s.D != nil, "z": s.Z != nil, "dt_bias": s.DtBias != nil,
		"softplus": s.Softplus, "dt_limit": !s.DefaultLimits(), "state_batch_indices": s.Indices != nil}, 0)
}

func declared(c Cap, dt, sdt ssm.DType, features map[string]bool, chunk int) string {
	if !c.HasDType(Tag(dt)) {
		return fmt.Sprintf("dtype %v not declared (declared: %v)", dt, c.DTypes)
	}
	okState := false
	for _, s := range c.StateDTypes {
		if s == Tag(sdt) || (s == "same" && sdt == dt) {
			okState = true
		}
	}
	if !okState {
		return fmt.Sprintf("state dtype %v with %v inputs not declared (declared: %v)", sdt, dt, c.StateDTypes)
	}
	for f, on := range features {
		if on && !c.Has(f) {
			return fmt.Sprintf("%s not declared (declared: %v)", f, c.Features)
		}
	}
	if chunk > 0 && len(c.ChunkSizes) > 0 {
		for _, q := range c.ChunkSizes {
			if q == chunk {
				return ""
			}
		}
		return fmt.Sprintf("chunk size %d not declared (declared: %v)", chunk, c.ChunkSizes)
	}
	return ""
}

func limits(lo, hi float64) []any {
	if math.IsInf(hi, 1) {
		return []any{lo, nil}
	}
	return []any{lo, hi}
}

func prefillMessage(p *mamba2.Problem) (map[string]any, []Array) {
	in, w := p.DType, p.DType.Weight()
	B, L, H, P, G, N := p.Batch, p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate
	arrays := []Array{Floats("x", p.X, in, B, L, H, P), Floats("dt", p.Dt, in, B, L, H), Floats("A", p.A, w, H),
		Floats("B", p.B, in, B, L, G, N), Floats("C", p.C, in, B, L, G, N)}
	switch {
	case p.DPerChannel():
		arrays = append(arrays, Floats("D", p.D, w, H, P))
	case p.D != nil:
		arrays = append(arrays, Floats("D", p.D, w, H))
	}
	if p.Z != nil {
		arrays = append(arrays, Floats("z", p.Z, in, B, L, H, P))
	}
	if p.DtBias != nil {
		arrays = append(arrays, Floats("dt_bias", p.DtBias, w, H))
	}
	if p.InitialStates != nil {
		arrays = append(arrays, Floats("initial_states", p.InitialStates, p.StateDType, B, H, P, N))
	}
	if p.CuSeqlens != nil {
		arrays = append(arrays, Ints("cu_seqlens", p.CuSeqlens, len(p.CuSeqlens)))
	}
	lo, hi := p.Limits()
	params := map[string]any{"chunk_size": p.Chunk, "dt_softplus": p.Softplus, "dt_limit": limits(lo, hi), "state_dtype": Tag(p.StateDType)}
	return params, arrays
}

func outputs(rep *reply, want map[string]int) (map[string][]float64, error) {
	got := map[string][]float64{}
	for _, a := range rep.Arrays {
		if a.Tag == "i32" {
			continue // indices (chunk_ends): read by the caller that asked for them
		}
		v, err := a.Float64s()
		if err != nil {
			return nil, err
		}
		got[a.Name] = v
	}
	for name, n := range want {
		v, ok := got[name]
		if !ok {
			return nil, fmt.Errorf("bridge: the kernel returned no %s", name)
		}
		if len(v) != n {
			return nil, fmt.Errorf("bridge: the kernel returned %s of %d elements, want %d", name, len(v), n)
		}
	}
	return got, nil
}

// Prefill runs the kernel's prefill on p (rounded to its dtypes by the
// caller: Problem.Rounded).
func (k *SSD) Prefill(p *mamba2.Problem) (*mamba2.Output, error) { return k.PrefillWith(p, nil) }

// FeatureFusedProjection is the prefill's option of inputs laid out as
// a model's layer has them: with params "fused_projection" true the
// adapter passes x, z, B, C and dt to the kernel as strided views of one
// buffer of the in_proj's output (each token's z, x, B, C and dt side by
// side), not as tensors of their own.
const FeatureFusedProjection = "fused_projection"

// PrefillWith is Prefill with extra params for the adapter (an option it
// declares, FeatureFusedProjection).
func (k *SSD) PrefillWith(p *mamba2.Problem, extra map[string]any) (*mamba2.Output, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	params, arrays := prefillMessage(p)
	for key, v := range extra {
		params[key] = v
	}
	rep, err := k.W.Call("call", OpPrefill, params, arrays)
	if err != nil {
		return nil, err
	}
	k.Configs = rep.Configs
	want := map[string]int{"y": p.XLen(), "final_states": p.StateLen()}
	if p.CuSeqlens != nil {
		want["seq_states"] = p.NumSeqs() * p.HeadStateLen()
	}
	got, err := outputs(rep, want)
	if err != nil {
		return nil, err
	}
	out := &mamba2.Output{Y: got["y"], FinalStates: got["final_states"], SeqStates: got["seq_states"]}
	if out.SeqStates == nil {
		out.SeqStates = out.FinalStates
	}
	return out, nil
}

// FeatureChunkStates is the prefill's option of the engines' prefix
// caches: with params "chunk_states" true it also returns the state after
// every chunk of its own grid, "chunk_states" (chunks, h, p, n) in the
// state type, and where each is taken, "chunk_ends" (chunks, 2) int32: the
// row and the position after the chunk's last token.
const FeatureChunkStates = "chunk_states"

// A ChunkState is a state a prefill returned for a prefix cache: the state
// of row Row after its tokens before End.
type ChunkState struct {
	Row, End int
	State    []float64
}

// PrefillChunkStates runs the kernel's prefill on p asking for the state
// after every chunk (FeatureChunkStates, which the adapter must declare).
func (k *SSD) PrefillChunkStates(p *mamba2.Problem) (*mamba2.Output, []ChunkState, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if c, ok := k.Cap(OpPrefill); !ok || !c.Has(FeatureChunkStates) {
		return nil, nil, fmt.Errorf("bridge: the adapter declares no %s for %s", FeatureChunkStates, OpPrefill)
	}
	params, arrays := prefillMessage(p)
	params[FeatureChunkStates] = true
	rep, err := k.W.Call("call", OpPrefill, params, arrays)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]int{"y": p.XLen(), "final_states": p.StateLen()}
	if p.CuSeqlens != nil {
		want["seq_states"] = p.NumSeqs() * p.HeadStateLen()
	}
	got, err := outputs(rep, want)
	if err != nil {
		return nil, nil, err
	}
	var ends []int
	for _, a := range rep.Arrays {
		if a.Name == "chunk_ends" {
			if ends, err = a.Int32s(); err != nil {
				return nil, nil, err
			}
		}
	}
	n := p.HeadStateLen()
	states, ok := got["chunk_states"]
	if !ok || ends == nil || len(ends)%2 != 0 || len(states) != len(ends)/2*n {
		return nil, nil, fmt.Errorf("bridge: the kernel returned chunk_states of %d elements and chunk_ends of %d, want %d states of %d and a (row, end) for each",
			len(states), len(ends), len(ends)/2, n)
	}
	cs := make([]ChunkState, len(ends)/2)
	for i := range cs {
		r, e := ends[2*i], ends[2*i+1]
		if r < 0 || r >= p.Batch || e < 1 || e > p.Seqlen {
			return nil, nil, fmt.Errorf("bridge: chunk_ends[%d] = (%d, %d), want a row below %d and an end in [1, %d]", i, r, e, p.Batch, p.Seqlen)
		}
		cs[i] = ChunkState{Row: r, End: e, State: states[i*n : (i+1)*n]}
	}
	out := &mamba2.Output{Y: got["y"], FinalStates: got["final_states"], SeqStates: got["seq_states"]}
	if out.SeqStates == nil {
		out.SeqStates = out.FinalStates
	}
	return out, cs, nil
}

// SupportsDecodeChain says why a decode chain of p is not declared (""
// when it is).
func (k *SSD) SupportsDecodeChain(p *mamba2.Problem) string { return k.SupportsOp(OpDecodeChain, p) }

// DecodeChain runs OpDecodeChain: p's rows prefilled through their first
// tokens tokens, decoded step by step after; the outputs' y is the whole
// rows', FinalStates the state after the last token where the adapter
// returns it (nil where not). p must have no packed sequences and
// 1 ≤ tokens < p.Seqlen.
func (k *SSD) DecodeChain(p *mamba2.Problem, tokens int) (*mamba2.Output, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.CuSeqlens != nil {
		return nil, fmt.Errorf("bridge: %s: the problem has packed sequences (cu_seqlens); want one request a row", OpDecodeChain)
	}
	if tokens < 1 || tokens >= p.Seqlen {
		return nil, fmt.Errorf("bridge: %s: prefill_tokens %d, want 1 ≤ k < seqlen %d", OpDecodeChain, tokens, p.Seqlen)
	}
	params, arrays := prefillMessage(p)
	params["prefill_tokens"] = tokens
	rep, err := k.W.Call("call", OpDecodeChain, params, arrays)
	if err != nil {
		return nil, err
	}
	got, err := outputs(rep, map[string]int{"y": p.XLen()})
	if err != nil {
		return nil, err
	}
	out := &mamba2.Output{Y: got["y"]}
	if fs, ok := got["final_states"]; ok {
		if len(fs) != p.StateLen() {
			return nil, fmt.Errorf("bridge: %s returned final_states of %d elements, want %d", OpDecodeChain, len(fs), p.StateLen())
		}
		out.FinalStates = fs
	}
	return out, nil
}

// Backward runs the kernel's prefill and its backward on p (rounded to its
// dtypes by the caller: Problem.Rounded) for the cotangent ct (its arrays
// rounded by the caller; FinalStates and SeqStates may be nil). It returns
// the prefill's outputs and the gradients, those of absent inputs nil.
func (k *SSD) Backward(p *mamba2.Problem, ct *mamba2.Cotangent) (*mamba2.Output, *mamba2.Grads, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if ct == nil || len(ct.Y) != p.XLen() {
		n := 0
		if ct != nil {
			n = len(ct.Y)
		}
		return nil, nil, fmt.Errorf("bridge: cotangent Y has %d elements, want %d (like x)", n, p.XLen())
	}
	B, L, H, P, N := p.Batch, p.Seqlen, p.Heads, p.Headdim, p.Dstate
	params, arrays := prefillMessage(p)
	arrays = append(arrays, Floats("dy", ct.Y, p.DType, B, L, H, P))
	if ct.FinalStates != nil {
		if len(ct.FinalStates) != p.StateLen() {
			return nil, nil, fmt.Errorf("bridge: cotangent FinalStates has %d elements, want %d", len(ct.FinalStates), p.StateLen())
		}
		arrays = append(arrays, Floats("d_final_states", ct.FinalStates, p.StateDType, B, H, P, N))
	}
	if ct.SeqStates != nil {
		if len(ct.SeqStates) != p.NumSeqs()*p.HeadStateLen() {
			return nil, nil, fmt.Errorf("bridge: cotangent SeqStates has %d elements, want %d", len(ct.SeqStates), p.NumSeqs()*p.HeadStateLen())
		}
		arrays = append(arrays, Floats("d_seq_states", ct.SeqStates, p.StateDType, p.NumSeqs(), H, P, N))
	}
	rep, err := k.W.Call("call", OpBackward, params, arrays)
	if err != nil {
		return nil, nil, err
	}
	k.Configs = rep.Configs
	want := map[string]int{"y": p.XLen(), "final_states": p.StateLen(), "dx": p.XLen(), "ddt": p.DtLen(), "dA": H,
		"dB": p.BCLen(), "dC": p.BCLen()}
	if p.CuSeqlens != nil {
		want["seq_states"] = p.NumSeqs() * p.HeadStateLen()
	}
	if p.D != nil {
		want["dD"] = len(p.D) // per head, or per head and channel
	}
	if p.DtBias != nil {
		want["ddt_bias"] = H
	}
	if p.Z != nil {
		want["dz"] = p.XLen()
	}
	if p.InitialStates != nil {
		want["dinitial_states"] = p.StateLen()
	}
	got, err := outputs(rep, want)
	if err != nil {
		return nil, nil, err
	}
	out := &mamba2.Output{Y: got["y"], FinalStates: got["final_states"], SeqStates: got["seq_states"]}
	if out.SeqStates == nil {
		out.SeqStates = out.FinalStates
	}
	g := &mamba2.Grads{X: got["dx"], Dt: got["ddt"], A: got["dA"], B: got["dB"], C: got["dC"]}
	if p.D != nil {
		g.D = got["dD"]
	}
	if p.Z != nil {
		g.Z = got["dz"]
	}
	if p.DtBias != nil {
		g.DtBias = got["ddt_bias"]
	}
	if p.InitialStates != nil {
		g.InitialStates = got["dinitial_states"]
	}
	return out, g, nil
}

// decodeArrays are the arrays of a decode on a pool of slots states,
// the same for one step and for several: rows is the tokens' leading
// axes ((b) for a step, (b, t) for several), x and z (rows…, h, p), dt
// (rows…, h), B and C (rows…, g, n), the weights per head.
func decodeArrays(state []float64, slots int, sdt, in ssm.DType, H, P, G, N int, rows []int, x, dt, A, B, C, D, z, dtBias []float64) []Array {
	w := in.Weight()
	shape := func(tail ...int) []int { return append(append([]int(nil), rows...), tail...) }
	arrays := []Array{Floats("state", state, sdt, slots, H, P, N), Floats("x", x, in, shape(H, P)...), Floats("dt", dt, in, shape(H)...),
		Floats("A", A, w, H), Floats("B", B, in, shape(G, N)...), Floats("C", C, in, shape(G, N)...)}
	if D != nil {
		arrays = append(arrays, Floats("D", D, w, H))
	}
	if z != nil {
		arrays = append(arrays, Floats("z", z, in, shape(H, P)...))
	}
	if dtBias != nil {
		arrays = append(arrays, Floats("dt_bias", dtBias, w, H))
	}
	return arrays
}

func stepMessage(s *mamba2.Step) (map[string]any, []Array) {
	B, H, P, G, N := s.Batch, s.Heads, s.Headdim, s.Groups, s.Dstate
	arrays := decodeArrays(s.State, s.Slots, s.StateDType, s.DType, H, P, G, N, []int{B}, s.X, s.Dt, s.A, s.B, s.C, s.D, s.Z, s.DtBias)
	if s.Indices != nil {
		arrays = append(arrays, Ints("state_batch_indices", s.Indices, B))
	}
	lo, hi := s.Limits()
	return map[string]any{"dt_softplus": s.Softplus, "dt_limit": limits(lo, hi)}, arrays
}

// Step runs the kernel's decode step on s.
func (k *SSD) Step(s *mamba2.Step) (*mamba2.StepOutput, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	params, arrays := stepMessage(s)
	rep, err := k.W.Call("call", OpStep, params, arrays)
	if err != nil {
		return nil, err
	}
	got, err := outputs(rep, map[string]int{"y": s.Batch * s.Heads * s.Headdim, "state": len(s.State)})
	if err != nil {
		return nil, err
	}
	return &mamba2.StepOutput{Y: got["y"], State: got["state"]}, nil
}

// SupportsSteps says why a multi-token decode is not declared ("" when it
// is).
func (k *SSD) SupportsSteps(s *mamba2.Steps) string {
	c, ok := k.Cap(OpSteps)
	if !ok {
		return "the adapter declares no " + OpSteps
	}
	return declared(c, s.DType, s.StateDType, map[string]bool{"D": s.D != nil, "z": s.Z != nil, "dt_bias": s.DtBias != nil,
		"softplus": s.Softplus}, 0)
}

// Steps runs the kernel's multi-token decode on s.
func (k *SSD) Steps(s *mamba2.Steps) (*mamba2.StepOutput, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	B, T, H, P, G, N := s.Batch, s.Tokens, s.Heads, s.Headdim, s.Groups, s.Dstate
	arrays := decodeArrays(s.State, s.Slots, s.StateDType, s.DType, H, P, G, N, []int{B, T}, s.X, s.Dt, s.A, s.B, s.C, s.D, s.Z, s.DtBias)
	arrays = append(arrays, Ints("read_slots", s.ReadSlots, B, s.Reads), Ints("write_slots", s.WriteSlots, B, T))
	if s.Accepted != nil {
		arrays = append(arrays, Ints("accepted", s.Accepted, B))
	}
	rep, err := k.W.Call("call", OpSteps, map[string]any{"dt_softplus": s.Softplus}, arrays)
	if err != nil {
		return nil, err
	}
	got, err := outputs(rep, map[string]int{"y": B * T * H * P, "state": len(s.State)})
	if err != nil {
		return nil, err
	}
	return &mamba2.StepOutput{Y: got["y"], State: got["state"]}, nil
}

// TimePrefill times the prefill of p in the worker: per-launch
// milliseconds of iters launches after warmup.
func (k *SSD) TimePrefill(p *mamba2.Problem, warmup, iters int) ([]float64, error) {
	params, arrays := prefillMessage(p)
	params["warmup"], params["iters"] = warmup, iters
	rep, err := k.W.Call("time", OpPrefill, params, arrays)
	if err != nil {
		return nil, err
	}
	return rep.MS, nil
}

// TimeStep times the decode step of s like TimePrefill.
func (k *SSD) TimeStep(s *mamba2.Step, warmup, iters int) ([]float64, error) {
	params, arrays := stepMessage(s)
	params["warmup"], params["iters"] = warmup, iters
	rep, err := k.W.Call("time", OpStep, params, arrays)
	if err != nil {
		return nil, err
	}
	return rep.MS, nil
}
