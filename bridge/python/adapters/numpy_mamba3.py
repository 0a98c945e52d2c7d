"""The suite's own CPU path for Mamba-3's SISO layer behind the bridge: the
step-form recurrence of the exponential-trapezoidal rule (the kernels' tests'
step reference) in numpy, in float32 (float64 for f64 inputs), for the forward
of a sequence ("mamba3_fwd") and one decode step ("mamba3_step").

Arguments: slip=NAME plants a known bug (the suite's tests of its diagnosis).
"""
import math

import numpy as np

from ssmbridge import set_args
from ssmbridge.arrays import compute_dtype, from_float, get, to_float

ARGS = {"slip": ""}
SLIPS = ("no-previous", "lambda-fixed", "prev-key-current-angle", "rotate-halves", "gamma-no-dt", "angle-no-dt", "angle-stored-bf16")


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


def _run(Q, K, V, ADT, DT, Trap, Qb, Kb, Ang, D, Z, st, ct):
    """Q, K (l, hqk, n); V, Z (l, h, p); ADT, DT, Trap (h, l); Ang (l, h, a);
    st = (angle (h, a), ssm (h, p, n), k (h, n), v (h, p)) -> y (l, h, p), st."""
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
        S = (alpha[:, None, None] * S + beta[:, None, None] * (vp[:, :, None] * kprev[:, None, :])
             + gamma[:, None, None] * (V[t][:, :, None] * k[:, None, :])).astype(ct)
        yt = np.einsum("hpn,hn->hp", S, q)
        if D is not None:
            yt = yt + D[:, None] * V[t]
        if Z is not None:
            yt = yt * (Z[t] / (1 + np.exp(-Z[t])))
        y[t] = yt
        kp = k if ARGS["slip"] != "prev-key-current-angle" else kraw
        vp = V[t].copy()
    if ARGS["slip"] == "angle-stored-bf16":
        phi = to_float("bf16", from_float("bf16", phi)).astype(ct)
    return y, (phi, S, kp, vp)


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
    if step:
        y = y[:, 0]
    wt = "f64" if tag == "f64" else "f32"
    return {"y": (tag, from_float(tag, y)), "angle": (wt, from_float(wt, fin[0])), "ssm": (wt, from_float(wt, fin[1])),
            "k": (tag, from_float(tag, fin[2])), "v": (tag, from_float(tag, fin[3]))}


def mamba3_fwd(arrays, params):
    return _common(arrays, params, False)


def mamba3_step(arrays, params):
    return _common(arrays, params, True)
