"""The suite's own CPU path for Mamba-3's SISO layer behind the bridge: the
step-form recurrence of the exponential-trapezoidal rule (the kernels' tests'
step reference) in numpy, in float32 (float64 for f64 inputs), for the forward
of a sequence ("mamba3_fwd"), one decode step ("mamba3_step") and the
backward of the forward ("mamba3_bwd": the recurrence's adjoint, written out
by hand, step by step in reverse).

Arguments: slip=NAME plants a known bug (the suite's tests of its diagnosis);
the names starting "bwd-" are slips of the backward.
"""
import math

import numpy as np

from ssmbridge import set_args
from ssmbridge.arrays import compute_dtype, from_float, get, to_float

ARGS = {"slip": ""}
SLIPS = ("no-previous", "lambda-fixed", "prev-key-current-angle", "rotate-halves", "gamma-no-dt", "angle-no-dt", "angle-stored-bf16",
         "bwd-dtrap-no-sigmoid", "bwd-dadt-alpha-only", "bwd-dangle-sign", "bwd-dv-no-previous", "bwd-dd-double", "bwd-dqbias-first-head",
         "past-size")


def open(args):
    set_args("numpy_mamba3", ARGS, args)
    if ARGS["slip"] and ARGS["slip"] not in SLIPS:
        raise SystemExit(f"numpy_mamba3: slip={ARGS['slip']!r}, want one of {SLIPS}")


def describe():
    d = {"kernel": "numpy-mamba3 (step form)", "device": "cpu", "numpy": np.__version__, "commit": "ssmverify"}
    if ARGS["slip"]:
        d["slip"] = ARGS["slip"]
    return d


def capabilities():
    feats = ["D", "z", "state", "cu_seqlens"]
    arith = {"chunk": 0, "operands": "", "approx": False}
    return {"mamba3_fwd": {"dtypes": ["f32", "f64", "bf16"], "algorithm": "sequential", "features": feats, "arithmetic": arith},
            "mamba3_bwd": {"dtypes": ["f32", "f64", "bf16"], "algorithm": "sequential", "features": feats, "arithmetic": arith},
            "mamba3_step": {"dtypes": ["f32", "f64", "bf16"], "algorithm": "sequential", "features": ["D", "z", "state"], "arithmetic": arith}}




def _rotate(x, phi):
    """Rotates the first phi.shape[-1] pairs of x (..., n) by phi (..., a)."""
    a = phi.shape[-1]
    x = x.copy()
    c, s = np.cos(phi), np.sin(phi)
    if ARGS["slip"] == "rotate-halves":
        h = x.shape[-1] // 2
        x0, x1 = x[..., :a].copy(), x[..., h:h + a].copy()
        x[..., :a], x[..., h:h + a] = x0 * c - x1 * s, x0 * s + x1 * c
        return x
    x0, x1 = x[..., 0:2 * a:2].copy(), x[..., 1:2 * a:2].copy()
    x[..., 0:2 * a:2], x[..., 1:2 * a:2] = x0 * c - x1 * s, x0 * s + x1 * c
    return x


def _run(Q, K, V, ADT, DT, Trap, Qb, Kb, Ang, D, Z, st, ct, tape=None):
    """Q, K (l, hqk, n); V, Z (l, h, p); ADT, DT, Trap (h, l); Ang (l, h, a);
    st = (angle (h, a), ssm (h, p, n), k (h, n), v (h, p)) -> y (l, h, p), st.
    With a tape (a list), every step's intermediates are appended to it."""
    L, Hqk, N = Q.shape
    H, P = V.shape[1], V.shape[2]
    rep = H // Hqk
    phi, S, kp, vp = (x.copy() for x in st)
    y = np.zeros((L, H, P), dtype=ct)
    two_pi = ct(2 * math.pi)
    for t in range(L):
        dt = DT[:, t]
        inc = np.tanh(Ang[t]) * ct(math.pi)
        if ARGS["slip"] != "angle-no-dt":
            inc = inc * dt[:, None]
        phi = phi + inc
        phi = phi - two_pi * np.floor(phi / two_pi)
        ang = phi if ARGS["slip"] != "angle-stored-bf16" else to_float("bf16", from_float("bf16", phi)).astype(ct)
        q = _rotate(np.repeat(Q[t], rep, axis=0) + Qb, ang)
        kraw = np.repeat(K[t], rep, axis=0) + Kb
        k = _rotate(kraw, ang)
        lam = 1 / (1 + np.exp(-Trap[:, t]))
        if ARGS["slip"] == "lambda-fixed":
            lam = np.full_like(lam, 0.5)
        alpha = np.exp(ADT[:, t])
        beta = (1 - lam) * dt * alpha
        gamma = lam * dt if ARGS["slip"] != "gamma-no-dt" else lam
        if ARGS["slip"] == "no-previous":
            beta = np.zeros_like(beta)
        kprev = kp if ARGS["slip"] != "prev-key-current-angle" or t == 0 else _rotate(kp, ang)
        Sprev = S
        S = (alpha[:, None, None] * S + beta[:, None, None] * (vp[:, :, None] * kprev[:, None, :])
             + gamma[:, None, None] * (V[t][:, :, None] * k[:, None, :])).astype(ct)
        if tape is not None:
            tape.append(dict(phi=ang, q=q, k=k, kprev=kprev, vprev=vp, lam=lam, alpha=alpha, beta=beta, gamma=gamma, Sprev=Sprev, S=S))
        yt = np.einsum("hpn,hn->hp", S, q)
        if D is not None:
            yt = yt + D[:, None] * V[t]
        if tape is not None:
            tape[-1]["o"] = yt
        if Z is not None:
            yt = yt * (Z[t] / (1 + np.exp(-Z[t])))
        y[t] = yt
        kp = k if ARGS["slip"] != "prev-key-current-angle" else kraw
        vp = V[t].copy()
    if ARGS["slip"] == "angle-stored-bf16":
        phi = to_float("bf16", from_float("bf16", phi)).astype(ct)
    return y, (phi, S, kp, vp)


def _pairs_rotate(x, phi, sign=1):
    """R(sign·phi)·x on the first pairs (always the interleaved ones: the
    backward's slips are its own)."""
    a = phi.shape[-1]
    x = x.copy()
    c, s = np.cos(phi), sign * np.sin(phi)
    x0, x1 = x[..., 0:2 * a:2].copy(), x[..., 1:2 * a:2].copy()
    x[..., 0:2 * a:2], x[..., 1:2 * a:2] = x0 * c - x1 * s, x0 * s + x1 * c
    return x


def _dphi(dx, x, a):
    """∂L/∂φ of x = R(φ)·x_raw given ∂L/∂x: per pair, dx0·(−x1) + dx1·x0."""
    return dx[..., 0:2 * a:2] * -x[..., 1:2 * a:2] + dx[..., 1:2 * a:2] * x[..., 0:2 * a:2]


def _backward(tape, dy, V, DT, Ang, D, Z, dfin, ct, rep):
    """The adjoint of one sequence's forward (its tape), reverse in time.
    dfin: the cotangents of the final state (angle, ssm, k, v). Returns the
    gradients of the sequence's inputs and of its initial state."""
    L, H, P = V.shape
    N, A = tape[0]["q"].shape[-1], Ang.shape[-1]
    slip = ARGS["slip"]
    dphi, dS, dkn, dvn = (x.copy() for x in dfin)
    g = {"Q": np.zeros((L, H // rep, N), ct), "K": np.zeros((L, H // rep, N), ct), "V": np.zeros((L, H, P), ct),
         "ADT": np.zeros((H, L), ct), "DT": np.zeros((H, L), ct), "Trap": np.zeros((H, L), ct), "Q_bias": np.zeros((H, N), ct),
         "K_bias": np.zeros((H, N), ct), "Angles": np.zeros((L, H, A), ct), "D": np.zeros(H, ct), "Z": np.zeros((L, H, P), ct)}
    for t in range(L - 1, -1, -1):
        r = tape[t]
        do = dy[t].astype(ct)
        if Z is not None:
            sz = 1 / (1 + np.exp(-Z[t]))
            g["Z"][t] = do * r["o"] * (sz * (1 + Z[t] * (1 - sz)))
            do = do * Z[t] * sz
        dS = dS + do[:, :, None] * r["q"][:, None, :]
        dq = np.einsum("hpn,hp->hn", r["S"], do)
        dv = np.zeros((H, P), ct)
        if D is not None:
            g["D"] += (2 if slip == "bwd-dd-double" else 1) * np.sum(do * V[t], axis=1)
            dv = D[:, None] * do
        dalpha = np.sum(dS * r["Sprev"], axis=(1, 2))
        dbeta = np.einsum("hpn,hp,hn->h", dS, r["vprev"], r["kprev"])
        dgamma = np.einsum("hpn,hp,hn->h", dS, V[t], r["k"])
        dvp = r["beta"][:, None] * np.einsum("hpn,hn->hp", dS, r["kprev"])
        dkp = r["beta"][:, None] * np.einsum("hpn,hp->hn", dS, r["vprev"])
        dv = dv + r["gamma"][:, None] * np.einsum("hpn,hn->hp", dS, r["k"])
        if slip != "bwd-dv-no-previous":
            dv = dv + dvn
        dk = r["gamma"][:, None] * np.einsum("hpn,hp->hn", dS, V[t]) + dkn
        dS = r["alpha"][:, None, None] * dS
        lam, dt = r["lam"], DT[:, t]
        g["ADT"][:, t] = dalpha * r["alpha"] + (0 if slip == "bwd-dadt-alpha-only" else dbeta * r["beta"])
        dlam = -dbeta * dt * r["alpha"] + dgamma * dt
        g["DT"][:, t] += dbeta * (1 - lam) * r["alpha"] + dgamma * lam
        g["Trap"][:, t] = dlam if slip == "bwd-dtrap-no-sigmoid" else dlam * lam * (1 - lam)
        g["V"][t] = dv
        # the rotation: x = R(φ)·x_raw, so x_raw's adjoint is R(−φ)·dx
        dphi = dphi + (-1 if slip == "bwd-dangle-sign" else 1) * (_dphi(dq, r["q"], A) + _dphi(dk, r["k"], A))
        dqr, dkr = _pairs_rotate(dq, r["phi"], -1), _pairs_rotate(dk, r["phi"], -1)
        g["Q"][t] = dqr.reshape(H // rep, rep, N).sum(axis=1)
        g["K"][t] = dkr.reshape(H // rep, rep, N).sum(axis=1)
        if slip == "bwd-dqbias-first-head":
            g["Q_bias"][0] += dqr.sum(axis=0)
        else:
            g["Q_bias"] += dqr
        g["K_bias"] += dkr
        th = np.tanh(Ang[t])
        g["Angles"][t] = dphi * (1 - th * th) * ct(math.pi) * DT[:, t][:, None]
        g["DT"][:, t] += np.sum(dphi * th, axis=1) * ct(math.pi)
        dkn, dvn = dkp, dvp
    return g, (dphi, dS, dkn, dvn)


def mamba3_bwd(arrays, params):
    """The forward's outputs, then the gradients of L = Σ dy·y + Σ
    d_state·(final state) with respect to every input."""
    tag = arrays["Q"][0]
    ct = compute_dtype(tag)
    g = {n: get(arrays, n, ct) for n in ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles")}
    D, Z = get(arrays, "D", ct, False), get(arrays, "Z", ct, False)
    dy = get(arrays, "dy", ct)
    B, L, H, P = g["V"].shape
    Hqk, N, A = g["Q"].shape[2], g["Q"].shape[-1], g["Angles"].shape[-1]
    rep = H // Hqk
    cu = arrays.get("cu_seqlens", (None, None))[1]
    seqs = [(b, 0, L) for b in range(B)] if cu is None else [(0, int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]
    shapes = [(H, A), (H, P, N), (H, N), (H, P)]
    names = ("angle", "ssm", "k", "v")
    S0 = [get(arrays, "state_" + n, ct, False) for n in names]
    dF = [get(arrays, "d_state_" + n, ct, False) for n in names]
    y = np.zeros((B, L, H, P), dtype=ct)
    fin = [np.zeros((len(seqs),) + s, ct) for s in shapes]
    dst = [np.zeros((len(seqs),) + s, ct) for s in shapes]
    grads = {"Q": np.zeros((B, L, Hqk, N), ct), "K": np.zeros((B, L, Hqk, N), ct), "V": np.zeros((B, L, H, P), ct),
             "ADT": np.zeros((B, H, L), ct), "DT": np.zeros((B, H, L), ct), "Trap": np.zeros((B, H, L), ct),
             "Q_bias": np.zeros((H, N), ct), "K_bias": np.zeros((H, N), ct), "Angles": np.zeros((B, L, H, A), ct),
             "D": np.zeros(H, ct), "Z": np.zeros((B, L, H, P), ct)}
    for i, (b, s0, s1) in enumerate(seqs):
        st = tuple(x[i] if x is not None else np.zeros(s, ct) for x, s in zip(S0, shapes))
        tape = []
        Zs = None if Z is None else Z[b, s0:s1]
        yy, st = _run(g["Q"][b, s0:s1], g["K"][b, s0:s1], g["V"][b, s0:s1], g["ADT"][b, :, s0:s1], g["DT"][b, :, s0:s1],
                      g["Trap"][b, :, s0:s1], g["Q_bias"], g["K_bias"], g["Angles"][b, s0:s1], D, Zs, st, ct, tape)
        y[b, s0:s1] = yy
        for j in range(4):
            fin[j][i] = st[j]
        df = tuple(x[i] if x is not None else np.zeros(s, ct) for x, s in zip(dF, shapes))
        gs, d0 = _backward(tape, dy[b, s0:s1], g["V"][b, s0:s1], g["DT"][b, :, s0:s1], g["Angles"][b, s0:s1], D, Zs, df, ct, rep)
        for n in ("Q", "K", "V", "Z", "Angles"):
            grads[n][b, s0:s1] += gs[n]
        for n in ("ADT", "DT", "Trap"):
            grads[n][b, :, s0:s1] += gs[n]
        for n in ("Q_bias", "K_bias", "D"):
            grads[n] += gs[n]
        for j in range(4):
            dst[j][i] = d0[j]
    wt = "f64" if tag == "f64" else "f32"
    out = {"y": (tag, from_float(tag, y)), "angle": (wt, from_float(wt, fin[0])), "ssm": (wt, from_float(wt, fin[1])),
           "k": (tag, from_float(tag, fin[2])), "v": (tag, from_float(tag, fin[3]))}
    # gradients in the type of what they differentiate (autograd's convention)
    for n in ("Q", "K", "V", "Trap", "Angles"):
        out["d" + n] = (tag, from_float(tag, grads[n]))
    for n in ("ADT", "DT", "Q_bias", "K_bias"):
        out["d" + n] = (wt, from_float(wt, grads[n]))
    if D is not None:
        out["dD"] = (wt, from_float(wt, grads["D"]))
    if Z is not None:
        out["dZ"] = (tag, from_float(tag, grads["Z"]))
    if S0[0] is not None:
        for j, n in enumerate(names):
            t = wt if n in ("angle", "ssm") else tag
            out["dstate_" + n] = (t, from_float(t, dst[j]))
    return out


def _common(arrays, params, step):
    tag = arrays["Q"][0]
    ct = compute_dtype(tag)
    g = {n: get(arrays, n, ct) for n in ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles")}
    D, Z = get(arrays, "D", ct, False), get(arrays, "Z", ct, False)
    if step:  # one token: add the l axis
        for n in ("Q", "K", "V", "Angles"):
            g[n] = g[n][:, None]
        for n in ("ADT", "DT", "Trap"):
            g[n] = g[n][:, :, None]
        if Z is not None:
            Z = Z[:, None]
    B, L, H, P = g["V"].shape
    N, A = g["Q"].shape[-1], g["Angles"].shape[-1]
    cu = arrays.get("cu_seqlens", (None, None))[1]
    seqs = [(b, 0, L) for b in range(B)] if cu is None else [(0, int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]
    S0 = [get(arrays, n, ct, False) for n in ("state_angle", "state_ssm", "state_k", "state_v")]
    y = np.zeros((B, L, H, P), dtype=ct)
    fin = [np.zeros((len(seqs), H, A), ct), np.zeros((len(seqs), H, P, N), ct), np.zeros((len(seqs), H, N), ct), np.zeros((len(seqs), H, P), ct)]
    for i, (b, s0, s1) in enumerate(seqs):
        st = tuple(x[i] if x is not None else np.zeros(shape, ct) for x, shape in zip(S0, [(H, A), (H, P, N), (H, N), (H, P)]))
        yy, st = _run(g["Q"][b, s0:s1], g["K"][b, s0:s1], g["V"][b, s0:s1], g["ADT"][b, :, s0:s1], g["DT"][b, :, s0:s1],
                      g["Trap"][b, :, s0:s1], g["Q_bias"], g["K_bias"], g["Angles"][b, s0:s1], D, None if Z is None else Z[b, s0:s1], st, ct)
        y[b, s0:s1] = yy
        for j in range(4):
            fin[j][i] = st[j]
    if ARGS["slip"] == "past-size":  # the outputs of tokens from 512 on (of rows from 512 on, a step) corrupted
        if step:
            y[512:] += 1
        else:
            y[:, 512:] += 1
    if step:
        y = y[:, 0]
    wt = "f64" if tag == "f64" else "f32"
    return {"y": (tag, from_float(tag, y)), "angle": (wt, from_float(wt, fin[0])), "ssm": (wt, from_float(wt, fin[1])),
            "k": (tag, from_float(tag, fin[2])), "v": (tag, from_float(tag, fin[3]))}


def mamba3_fwd(arrays, params):
    return _common(arrays, params, False)


def mamba3_step(arrays, params):
    return _common(arrays, params, True)
