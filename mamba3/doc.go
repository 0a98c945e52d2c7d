// Package mamba3 is Mamba-3's single-input single-output (SISO) layer: its
// exponential-trapezoidal discretization, the problem upstream's kernels
// (mamba_ssm/ops/triton/mamba3: mamba3_siso_combined, mamba3_siso_step)
// take, and its float64 reference.
//
// # The exponential-trapezoidal rule
//
// For h' = a·h + u(t) the rule advances one step Δ with
//
//	h_t = α_t·h_{t−1} + β_t·u_{t−1} + γ_t·u_t,
//	α = e^{Δ·a},  β = (1 − λ)·Δ·α,  γ = λ·Δ,
//
// the integral of e^{a(t−s)}·u(s) over the step taken by a trapezoid that
// weighs the step's end by λ and its start, decayed over the step, by
// 1 − λ. λ = 1 is exponential Euler with the current input (Mamba-2's
// recurrence, package mamba2: B̄ = Δ·B); λ = 0 exponential Euler with the
// previous one; λ = ½ the exponential trapezoidal rule, of second order
// (its global error shrinks as Δ², the others' as Δ: TestConvergenceOrders).
// With a = 0 and λ = ½ it is the trapezoidal rule for ∫u. For constant
// inputs the recurrence has the closed form h_t = α^t·γ·u +
// (β + γ)·u·(1 − α^t)/(1 − α) from h = 0 and no previous input.
//
// # Mamba-3's SISO layer
//
// The kernels' contract, as their tests' step reference
// (tests/ops/triton/test_mamba3_siso.py: mamba3_siso_step_ref) computes it
// and not as the paper writes it, where the two differ: λ = σ(Trap) (the
// docstring calls Trap a mixing factor in [0, 1]; the kernels apply a
// sigmoid); the rotation angle accumulates tanh(Angles)·π·DT (the
// docstring says Angles·DT) modulo 2π per sequence; the first AngleDim
// pairs (2i, 2i+1) of q and k rotate, the rest do not; the decay enters as
// ADT = A·Δ directly. For every row, head h (reading the q/k head
// h / (H/H_qk)), value channel p and key dimension n:
//
//	φ  = (φ + tanh(Angles_t)·π·DT_t) mod 2π
//	q  = R(φ)·(Q_t + Q_bias),  k = R(φ)·(K_t + K_bias)
//	S  = α·S + β·(k_prev ⊗ v_prev) + γ·(k ⊗ v_t)
//	y  = S·q + D·v_t,  then y·z·σ(z) with the gate
//	k_prev, v_prev = k, v_t
//
// so that the previous key enters rotated by its own step's angle. The
// four-part state (φ, S, k_prev, v_prev) is what a sequence hands to its
// continuation; from nothing it is zero.
package mamba3
