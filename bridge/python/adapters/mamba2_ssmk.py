"""Mamba-2's prefill and decode step through a library of the suite's C ABI
(cudalib/include/ssmk.h), loaded with ctypes: ggml's ggml_ssm_scan
(adapters/ggml), the project's CPU or CUDA build, any other implementation
of the ABI. It puts an ABI library into verify/mamba2's cases and the
cross-copy table beside the Triton copies.

Arguments: lib=PATH (required: the .so), name=WORDS (the kernel's name in the
report, default the library's file name), commit=SHA (what the library was
built from, for the report), compose=llama: the options the library's scan
leaves to other ops (ggml's: dt_bias, D, z) applied around it as llama.cpp's
Mamba-2 graph applies them, elementwise in float32 — dt + dt_bias before the
scan, y + D·x and y·silu(z) after — so that the layer llama.cpp runs is
judged, not the op alone (the composition is this adapter's, said in the
report's describe).

The mapping (zoh: Ā = e^{ΔA}, B̄ = Δ·B, the Mamba-2 recurrence):
  channel d = h·P + p of dim = H·P; u[b][d][t] = x[b][t][h][p];
  delta[b][d][t] = dt[b][t][h]; A[d][n] = A[h] (heads of P channels sharing
  A and Δ: the ABI's head_dim structure); variable B, C [b][g][n][t] =
  B[b][t][g][n] with n_groups = G (grp = d / (dim/G) = h / (H/G), the SSD
  grouping); D[d] = D[h] (or D[h][p]); z[b][d][t] = z[b][t][h][p];
  delta_bias[d] = dt_bias[h]; initial_state and last_state [b][dim][n] are
  the suite's (b, h, p, n) as they lie. The ABI has no clamp of Δ: no
  dt_limit is declared, and a Δ below zero without softplus is used as it is
  (the suite's dt:no-limit). No packed sequences. The decode step is a scan
  of one step from each row's slot (ssmk_scan_fwd_state), its last state
  written back to the slot; a padding row (-1) is not scanned, its output
  zero. 16-bit inputs take float weights and states (the ABI's mixed
  precision). What ssmk_scan_features declares (options, head_dim,
  dim_multiple, max_groups, dstates) bounds what is declared or taken; the
  rest is refused as not supported.
"""
import ctypes
import os

import numpy as np

from ssmbridge import Invalid, Unsupported, set_args
from ssmbridge.arrays import from_float, to_float

ARGS = {"lib": "", "name": "", "commit": "", "compose": ""}
LIB = {}

F32, F64, F16, BF16 = 0, 1, 2, 3
ZOH = 0
DTYPES = {"f32": F32, "f64": F64, "f16": F16, "bf16": BF16}
CAP_SUPPORTED, CAP_INITIAL_STATE, CAP_FEATURES, CAP_NARROW = 1, 8, 16, 32
FEAT_D, FEAT_Z, FEAT_BIAS, FEAT_SP_OFF, FEAT_SP_ON, FEAT_VARIABLE_BC = 1, 2, 4, 8, 16, 64


class ScanArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("batch", "dim", "seqlen", "dstate", "n_groups", "method", "dtype", "is_complex",
                                              "is_variable_B", "is_variable_C", "delta_softplus")] + \
               [(n, ctypes.c_void_p) for n in ("u", "delta", "A", "B", "C", "D", "z", "delta_bias", "out", "last_state")]


class Features(ctypes.Structure):
    _fields_ = [("options", ctypes.c_uint32), ("head_dim", ctypes.c_int32), ("dim_multiple", ctypes.c_int32),
                ("max_groups", ctypes.c_int32), ("dstates", ctypes.c_uint32), ("reserved", ctypes.c_int32 * 3)]


def open(args):
    set_args("mamba2_ssmk", ARGS, args)
    if ARGS["compose"] not in ("", "llama"):
        raise SystemExit(f"mamba2_ssmk: compose={ARGS['compose']!r}, want llama or nothing")
    path = os.path.abspath(os.path.expanduser(ARGS["lib"]))
    if not ARGS["lib"] or not os.path.isfile(path):
        raise SystemExit(f"mamba2_ssmk: lib={ARGS['lib']!r}: want the path of a library of the ssmk ABI")
    lib = ctypes.CDLL(path)
    lib.ssmk_abi_version.restype = ctypes.c_int32
    if lib.ssmk_abi_version() != 1:
        raise SystemExit(f"mamba2_ssmk: {path}: ABI version {lib.ssmk_abi_version()}, want 1")
    lib.ssmk_capabilities.restype = ctypes.c_uint32
    lib.ssmk_capabilities.argtypes = [ctypes.c_int32] * 3
    lib.ssmk_last_error.restype = ctypes.c_char_p
    lib.ssmk_backend.restype = ctypes.c_char_p
    lib.ssmk_max_dstate.restype = ctypes.c_int32
    lib.ssmk_scan_fwd.argtypes = [ctypes.POINTER(ScanArgs)]
    lib.ssmk_scan_fwd.restype = ctypes.c_int32
    LIB["lib"], LIB["path"] = lib, path
    LIB["feats"] = {}
    for tag, dt in DTYPES.items():
        caps = lib.ssmk_capabilities(ZOH, dt, 0)
        if not caps & CAP_SUPPORTED or (dt in (F16, BF16) and not caps & CAP_NARROW):
            continue
        f = Features(options=0x7F, head_dim=0, dim_multiple=1, max_groups=0, dstates=0)
        if caps & CAP_FEATURES:
            lib.ssmk_scan_features.argtypes = [ctypes.c_int32] * 3 + [ctypes.POINTER(Features)]
            lib.ssmk_scan_features.restype = ctypes.c_int32
            if lib.ssmk_scan_features(ZOH, dt, 0, ctypes.byref(f)) != 0:
                continue
        if not f.options & FEAT_VARIABLE_BC:
            continue  # Mamba-2's B and C vary with the token
        LIB["feats"][tag] = (caps, f)
    if caps_any(CAP_INITIAL_STATE):
        lib.ssmk_scan_fwd_state.argtypes = [ctypes.POINTER(ScanArgs), ctypes.c_void_p]
        lib.ssmk_scan_fwd_state.restype = ctypes.c_int32


def caps_any(bit):
    return any(c & bit for c, _ in LIB["feats"].values())


def describe():
    lib = LIB["lib"]
    buf = ctypes.create_string_buffer(256)
    lib.ssmk_device_name(buf, 256)
    return {"kernel": ARGS["name"] or "ssmk ABI library " + os.path.basename(LIB["path"]) + " (zoh, Mamba-2 heads)",
            "library": LIB["path"], "backend": lib.ssmk_backend().decode(), "device": buf.value.decode(errors="replace"),
            "commit": ARGS["commit"],
            "composed": "dt_bias, D, z applied around the scan in float32, as llama.cpp's graph does" if ARGS["compose"] else "no"}


def capabilities():
    dts = sorted(LIB["feats"])
    if not dts:
        return {}
    # what every declared dtype takes (ssmk_scan_features per dtype; a shape it refuses is refused at the call)
    opts = min(f.options for _, f in LIB["feats"].values())
    if ARGS["compose"]:
        opts |= FEAT_D | FEAT_Z | FEAT_BIAS
    feats = []
    for bit, name in ((FEAT_D, "D"), (FEAT_Z, "z"), (FEAT_BIAS, "dt_bias"), (FEAT_SP_ON, "softplus")):
        if opts & bit:
            feats.append(name)
    if opts & FEAT_D:
        feats.append("D_per_channel")
    prefill_feats = feats + (["initial_states"] if caps_any(CAP_INITIAL_STATE) else [])
    states = ["f32"] + (["f64"] if "f64" in dts else [])  # the ABI keeps the state in float (double for f64)
    caps = {"ssd_prefill": {"dtypes": dts, "state_dtypes": states, "algorithm": "sequential", "chunk_sizes": [],
                            "features": prefill_feats}}
    if caps_any(CAP_INITIAL_STATE):
        caps["ssd_step"] = {"dtypes": dts, "state_dtypes": states, "features": feats + ["state_batch_indices"]}
    return caps


def _raw(tag, v):
    """The ABI's storage of an input array of the suite's tag, from the bridge's (bf16: its uint16 patterns;
    f16: numpy float16; else floats): 16-bit patterns for f16 and bf16, else the float type."""
    if tag == "bf16":
        return np.ascontiguousarray(v, dtype=np.uint16)
    if tag == "f16":
        return np.ascontiguousarray(v, dtype=np.float16).view(np.uint16)
    return np.ascontiguousarray(v, dtype=np.float64 if tag == "f64" else np.float32)


def _unraw(tag, out):
    """The floats of an output in the ABI's storage."""
    if tag == "bf16":
        return to_float("bf16", out)
    if tag == "f16":
        return out.view(np.float16).astype(np.float32)
    return out


def _check(tag, H, P, G, N, params, arrays):
    if tag not in LIB["feats"]:
        raise Unsupported(f"dtype {tag}: the library does not declare zoh with variable B, C in it")
    caps, f = LIB["feats"][tag]
    if f.head_dim > 0 and P % f.head_dim:
        raise Unsupported(f"headdim {P}: the library's heads are of {f.head_dim} channels")
    if f.dim_multiple > 1 and (H * P) % f.dim_multiple:
        raise Unsupported(f"dim {H * P}: the library wants a multiple of {f.dim_multiple}")
    if f.max_groups > 0 and G > f.max_groups:
        raise Unsupported(f"{G} groups: the library takes at most {f.max_groups}")
    if f.dstates and not (N & (N - 1) == 0 and f.dstates >> (N.bit_length() - 1) & 1):
        raise Unsupported(f"dstate {N}: not among the library's")
    if N > LIB["lib"].ssmk_max_dstate():
        raise Unsupported(f"dstate {N}: over the library's maximum {LIB['lib'].ssmk_max_dstate()}")
    sp = bool(params.get("dt_softplus"))
    if not f.options & (FEAT_SP_ON if sp else FEAT_SP_OFF):
        raise Unsupported(f"dt_softplus {sp}: the library's scan takes only the other")
    lo, hi = params.get("dt_limit", [0.0, None])
    if float(lo) != 0.0 or hi is not None:
        raise Unsupported("dt_limit: the ABI has no clamp of Δ")
    for name, bit in (("D", FEAT_D), ("z", FEAT_Z), ("dt_bias", FEAT_BIAS)):
        if name in arrays and not f.options & bit and not ARGS["compose"]:
            raise Unsupported(f"{name}: the library's scan does not take it")
    return caps


def _composed(tag):
    """Which of dt_bias, D, z go around the scan (compose=llama, where the library's scan lacks them)."""
    if not ARGS["compose"]:
        return set()
    f = LIB["feats"][tag][1]
    return {n for n, bit in (("dt_bias", FEAT_BIAS), ("D", FEAT_D), ("z", FEAT_Z)) if not f.options & bit}


def _around(tag, x, dt, D, z, bias):
    """llama.cpp's elementwise ops around the scan in float32 (float64 for f64): the biased dt to scan, and the
    function finishing y with D·x and the gate. x, dt and z in floats; returns (dt, D, z, bias, finish)."""
    out = _composed(tag)
    if not out:
        return dt, D, z, bias, lambda y: y
    ct = np.float64 if tag == "f64" else np.float32
    H = x.shape[-2]
    if "dt_bias" in out and bias is not None:
        dt = (dt.astype(ct) + bias.astype(ct).reshape(H)).astype(ct)
        bias = None
    Dx, zz = (D if "D" in out else None), (z if "z" in out else None)
    def finish(y):
        y = y.astype(ct)
        if Dx is not None:
            y = y + (Dx.reshape(H, -1).astype(ct) if Dx.size != H else Dx.reshape(H, 1).astype(ct)) * x.astype(ct)
        if zz is not None:
            zc = zz.astype(ct)
            y = y * (zc / (ct(1) + np.exp(-zc)))
        return y
    return dt, (None if "D" in out else D), (None if "z" in out else z), bias, finish


def _scan(tag, x, dt, A, B, C, D, z, bias, init, sp):
    """One ssmk_scan_fwd(_state) of the suite's arrays in the ABI's layout: x (b, l, h, p) … as the ABI's u, delta,
    A, B, C …; returns y (b, l, h, p) in float and the last state (b, h, p, n) in the weight type."""
    b, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    dim = H * P
    wt = "f64" if tag == "f64" else "f32"
    wdt = np.float64 if wt == "f64" else np.float32
    u = _raw(tag, np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(b, dim, L))
    delta = _raw(tag, np.ascontiguousarray(np.repeat(dt.transpose(0, 2, 1)[:, :, None, :], P, axis=2)).reshape(b, dim, L))
    Ad = np.ascontiguousarray(np.repeat(A.reshape(H, 1), P * N, axis=1).reshape(dim, N), dtype=wdt)
    Bv = _raw(tag, np.ascontiguousarray(B.transpose(0, 2, 3, 1)))
    Cv = _raw(tag, np.ascontiguousarray(C.transpose(0, 2, 3, 1)))
    Dd = None
    if D is not None:
        Dd = np.ascontiguousarray((D.reshape(H, P) if D.size == dim else np.repeat(D.reshape(H, 1), P, axis=1)).reshape(dim), dtype=wdt)
    zz = None if z is None else _raw(tag, np.ascontiguousarray(z.transpose(0, 2, 3, 1)).reshape(b, dim, L))
    bd = None if bias is None else np.ascontiguousarray(np.repeat(bias.reshape(H, 1), P, axis=1).reshape(dim), dtype=wdt)
    out = np.zeros((b, dim, L), dtype=u.dtype)
    last = np.zeros((b, dim, N), dtype=wdt)
    ptr = lambda a: None if a is None else a.ctypes.data
    args = ScanArgs(batch=b, dim=dim, seqlen=L, dstate=N, n_groups=G, method=ZOH, dtype=DTYPES[tag], is_complex=0,
                    is_variable_B=1, is_variable_C=1, delta_softplus=int(sp), u=ptr(u), delta=ptr(delta), A=ptr(Ad),
                    B=ptr(Bv), C=ptr(Cv), D=ptr(Dd), z=ptr(zz), delta_bias=ptr(bd), out=ptr(out), last_state=ptr(last))
    lib = LIB["lib"]
    if init is None:
        rc = lib.ssmk_scan_fwd(ctypes.byref(args))
    else:
        h0 = np.ascontiguousarray(init.reshape(b, dim, N), dtype=wdt)
        rc = lib.ssmk_scan_fwd_state(ctypes.byref(args), h0.ctypes.data)
    if rc == 2:
        raise Unsupported("the library: " + lib.ssmk_last_error().decode(errors="replace"))
    if rc != 0:
        raise RuntimeError(f"ssmk_scan_fwd: status {rc}: " + lib.ssmk_last_error().decode(errors="replace"))
    y = _unraw(tag, out)
    return y.reshape(b, H, P, L).transpose(0, 3, 1, 2), last.reshape(b, H, P, N)


def _f(arrays, name, required=True):
    if name not in arrays:
        if required:
            raise Invalid(f"missing array {name}")
        return None
    tag, v = arrays[name]
    return tag, v


def _values(arrays, name, required=True):
    a = _f(arrays, name, required)
    return None if a is None else to_float(*a)


def ssd_prefill(arrays, params):
    if "cu_seqlens" in arrays:
        raise Unsupported("packed sequences: the ABI scans whole rows")
    tag = arrays["x"][0]
    x = arrays["x"][1]
    b, L, H, P = x.shape
    G, N = arrays["B"][1].shape[2], arrays["B"][1].shape[3]
    caps = _check(tag, H, P, G, N, params, arrays)
    stag = params.get("state_dtype", tag)
    wt = "f64" if tag == "f64" else "f32"
    if stag not in (wt, tag) or (tag in ("bf16", "f16") and stag != "f32"):
        raise Unsupported(f"state dtype {stag}: the ABI keeps the state in {wt}")
    init = _values(arrays, "initial_states", False)
    if init is not None and not caps & CAP_INITIAL_STATE:
        raise Unsupported("initial_states: the library does not declare ssmk_scan_fwd_state")
    # 16-bit inputs go to the ABI as their bit patterns, so take them raw; the float ones through to_float
    raw = lambda n: None if n not in arrays else (arrays[n][1] if tag in ("bf16", "f16") else to_float(*arrays[n]))
    dt, D, z, bias, finish = raw("dt"), _values(arrays, "D", False), raw("z"), _values(arrays, "dt_bias", False), None
    if _composed(tag):
        if tag in ("bf16", "f16"):
            raise Unsupported("compose=llama: 16-bit inputs (llama.cpp's graph runs the scan in float32)")
        dt, D, z, bias, finish = _around(tag, raw("x"), dt, D, z, bias)
    y, last = _scan(tag, raw("x"), dt, _values(arrays, "A"), raw("B"), raw("C"), D, z, bias, init, params.get("dt_softplus"))
    if finish is not None:
        y = finish(y)
    return {"y": (tag, from_float(tag, np.ascontiguousarray(y))), "final_states": (wt, from_float(wt, np.ascontiguousarray(last)))}


def ssd_step(arrays, params):
    tag = arrays["x"][0]
    x = arrays["x"][1]
    b, H, P = x.shape
    G, N = arrays["B"][1].shape[1], arrays["B"][1].shape[2]
    caps = _check(tag, H, P, G, N, params, arrays)
    if not caps & CAP_INITIAL_STATE:
        raise Unsupported("the decode step needs ssmk_scan_fwd_state")
    stag, pool = arrays["state"][0], to_float(*arrays["state"])
    wt = "f64" if tag == "f64" else "f32"
    if stag != wt:
        raise Unsupported(f"state dtype {stag}: the ABI keeps the state in {wt}")
    idx = arrays.get("state_batch_indices", (None, np.arange(b)))[1]
    rows = [r for r in range(b) if int(idx[r]) >= 0]
    y = np.zeros((b, H, P), dtype=np.float64)
    pool = pool.copy()
    if rows:
        sel = np.asarray(rows)
        take = lambda n: None if n not in arrays else arrays[n][1][sel][:, None] if tag in ("bf16", "f16") else to_float(*arrays[n])[sel][:, None]
        dt, D, z, bias, finish = take("dt"), _values(arrays, "D", False), take("z"), _values(arrays, "dt_bias", False), None
        if _composed(tag):
            if tag in ("bf16", "f16"):
                raise Unsupported("compose=llama: 16-bit inputs (llama.cpp's graph runs the scan in float32)")
            dt, D, z, bias, finish = _around(tag, take("x"), dt, D, z, bias)
        yy, last = _scan(tag, take("x"), dt, _values(arrays, "A"), take("B"), take("C"), D, z, bias,
                         pool[[int(idx[r]) for r in rows]], params.get("dt_softplus"))
        if finish is not None:
            yy = finish(yy)
        y[sel] = yy[:, 0]
        for i, r in enumerate(rows):
            pool[int(idx[r])] = last[i]
    return {"y": (tag, from_float(tag, y)), "state": (stag, from_float(stag, pool))}
