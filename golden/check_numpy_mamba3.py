#!/usr/bin/env python3
"""Loads every Mamba-3 golden case (golden/mamba3) with NumPy, checks each
file's sha256 and shape against mamba3/manifest.json, and recomputes the
forward with its own NumPy loop of the kernels' step reference (float64),
which must agree with the golden outputs: a third derivation beside the Go
reference and the 256-bit evaluation that wrote the files.

    python3 golden/check_numpy_mamba3.py [golden-folder]
"""
import hashlib
import json
import math
import os
import sys

import numpy as np

# normwise: the largest difference over the largest |value| of each output.
TOLERANCE = 1e-12


def rotate(x, phi):
    a = phi.shape[-1]
    x = x.copy()
    c, s = np.cos(phi), np.sin(phi)
    x0, x1 = x[..., 0:2 * a:2].copy(), x[..., 1:2 * a:2].copy()
    x[..., 0:2 * a:2], x[..., 1:2 * a:2] = x0 * c - x1 * s, x0 * s + x1 * c
    return x


def forward(f, cu):
    Q, K, V, ADT, DT, Trap = f["Q"], f["K"], f["V"], f["ADT"], f["DT"], f["Trap"]
    B, L, Hqk, N = Q.shape
    H, P, A = V.shape[2], V.shape[3], f["Angles"].shape[-1]
    seqs = [(b, 0, L) for b in range(B)] if cu is None else [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]
    y = np.zeros_like(V)
    fin = [np.zeros((len(seqs), H, A)), np.zeros((len(seqs), H, P, N)), np.zeros((len(seqs), H, N)), np.zeros((len(seqs), H, P))]
    for i, (b, s0, s1) in enumerate(seqs):
        if "state_angle" in f:
            phi, S, kp, vp = (f[n][i].copy() for n in ("state_angle", "state_ssm", "state_k", "state_v"))
        else:
            phi, S, kp, vp = np.zeros((H, A)), np.zeros((H, P, N)), np.zeros((H, N)), np.zeros((H, P))
        for t in range(s0, s1):
            dt = DT[b, :, t]
            phi = phi + np.tanh(f["Angles"][b, t]) * math.pi * dt[:, None]
            phi = phi - 2 * math.pi * np.floor(phi / (2 * math.pi))
            q = rotate(np.repeat(Q[b, t], H // Hqk, axis=0) + f["Q_bias"], phi)
            k = rotate(np.repeat(K[b, t], H // Hqk, axis=0) + f["K_bias"], phi)
            lam = 1 / (1 + np.exp(-Trap[b, :, t]))
            alpha = np.exp(ADT[b, :, t])
            beta, gamma = (1 - lam) * dt * alpha, lam * dt
            S = alpha[:, None, None] * S + beta[:, None, None] * vp[:, :, None] * kp[:, None, :] + gamma[:, None, None] * V[b, t][:, :, None] * k[:, None, :]
            out = np.einsum("hpn,hn->hp", S, q)
            if "D" in f:
                out = out + f["D"][:, None] * V[b, t]
            if "Z" in f:
                z = f["Z"][b, t]
                out = out * z / (1 + np.exp(-z))
            y[b, t] = out
            kp, vp = k, V[b, t].copy()
        for j, v in enumerate((phi, S, kp, vp)):
            fin[j][i] = v
    return y, fin


def main(folder):
    root = os.path.join(folder, "mamba3")
    man = json.load(open(os.path.join(root, "manifest.json")))
    bad = []
    worst = 0.0
    for c in man["cases"]:
        f = {}
        for name, meta in c["files"].items():
            path = os.path.join(root, meta["file"])
            if hashlib.sha256(open(path, "rb").read()).hexdigest() != meta["sha256"]:
                bad.append(f"{c['name']}: {name}: checksum")
                continue
            f[name] = np.load(path)
            if list(f[name].shape) != meta["shape"]:
                bad.append(f"{c['name']}: {name}: shape {f[name].shape}, manifest {meta['shape']}")
        cu = c["options"].get("CuSeqlens")
        y, fin = forward(f, cu)
        for name, got in zip(("y", "angle", "ssm", "k", "v"), [y] + fin):
            want = f[name]
            d = np.max(np.abs(got - want), initial=0.0)
            if name == "angle":  # modulo 2π: an angle at 0 may be 2π − ε
                d = np.max(np.abs(np.remainder(got - want + math.pi, 2 * math.pi) - math.pi), initial=0.0)
            rel = d / max(np.max(np.abs(want), initial=0.0), 1e-300)
            worst = max(worst, rel)
            if rel > TOLERANCE:
                bad.append(f"{c['name']}: {name}: NumPy differs by {rel:.3g} (normwise), over {TOLERANCE}")
    if bad:
        print("check_numpy_mamba3: FAIL\n  " + "\n  ".join(bad))
        return 1
    print(f"check_numpy_mamba3: {len(man['cases'])} cases agree with NumPy's loop (worst {worst:.3g} normwise, numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))))
