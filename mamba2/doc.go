// Package mamba2 is Mamba-2's problem — the selective state-space model of
// "state-space duality" (SSD) — with its float64 reference and its error
// model: what the suite judges upstream's chunked prefill
// (mamba_chunk_scan_combined) and decode step (selective_state_update),
// and the copies inference engines keep of them, against.
//
// # The recurrence
//
// Heads h = 0 … H−1 of P channels each share one scalar A_h < 0 and one Δ
// per time step; groups of H/G consecutive heads share B and C (head h
// reads group h / (H/G): repeat-interleave, not repeat). For every batch
// row b, head h, channel p and state n, with the state h0 given or zero:
//
//	Δ      = clamp(softplus?(dt[b,t,h] + dt_bias[h]), dt_min, dt_max)
//	s[p,n] = exp(Δ·A_h)·s[p,n] + Δ·B[b,t,g,n]·x[b,t,h,p]
//	y      = Σ_n C[b,t,g,n]·s[p,n] + D[h]·x[b,t,h,p]
//	out    = y · z·σ(z)                    (when z is given)
//
// (D may also hold one value per head and channel, D[h,p]: upstream's
// D_has_hdim.)
//
// softplus(v) = log(1 + e^v) for v ≤ 20 and v above, as the kernels write
// it; the clamp is always applied, and (0, +∞) is upstream's default, so
// that a negative Δ without softplus becomes 0. Several sequences may be
// packed in one row (cu_seqlens, batch 1): the state restarts from zero
// at each boundary, the row's initial state is the first sequence's, and
// every sequence has its own final state. The decode step (Step) is one
// step of the same recurrence on a pool of states updated in place, slot
// state_batch_indices[b] for row b; a negative index is a padding slot,
// whose output is zero and whose state nobody touches.
//
// # Error model
//
// A correct kernel may evaluate the recurrence sequentially or in chunks
// of Q steps (the SSD algorithm: the exponentials of differences of
// within-chunk cumulative sums of Δ·A, chunk states passed from chunk to
// chunk). Writing the output as a sum of terms
// T_s = Σ_n C_t[n]·B_s[n]·Δ_s·x_s·exp(cum_t − cum_s) over the steps s ≤ t
// of its sequence (plus the initial state's term and D·x), each term's
// relative error is bounded by u times
//
//	k0 + E_ts,  k0 = N + 2Q + 8   (the sums over states and over a chunk)
//	sequential:  E_ts = 3·(t − s) + 4·|cum_t − cum_s|
//	same chunk:  E_ts = (t − s + 2ℓ)·W_t + 4·|cum_t − cum_s|
//	across:      E_ts = (p_t + 1 + ℓ)·W_t + (e_s − s + 2ℓ)·W_e(s)
//	                    + 4·|cum_t − cum_s| + 3·(c_t − c_s)
//
// where W_t is the magnitude of the within-chunk cumulative sum of Δ·A at
// t, p_t the position of t in its chunk, e_s the last step of s's chunk,
// c_t the chunk of t and ℓ = ⌈log2 Q⌉ + 1. A cumulative sum of same-signed
// terms evaluated in order errs in the difference of two of its prefixes
// by the roundings between them, at most (t − s)·u·W_t; evaluated as a
// tree (Triton's tl.cumsum), by ℓ·u per prefix; and the exponential
// inherits the exponent's absolute error as a relative one. Across chunks
// the exponent is the chunk-start prefix at t, the states passed between
// (one rounding each) and the rest of s's chunk. These are the chunked
// algebra's own error terms: the
// threshold (judge.Threshold) is not loosened for them. The scale of an
// element is S = Σ_s |T_s|·(k0 + E_ts) + 3·|D·x|, and with the gate
// S·|z·σ(z)| + 5·|y·z·σ(z)|; final states likewise without C. A state kept
// between chunks (or, sequentially, between steps) in a narrower type
// adds (u_state/u)·(c_t − c_s) (or (t − s + 1)), and, in fp16's
// subnormal range, where its rounding is absolute, half its subnormal
// spacing per hand-over to T (through |C| for y); 16-bit inputs whose
// products' operands a kernel rounds to their type (Triton's tl.dot takes
// 16-bit operands) add 4·u_in/u, the model's Operands. The judgement is
// the suite's: |kernel − reference| / (u·S + η·T) ≤ 4, an output of a
// 16-bit type allowed its one rounding (judge.OutputRatio).
//
// # The backward
//
// Grad is the float64 adjoint of Prefill: given the cotangents of y and
// of the states returned, the gradients of every input, by the recurrence
// run backwards (the state's cotangent ĥ_t = g(z_t)·ŷ_t·C_t + a_{t+1}·ĥ_{t+1});
// Δ's chain is the clamp's (zero outside the limits) times the softplus'.
// It is held to central differences of Prefill (TestGradCentralDifferences).
package mamba2
