#!/usr/bin/env python3
"""Loads every golden case with NumPy, as a NumPy or PyTorch user would,
checks each file's sha256, shape and dtype against manifest.json, and
recomputes each case's outputs with its own few lines of NumPy scan (the
ABI's definition in cudalib/include/ssmk.h, float64 and complex128), which
must agree with the golden outputs: a third derivation beside the Go
reference and the exact 256-bit scan that wrote the files.

Mixed-precision cases (a "dtype" of fp16 or bf16) hold their inputs in
that type: files of encoding "float16" are NumPy float16 ('<f2'); those of
encoding "bfloat16" are the bit patterns in uint16 ('<u2'), widened here as
(bits.astype(np.uint32) << 16).view(np.float32). Their out_rounded must be
the golden out rounded once to the type, by NumPy's own rounding.

    python3 golden/check_numpy.py [golden-folder]
"""
import hashlib
import json
import os
import sys

import numpy as np

# NumPy's float64 scan against the exact outputs: normwise, the largest
# difference over the largest |output| (of out and of last_state apart).
# Measured: at most 6.6e-14 over the 66 cases (numpy 1.24.2, 2026-11-27); a
# wrong sign, term or index is O(1).
TOLERANCE = 1e-12


def softplus(v):
    return np.where(v <= 20, np.log1p(np.exp(np.minimum(v, 20))), v)


def method(m, x):
    """(Ā, g) of the header's table at x = Δ·a."""
    if m == "bilinear":
        g = 1 / (1 - x / 2)
        return (1 + x / 2) * g, g
    e = np.exp(x)
    if m == "zoh":
        return e, np.ones_like(x)
    if m == "foh":
        small = np.abs(x) < 1e-5
        safe = np.where(small, 1, x)
        return e, np.where(small, 1 + x / 2 + x * x / 6, (e - 1) / safe)
    c = {"poly": [1, 1 / 2, 1 / 6], "highorder": [1, 1 / 2], "rk4": [1, 1 / 2, 1 / 6, 1 / 24]}[m]
    g = np.zeros_like(x) + c[-1]
    for ck in reversed(c[:-1]):
        g = g * x + ck
    return e, g


def scan(case, a):
    """The forward scan of one case; a maps array names to loaded arrays."""
    cx = case["complex"]
    as_c = (lambda v: v[..., 0] + 1j * v[..., 1]) if cx else (lambda v: v)
    u, delta = a["u"], a["delta"]
    batch, dim, L = u.shape
    A = as_c(a["A"])  # (dim, N)
    N = A.shape[1]
    G = case["n_groups"]
    grp = np.arange(dim) // (dim // G)
    dt = delta + (a["delta_bias"][None, :, None] if "delta_bias" in a else 0)
    if case["delta_softplus"]:
        dt = softplus(dt)
    B, C = as_c(a["B"]), as_c(a["C"])
    h = np.zeros((batch, dim, N), dtype=complex if cx else float)
    out = np.zeros((batch, dim, L))
    for t in range(L):
        x = dt[:, :, t, None] * A[None]
        abar, g = method(case["method"], x)
        Bt = B[:, :, :, t][:, grp] if case["is_variable_B"] else B[None]
        Ct = C[:, :, :, t][:, grp] if case["is_variable_C"] else C[None]
        h = abar * h + dt[:, :, t, None] * g * Bt * u[:, :, t, None]
        y = (Ct * h).sum(axis=2)
        y = 2 * y.real if cx else y
        if "D" in a:
            y = y + a["D"][None, :] * u[:, :, t]
        if "z" in a:
            z = a["z"][:, :, t]
            y = y * z / (1 + np.exp(-z))
        out[:, :, t] = y
    state = np.stack([h.real, h.imag], axis=-1) if cx else h
    return out, state


def load(path, encoding):
    """A golden file as float64, from its encoding."""
    arr = np.load(path)
    want = {"": np.float64, "float16": np.float16, "bfloat16": np.uint16}[encoding]
    assert arr.dtype == want and arr.dtype.byteorder in "<=|", f"{path}: dtype {arr.dtype}, encoding {encoding!r}"
    if encoding == "bfloat16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float64)


def round_to(v, bits, emin, overflow):
    """v rounded to nearest, ties to even, to a binary format of `bits`
    significand bits whose smallest normal exponent is emin (one rounding
    from float64, independent of NumPy's float16 conversion)."""
    a = np.abs(v)
    _, e = np.frexp(np.where(a > 0, a, 1))
    q = np.ldexp(1.0, np.maximum(e - 1, emin) - (bits - 1))
    r = np.round(a / q) * q  # np.round: half to even
    r = np.where(a >= overflow, np.inf, np.where(a > 0, r, a))
    return np.copysign(r, v)


ROUNDING = {"fp16": (11, -14, 65520.0), "bf16": (8, -126, float.fromhex("0x1.ffp+127"))}


def normwise(got, want):
    scale = np.abs(want).max()
    return np.abs(got - want).max() / scale if scale > 0 else np.abs(got).max()


root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
manifest = json.load(open(os.path.join(root, "manifest.json")))
assert manifest["schema"] == "ssmverify.golden/v1", manifest["schema"]
files, worst, failed = 0, 0.0, []
np.seterr(all="ignore")  # the fuzz-found cases overflow intermediates on purpose
for case in manifest["cases"]:
    arrays = {}
    for name, f in case["files"].items():
        path = os.path.join(root, f["file"])
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        assert digest == f["sha256"], f"{path}: sha256 {digest}, manifest {f['sha256']}"
        arr = load(path, f.get("encoding", ""))
        assert list(arr.shape) == f["shape"], f"{path}: shape {arr.shape}, manifest {f['shape']}"
        assert arr.flags["C_CONTIGUOUS"], path
        arrays[name] = arr
        files += 1
    if case.get("dtype"):
        rounded = round_to(arrays["out"], *ROUNDING[case["dtype"]])
        same = (rounded == arrays["out_rounded"]) | (np.isnan(rounded) & np.isnan(arrays["out_rounded"]))
        if case["dtype"] == "fp16":
            same &= arrays["out"].astype(np.float16).astype(np.float64) == arrays["out_rounded"]
        if not same.all():
            failed.append(f"{case['name']}: out_rounded is not out rounded to {case['dtype']} at {int((~same).sum())} elements")
    out, state = scan(case, arrays)
    d = max(normwise(out, arrays["out"]), normwise(state, arrays["last_state"]))
    worst = max(worst, d)
    if not d <= TOLERANCE:
        failed.append(f"{case['name']}: NumPy's scan differs from the golden outputs by {d:.3g} (normwise), over {TOLERANCE:g}")
print(f"numpy {np.__version__}: {len(manifest['cases'])} golden cases, {files} files load with the manifest's shapes and checksums; "
      f"NumPy's own scan agrees with every case to {worst:.2g} (normwise; tolerance {TOLERANCE:g})")
if failed:
    print("\n".join(failed))
    sys.exit(1)
