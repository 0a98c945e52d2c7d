"""The suite's own CPU path for Mamba-2 behind the bridge: the chunked SSD
algorithm (within-chunk cumulative sums of dt*A, chunk states, states passed
between chunks in the state type, outputs from the previous chunk's state and
the chunk's quadratic form) in numpy, in float32 (float64 for fp64 inputs),
and the decode step. It is what `make verify` judges on a machine without a
GPU, so that the bridge, the Mamba-2 tests and their error model run in CI.

Arguments: mode=chunked (default) or sequential (the recurrence step by step,
the model a decode chain is judged by); layout=rows (default) or varlen (the
prefill in the engines' layout, ssmbridge.engines: the rows laid into one
stream of tokens, chunks cut from each sequence's start, initial states per
sequence, and the state after every chunk on request, "chunk_states": the
CPU path of the engines' adapters' mapping and of their properties); the backward of the prefill
("ssd_bwd": the recurrence's adjoint written out by hand, independent of the
suite's Go adjoint, in the compute type); slip=NAME plants one of the chunked
algebra's known bugs, for the suite's own tests of its diagnosis (the names
starting "bwd-" are slips of the backward; NAME+NAME plants two at once); compile=SECONDS makes the first
call of each operation and shape sleep that long, as a kernel that compiles on
first use does (the fuzz harness' own test of its deadline).
"""
import time

import numpy as np

from ssmbridge import Unsupported, engines, set_args
from ssmbridge.arrays import compute_dtype, from_float, get, to_float

ARGS = {"mode": "chunked", "layout": "rows", "slip": "", "compile": "0", "claim": ""}
_COMPILED = set()
_PLANTED = frozenset()  # the slips slip=NAME[+NAME] plants
SLIPS = ("drop-init", "no-reset", "group-repeat", "no-dt-limit", "state-bf16", "no-bias-decode", "softplus-log-exp", "seq-states-no-init",
         "padding-written", "last-state-stale", "bwd-da-no-delta", "bwd-dx-no-skip", "bwd-dinit-undecayed",
         "nonfinite-leak", "cache-entering", "past-size", "spec-accepted-off-by-one", "steps-no-D", "chain-no-tail",
         "crash-past-size")


def open(args):
    set_args("numpy_ssd", ARGS, args)
    if ARGS["mode"] not in ("chunked", "sequential"):
        raise SystemExit(f"numpy_ssd: mode={ARGS['mode']!r}, want chunked or sequential")
    if ARGS["layout"] not in ("rows", "varlen") or (ARGS["layout"] == "varlen" and ARGS["mode"] != "chunked"):
        raise SystemExit(f"numpy_ssd: layout={ARGS['layout']!r}, want rows or varlen (varlen with mode=chunked)")
    global _PLANTED
    _PLANTED = frozenset(name for name in ARGS["slip"].split("+") if name)
    for name in sorted(_PLANTED):
        if name not in SLIPS:
            raise SystemExit(f"numpy_ssd: slip={ARGS['slip']!r}: {name!r} is none of {SLIPS} (two at once: NAME+NAME)")
    try:
        ok = float(ARGS["compile"]) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise SystemExit(f"numpy_ssd: compile={ARGS['compile']!r}, want seconds >= 0")


def _slip(name):
    """Whether slip=… plants name (alone or as one of NAME+NAME)."""
    return name in _PLANTED


def _first_use(op, arrays):
    """compile=SECONDS: the first call of op on these shapes and types sleeps."""
    delay = float(ARGS["compile"])
    if delay <= 0:
        return
    key = (op,) + tuple(sorted((n, t, np.shape(v)) for n, (t, v) in arrays.items()))
    if key not in _COMPILED:
        _COMPILED.add(key)
        time.sleep(delay)


def describe():
    d = {"kernel": "numpy-ssd (" + ARGS["mode"] + ("" if ARGS["layout"] == "rows" else ", varlen") + ")", "device": "cpu", "numpy": np.__version__, "commit": "ssmverify"}
    if ARGS["slip"]:
        d["slip"] = ARGS["slip"]
    return d


def capabilities():
    dts = ["f32", "f64", "f16", "bf16"]
    varlen = ["chunk_states"] if ARGS["layout"] == "varlen" else []
    return {
        "ssd_prefill": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": ARGS["mode"], "chunk_sizes": [],
                        "features": ["D", "D_per_channel", "z", "dt_bias", "softplus", "dt_limit", "initial_states",
                                     "cu_seqlens"] + varlen},
        "ssd_bwd": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": "sequential", "chunk_sizes": [],
                    "features": ["D", "D_per_channel", "z", "dt_bias", "softplus", "dt_limit", "initial_states",
                                 "cu_seqlens", "deterministic"]},
        "ssd_step": {"dtypes": dts, "state_dtypes": ["same", "f32"],
                     "features": ["D", "z", "dt_bias", "softplus", "dt_limit", "state_batch_indices"]},
        "ssd_steps": {"dtypes": dts, "state_dtypes": ["same", "f32"], "features": ["D", "z", "dt_bias", "softplus"]},
        "ssd_decode_chain": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": ARGS["mode"], "chunk_sizes": [],
                             "features": ["D", "z", "dt_bias", "softplus", "dt_limit", "initial_states", "step_loop"] +
                             (["bitwise_prefill"] if ARGS["claim"] == "bitwise_prefill" else [])},
    }


def _delta(dt, bias, softplus, lim, ct, chain=False):
    """Δ = clamp(softplus?(dt + bias)); with chain also dΔ/d(dt): the softplus' σ (1 above 20), zero where the
    limit clamps."""
    v = dt.astype(ct)
    if bias is not None:
        v = v + bias.astype(ct)
    dsp = np.ones_like(v)
    if softplus and _slip("softplus-log-exp"):
        v = np.where(v <= 20, np.log(np.exp(np.minimum(v, 20)) + ct(1)), v).astype(ct)
    elif softplus:
        dsp = np.where(v <= 20, 1 / (1 + np.exp(-np.minimum(v, 20))), 1).astype(ct)
        v = np.where(v <= 20, np.log1p(np.exp(np.minimum(v, 20))), v).astype(ct)
    lo, hi = lim
    clamped = (v < lo) | (v > hi)
    if not _slip("no-dt-limit"):
        v = np.minimum(np.maximum(v, ct(lo)), ct(hi))
    return (v, np.where(clamped, 0, dsp).astype(ct)) if chain else v


def _limits(params):
    lo, hi = params.get("dt_limit", [0.0, None])
    return (lo, np.inf if hi is None else hi)


def _state_round(v, tag):
    if _slip("state-bf16"):
        tag = "bf16"
    return to_float(tag, from_float(tag, v)).astype(v.dtype) if tag in ("bf16", "f16") else v




def _prefill_inputs(arrays, params):
    """The prefill's arrays in the compute type (dt as sent: _delta converts it), its dtype tags checked."""
    tag = arrays["x"][0]
    ct = compute_dtype(tag)
    stag = params.get("state_dtype", tag)
    if stag not in ("f32", "f64", tag):
        raise Unsupported(f"state_dtype {stag} with inputs {tag}")
    x, dt, A = get(arrays, "x", ct), arrays["dt"], get(arrays, "A", ct)
    B, C = get(arrays, "B", ct), get(arrays, "C", ct)
    D, z, bias = get(arrays, "D", ct, False), get(arrays, "z", ct, False), get(arrays, "dt_bias", ct, False)
    init = get(arrays, "initial_states", ct, False)
    return tag, ct, stag, x, dt, A, B, C, D, z, bias, init


def _crash_past_size(n, what):
    # crash-past-size: the kernel's error past a size (an offset that wraps, read as a fault)
    if n > 512:
        raise RuntimeError(f"planted crash-past-size: an illegal memory access with {n} {what} (more than 512)")


def ssd_prefill(arrays, params):
    _first_use("ssd_prefill", arrays)
    if _slip("crash-past-size"):
        _crash_past_size(arrays["x"][1].shape[1], "tokens")
    if ARGS["layout"] == "varlen":
        return _prefill_varlen(arrays, params)
    tag, ct, stag, x, dt, A, B, C, D, z, bias, init = _prefill_inputs(arrays, params)
    b, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    Q = int(params["chunk_size"])
    if ARGS["mode"] == "sequential" or Q <= 0:
        Q = L  # chunk 0 (a problem drawn for a sequential kernel): the row is one chunk
    heads_group = np.arange(H) // (H // G)
    if _slip("group-repeat"):
        heads_group = np.arange(H) % G
    Bh, Ch = B[:, :, heads_group], C[:, :, heads_group]  # (b, l, h, n)
    d = _delta(to_float(dt[0], dt[1]).astype(ct), bias, params.get("dt_softplus", False), _limits(params), ct)  # (b, l, h)
    cu = arrays.get("cu_seqlens", (None, None))[1]
    seq = np.zeros((b, L), dtype=np.int64)
    if cu is not None:
        for i in range(len(cu) - 1):
            seq[:, cu[i]:cu[i + 1]] = i
    nseq = 1 if cu is None else len(cu) - 1
    y = np.zeros((b, L, H, P), dtype=ct)
    prev = np.zeros((b, H, P, N), dtype=ct) if init is None or _slip("drop-init") else _state_round(init, stag)
    prev_seq = np.zeros(b, dtype=np.int64)
    seq_states = np.zeros((b * nseq if cu is None else nseq, H, P, N), dtype=ct)
    if ARGS["mode"] == "sequential":
        return _sequential(x, d, A, Bh, Ch, D, z, prev, seq, nseq, cu is not None, tag, stag, ct)
    for c0 in range(0, L, Q):
        c1 = min(c0 + Q, L)
        sq = seq[:, c0:c1]
        yc = np.zeros((b, c1 - c0, H, P), dtype=ct)
        # each sequence of the chunk from its own inputs (the others' zeroed: adding a zero changes no sum), so
        # that a non-finite input of one sequence reaches no other (the isolation property)
        for sid in (np.unique(sq) if not _slip("no-reset") else [None]):
            own = np.ones_like(sq, dtype=bool) if sid is None else sq == sid  # (b, q)
            xs = np.where(own[:, :, None, None], x[:, c0:c1], 0)
            if _slip("nonfinite-leak"):
                xs = x[:, c0:c1]  # the others' x kept: right for finite inputs, 0·∞ = NaN across sequences
            ds = np.where(own[:, :, None], d[:, c0:c1], 0)
            Bs, Cs = np.where(own[:, :, None, None], Bh[:, c0:c1], 0), np.where(own[:, :, None, None], Ch[:, c0:c1], 0)
            dA = ds * A  # (b, q, h)
            cs = np.cumsum(dA, axis=1, dtype=ct)
            same = own[:, :, None] & own[:, None, :] & np.tril(np.ones((c1 - c0, c1 - c0), dtype=bool))
            decay = np.exp(np.where(same[:, None], cs.transpose(0, 2, 1)[:, :, :, None] - cs.transpose(0, 2, 1)[:, :, None, :], -np.inf)).astype(ct)
            CB = np.einsum("bthn,bshn->bhts", Cs, Bs)
            Lm = np.where(same[:, None], CB * decay * ds.transpose(0, 2, 1)[:, :, None, :], 0)
            ys = np.einsum("bhts,bshp->bthp", Lm, xs)
            from_prev = own & ((sq == prev_seq[:, None]) if sid is not None else True)
            entering = np.exp(cs)[..., None] * np.einsum("bthn,bhpn->bthp", Cs, prev)
            ys = ys + np.where(from_prev[:, :, None, None], entering, 0)
            yc = np.where(own[:, :, None, None], ys, yc)
            # final states of the sequences that end in this chunk
            for bb in range(b):
                for t in range(c0, c1):
                    if own[bb, t - c0] and (t + 1 == L or seq[bb, t + 1] != seq[bb, t]):
                        s_id = seq[bb, t]
                        k = t - c0
                        m = own[bb, :k + 1]
                        w = np.where(m[:, None], np.exp(cs[bb, k] - cs[bb, :k + 1]) * ds[bb, :k + 1], 0)  # (s, h)
                        st = np.einsum("sh,shn,shp->hpn", w, Bs[bb, :k + 1], xs[bb, :k + 1])
                        skip = _slip("seq-states-no-init") and c0 == 0
                        if (s_id == prev_seq[bb] or sid is None) and not skip:
                            st = st + np.exp(cs[bb, k])[:, None, None] * prev[bb]
                        idx = s_id if cu is not None else bb
                        seq_states[idx] = _state_round(st, stag)
            # the state passed on, from the chunk's last sequence
            if sid is None or np.all(sq[:, -1] == sid):
                last = sq[:, -1]
                w = np.where(own[:, :, None], np.exp(cs[:, -1:, :] - cs) * ds, 0)  # (b, s, h)
                st = np.einsum("bsh,bshn,bshp->bhpn", w, Bs, xs)
                keep = (last == prev_seq) | (sid is None)
                st = st + np.where(keep[:, None, None, None], np.exp(cs[:, -1, :])[:, :, None, None] * prev, 0)
                passed = _state_round(st.astype(ct), stag)
        y[:, c0:c1] = yc
        prev = passed
        prev_seq = sq[:, -1]
    return _finish(y, x, D, z, seq_states, cu is not None, b, nseq, tag, stag, ct)


def _prefill_varlen(arrays, params):
    """The chunked algorithm on the engines' stream (engines.Packed): each chunk one sequence's, its entering state
    the previous chunk's or, at a sequence's first chunk, the sequence's initial state (zeros where none)."""
    tag, ct, stag, x, dt, A, B, C, D, z, bias, init = _prefill_inputs(arrays, params)
    b, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    cu = arrays.get("cu_seqlens", (None, None))[1]
    d = _delta(to_float(dt[0], dt[1]).astype(ct), bias, params.get("dt_softplus", False), _limits(params), ct)
    pk = engines.Packed(x, d, B, C, None, None if init is None else _state_round(init, stag), cu, int(params["chunk_size"]))
    heads_group = np.arange(H) // (H // G)
    Bh, Ch = pk.B[:, heads_group], pk.C[:, heads_group]  # (T, h, n)
    y = np.zeros_like(pk.x)
    chunk_states = np.zeros((len(pk.chunks), H, P, N), dtype=ct)
    snaps = np.zeros_like(chunk_states)
    prev = None
    for k, (c0, c1, s) in enumerate(pk.chunks):
        if c0 == pk.starts[s]:
            prev = np.zeros((H, P, N), dtype=ct) if pk.init is None else pk.init[s]
        ds, xs, Bs, Cs = pk.dt[c0:c1], pk.x[c0:c1], Bh[c0:c1], Ch[c0:c1]
        cs = np.cumsum(ds * A, axis=0, dtype=ct)  # (q, h)
        q = c1 - c0
        tri = np.tril(np.ones((q, q), dtype=bool))
        decay = np.exp(np.where(tri[None], cs.T[:, :, None] - cs.T[:, None, :], -np.inf)).astype(ct)  # (h, t, s)
        Lm = np.einsum("thn,shn->hts", Cs, Bs) * decay * ds.T[:, None, :]
        y[c0:c1] = np.einsum("hts,shp->thp", Lm, xs) + np.exp(cs)[..., None] * np.einsum("thn,hpn->thp", Cs, prev)
        w = np.exp(cs[-1] - cs) * ds  # (s, h)
        st = np.einsum("sh,shn,shp->hpn", w, Bs, xs) + np.exp(cs[-1])[:, None, None] * prev
        snaps[k] = prev  # the slip cache-entering's snapshot: the chunk's start, not its end
        prev = chunk_states[k] = _state_round(st.astype(ct), stag)
    seq_states = chunk_states[np.asarray(pk.last_chunk_indices, dtype=np.int64)]
    packed = cu is not None
    out = _finish(pk.y(y), x, D, z, seq_states if packed else pk.final_states(seq_states), packed, b, len(pk.seqs),
                  tag, stag, ct)
    if packed:
        out["final_states"] = (stag, from_float(stag, pk.final_states(seq_states).astype(ct)))
    if params.get("chunk_states"):
        if not _slip("cache-entering"):
            snaps = chunk_states
        out["chunk_states"], out["chunk_ends"] = (stag, from_float(stag, snaps)), ("i32", pk.chunk_ends())
    return out


def _sequential(x, d, A, Bh, Ch, D, z, h0, seq, nseq, packed, tag, stag, ct):
    b, L, H, P = x.shape
    N = Bh.shape[-1]
    y = np.zeros((b, L, H, P), dtype=ct)
    seq_states = np.zeros((nseq if packed else b, H, P, N), dtype=ct)
    for bb in range(b):
        s = h0[bb].copy()
        for t in range(L):
            if t > 0 and seq[bb, t] != seq[bb, t - 1]:
                s = np.zeros_like(s)
            a = np.exp(d[bb, t] * A).astype(ct)  # (h)
            s = a[:, None, None] * s + (d[bb, t][:, None, None] * x[bb, t][:, :, None] * Bh[bb, t][:, None, :]).astype(ct)
            s = _state_round(s, stag)
            y[bb, t] = np.einsum("hpn,hn->hp", s, Ch[bb, t])
            if t + 1 == L or seq[bb, t + 1] != seq[bb, t]:
                seq_states[seq[bb, t] if packed else bb] = s
    return _finish(y, x, D, z, seq_states, packed, b, nseq, tag, stag, ct)


def _per_channel(D):
    """D as (heads, headdim) or (heads, 1): per channel (upstream's D_has_hdim) or per head, to broadcast against
    the channels of x's (…, heads, headdim)."""
    return D if D.ndim == 2 else D[:, None]


def _finish(y, x, D, z, seq_states, packed, b, nseq, tag, stag, ct):
    if _slip("past-size"):
        y = y.copy()
        y[:, 512:] *= ct(1.5)  # wrong only past a size: the tokens after 512
    if D is not None:
        y = y + _per_channel(D) * x
    if z is not None:
        y = y * (z / (1 + np.exp(-z)))
    final = seq_states[-1:] if packed else seq_states
    out = {"y": (tag, from_float(tag, y.astype(ct))), "final_states": (stag, from_float(stag, final.astype(ct)))}
    if packed:
        out["seq_states"] = (stag, from_float(stag, seq_states.astype(ct)))
    return out


def ssd_bwd(arrays, params):
    """The prefill's forward, then J = <dy, y> + <d_final_states, final> + <d_seq_states, seq> differentiated by the
    recurrence run backwards: with h_t = a_t h_{t-1} + Δ_t x_t ⊗ B_t and a_t = exp(Δ_t A), the state's cotangent
    is ĥ_t = ĥ_{t+1} a_{t+1} + dy'_t ⊗ C_t (dy' the cotangent through the gate), so dC_t = Σ_p dy'_t h_t,
    dB_t = Σ_p ĥ_t Δ_t x_t, dx_t = Σ_n ĥ_t Δ_t B_t (+ D dy'_t), dΔ_t = Σ ĥ_t (x_t B_t + A a_t h_{t-1}) and
    dA = Σ_t Σ ĥ_t Δ_t a_t h_{t-1}; dt's and dt_bias' are dΔ times the softplus' and the clamp's derivative."""
    _first_use("ssd_bwd", arrays)
    tag, ct, stag, x, dt, A, B, C, D, z, bias, init = _prefill_inputs(arrays, params)
    dy = get(arrays, "dy", ct)
    dfin, dseq = get(arrays, "d_final_states", ct, False), get(arrays, "d_seq_states", ct, False)
    b, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    grp = np.arange(H) // (H // G)
    Bh, Ch = B[:, :, grp], C[:, :, grp]  # (b, l, h, n)
    lim = _limits(params)
    dtf = to_float(dt[0], dt[1]).astype(ct)
    d, chain = _delta(dtf, bias, params.get("dt_softplus", False), lim, ct, chain=True)  # (b, l, h)
    cu = arrays.get("cu_seqlens", (None, None))[1]
    bounds = [(0, L)] if cu is None else [(int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]
    nseq = len(bounds)
    seq_states = np.zeros((b if cu is None else nseq, H, P, N), dtype=ct)
    y = np.zeros((b, L, H, P), dtype=ct)
    g = {k: np.zeros_like(v) for k, v in (("dx", x), ("dB", Bh), ("dC", Ch))}
    g["dA"], gdelta = np.zeros(H, dtype=ct), np.zeros((b, L, H), dtype=ct)
    g["dD"] = None if D is None else np.zeros(D.shape, dtype=ct)
    g["dz"] = None if z is None else np.zeros_like(z)
    g["dinitial_states"] = None if init is None else np.zeros_like(init)
    for bb in range(b):
        for si, (s0, s1) in enumerate(bounds):
            hs = np.zeros((s1 - s0 + 1, H, P, N), dtype=ct)
            if init is not None and si == 0:
                hs[0] = _state_round(init[bb], stag)
            a = np.exp(d[bb, s0:s1] * A).astype(ct)  # (t, h)
            for k, t in enumerate(range(s0, s1)):
                hs[k + 1] = a[k][:, None, None] * hs[k] + d[bb, t][:, None, None] * x[bb, t][:, :, None] * Bh[bb, t][:, None, :]
            pre = np.einsum("thpn,thn->thp", hs[1:], Ch[bb, s0:s1])
            if D is not None:
                pre = pre + _per_channel(D) * x[bb, s0:s1]
            dyt = dy[bb, s0:s1]
            if z is not None:
                zt = z[bb, s0:s1]
                sg = 1 / (1 + np.exp(-zt))
                y[bb, s0:s1] = pre * zt * sg
                g["dz"][bb, s0:s1] = dyt * pre * sg * (1 + zt * (1 - sg))
                dyt = dyt * zt * sg
            else:
                y[bb, s0:s1] = pre
            if D is not None:
                dd = np.einsum("thp,thp->hp", dyt, x[bb, s0:s1])
                g["dD"] += dd if D.ndim == 2 else dd.sum(axis=1)
                if not _slip("bwd-dx-no-skip"):
                    g["dx"][bb, s0:s1] += dyt * _per_channel(D)
            seq_states[si if cu is not None else bb] = hs[-1]
            hh = np.zeros((H, P, N), dtype=ct)
            if dseq is not None:
                hh = hh + dseq[si if cu is not None else bb]
            if dfin is not None and si == nseq - 1:
                hh = hh + dfin[0 if cu is not None else bb]
            for k in range(s1 - s0 - 1, -1, -1):
                t = s0 + k
                g["dC"][bb, t] += np.einsum("hp,hpn->hn", dyt[k], hs[k + 1])
                hh = hh + dyt[k][:, :, None] * Ch[bb, t][:, None, :]
                dec = np.einsum("hpn,hpn->h", hh, hs[k]) * a[k]  # ∂J/∂(Δ_t A)
                g["dA"] += dec if _slip("bwd-da-no-delta") else dec * d[bb, t]
                gdelta[bb, t] += dec * A + np.einsum("hpn,hp,hn->h", hh, x[bb, t], Bh[bb, t])
                g["dB"][bb, t] += d[bb, t][:, None] * np.einsum("hpn,hp->hn", hh, x[bb, t])
                g["dx"][bb, t] += d[bb, t][:, None] * np.einsum("hpn,hn->hp", hh, Bh[bb, t])
                if not (_slip("bwd-dinit-undecayed") and k == 0):
                    hh = hh * a[k][:, None, None]
            if init is not None and si == 0:
                g["dinitial_states"][bb] = hh
    ddt = gdelta * chain
    dB, dC = np.zeros_like(B), np.zeros_like(C)
    for h in range(H):
        dB[:, :, grp[h]] += g["dB"][:, :, h]
        dC[:, :, grp[h]] += g["dC"][:, :, h]
    out = _finish(y, x, None, None, seq_states, cu is not None, b, nseq, tag, stag, ct)
    w = "f64" if tag == "f64" else "f32"
    out.update({"dx": (tag, from_float(tag, g["dx"])), "ddt": (tag, from_float(tag, ddt)), "dA": (w, from_float(w, g["dA"])),
                "dB": (tag, from_float(tag, dB)), "dC": (tag, from_float(tag, dC))})
    if D is not None:
        out["dD"] = (w, from_float(w, g["dD"]))
    if z is not None:
        out["dz"] = (tag, from_float(tag, g["dz"]))
    if bias is not None:
        out["ddt_bias"] = (w, from_float(w, ddt.sum(axis=(0, 1))))
    if init is not None:
        out["dinitial_states"] = (stag, from_float(stag, g["dinitial_states"]))
    return out


def ssd_step(arrays, params):
    _first_use("ssd_step", arrays)
    tag = arrays["x"][0]
    ct = compute_dtype(tag)
    stag, state = arrays["state"][0], get(arrays, "state", ct)
    if stag not in ("f32", "f64", tag):
        raise Unsupported(f"state dtype {stag} with inputs {tag}")
    if _slip("crash-past-size"):
        _crash_past_size(state.shape[0], "slots")
    x, A, B, C = get(arrays, "x", ct), get(arrays, "A", ct), get(arrays, "B", ct), get(arrays, "C", ct)
    D, z, bias = get(arrays, "D", ct, False), get(arrays, "z", ct, False), get(arrays, "dt_bias", ct, False)
    if _slip("no-bias-decode"):
        bias = None
    d = _delta(get(arrays, "dt", ct), bias, params.get("dt_softplus", False), _limits(params), ct)  # (b, h)
    b, H, P = x.shape
    G = B.shape[1]
    g = np.arange(H) // (H // G)
    idx = arrays.get("state_batch_indices", (None, None))[1]
    y = np.zeros((b, H, P), dtype=ct)
    for bb in range(b):
        slot = bb if idx is None else int(idx[bb])
        if slot < 0:
            if _slip("padding-written"):
                state[slot] = 0
            continue
        a = np.exp(d[bb] * A).astype(ct)
        s = a[:, None, None] * state[slot] + d[bb][:, None, None] * x[bb][:, :, None] * B[bb, g][:, None, :]
        if _slip("state-bf16"):
            s = to_float("bf16", from_float("bf16", s)).astype(ct)
        yy = np.einsum("hpn,hn->hp", s.astype(ct), C[bb, g])
        if not _slip("last-state-stale"):
            state[slot] = s * (ct(1.5) if _slip("past-size") and slot >= 512 else ct(1))  # past-size: slots from 512 on
        if D is not None:
            yy = yy + D[:, None] * x[bb]
        if z is not None:
            yy = yy * (z[bb] / (1 + np.exp(-z[bb])))
        y[bb] = yy
    return {"y": (tag, from_float(tag, y)), "state": (stag, from_float(stag, state))}


def ssd_steps(arrays, params):
    """Several decode steps of every row in one call (speculative decoding's verification): row b starts from slot
    read_slots[b, accepted[b] - 1] of the pool as given, the state after its token i (kept in the state type) is
    written to write_slots[b, i] (negative: not written); a row whose start is negative is padding."""
    tag = arrays["x"][0]
    ct = compute_dtype(tag)
    stag, state = arrays["state"][0], get(arrays, "state", ct)
    if stag not in ("f32", "f64", tag):
        raise Unsupported(f"state dtype {stag} with inputs {tag}")
    pool = state.copy()
    x, A, B, C = get(arrays, "x", ct), get(arrays, "A", ct), get(arrays, "B", ct), get(arrays, "C", ct)
    D, z, bias = get(arrays, "D", ct, False), get(arrays, "z", ct, False), get(arrays, "dt_bias", ct, False)
    d = _delta(get(arrays, "dt", ct), bias, params.get("dt_softplus", False), (0.0, np.inf), ct)  # (b, t, h)
    b, T, H, P = x.shape
    g = np.arange(H) // (H // B.shape[2])
    reads, writes = arrays["read_slots"][1], arrays["write_slots"][1]
    acc = arrays.get("accepted", (None, None))[1]
    y = np.zeros((b, T, H, P), dtype=ct)
    for bb in range(b):
        k = 1 if acc is None else int(acc[bb])
        if _slip("spec-accepted-off-by-one"):
            k = min(k + 1, reads.shape[1])  # the state after the first rejected token, not the last accepted
        slot = int(reads[bb, k - 1])
        if slot < 0:
            continue
        st = state[slot].copy()
        for i in range(T):
            a = np.exp(d[bb, i] * A).astype(ct)
            st = _state_round((a[:, None, None] * st + d[bb, i][:, None, None] * x[bb, i][:, :, None] * B[bb, i, g][:, None, :]).astype(ct), stag)
            yy = np.einsum("hpn,hn->hp", st, C[bb, i, g])
            if D is not None and not _slip("steps-no-D"):  # the slip: the multi-token path alone drops D
                yy = yy + D[:, None] * x[bb, i]
            if z is not None:
                yy = yy * (z[bb, i] / (1 + np.exp(-z[bb, i])))
            y[bb, i] = yy
            if int(writes[bb, i]) >= 0:
                pool[int(writes[bb, i])] = st
    return {"y": (tag, from_float(tag, y)), "state": (stag, from_float(stag, pool))}


def ssd_decode_chain(arrays, params):
    """A request as an engine serves it: each row's first prefill_tokens tokens prefilled (ssd_prefill), every
    later token one ssd_step of all rows from the state the last call left (step_loop: the state after the last
    token is returned as final_states). The slip chain-no-tail starts the
    decode from the state at the last chunk boundary before prefill_tokens, the tokens after it never replayed,
    as a replaying decode whose seed lost the unfinished chunk would."""
    k, Q = int(params["prefill_tokens"]), int(params["chunk_size"])
    L = arrays["x"][1].shape[1]
    Q = Q if Q > 0 else L
    if not 1 <= k < L:
        raise Unsupported(f"prefill_tokens {k}: want 1 <= k < {L}")
    seq = ("x", "dt", "B", "C", "z")
    first = lambda n: {name: (t, v[:, :n] if name in seq else v) for name, (t, v) in arrays.items()}
    pre = ssd_prefill(first(k), params)
    stag, state = pre["final_states"]
    if _slip("chain-no-tail"):
        if k // Q > 0:
            stag, state = ssd_prefill(first(k // Q * Q), params)["final_states"]
        elif "initial_states" in arrays:
            stag, state = arrays["initial_states"]
        else:
            state = np.zeros_like(state)
    tag = arrays["x"][0]
    ys = [to_float(*pre["y"])]
    for t in range(k, L):
        step = {name: (tg, v[:, t] if name in seq else v) for name, (tg, v) in arrays.items() if name != "initial_states"}
        step["state"] = (stag, state)
        out = ssd_step(step, {"dt_softplus": params.get("dt_softplus", False), "dt_limit": params.get("dt_limit", [0.0, None])})
        stag, state = out["state"]
        ys.append(to_float(*out["y"])[:, None])
    return {"y": (tag, from_float(tag, np.concatenate(ys, axis=1))), "final_states": (stag, state)}


def prepare(op, arrays, params):
    fn = {"ssd_prefill": ssd_prefill, "ssd_bwd": ssd_bwd, "ssd_step": ssd_step, "ssd_steps": ssd_steps,
          "ssd_decode_chain": ssd_decode_chain}[op]
    return lambda: fn({k: (t, v.copy()) for k, (t, v) in arrays.items()}, params)
