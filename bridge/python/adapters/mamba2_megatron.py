"""Megatron-LM's copy of the Mamba-2 kernels behind the bridge, loaded from
the user's checkout of NVIDIA/Megatron-LM (nothing of theirs is copied):

  ssd_prefill -> megatron/core/ssm/ops/mamba2/ssd_combined.py:
                 mamba_chunk_scan_combined_varlen (the inference path's
                 forward; training runs upstream's mamba_ssm)
  ssd_step    -> megatron/core/ssm/ops/mamba2/mamba_ssm.py:
                 selective_state_update
  ssd_decode_chain -> megatron/core/ssm/ops/mamba2/batch_invariant_decode.py:
                 the prefill of the first tokens as Megatron's mixer runs it in
                 batch_invariant_mode (the state cached at the last complete
                 chunk boundary, the unfinished chunk seeded into
                 BatchInvariantDecodeBuffers), then
                 batch_invariant_decode_buffered_scan for every later token

Arguments: checkout=PATH (required: the folder holding megatron/), commit=SHA
(else the checkout's git HEAD), device=cuda:N (default cuda:0), pin=1
(default) pins the forward kernels' autotuners as batch_invariant_mode does
(_pin_mamba_autotuners of megatron/core/transformer/custom_layers/
batch_invariant_kernels.py, loaded by path from the checkout): only then is
the decode chain declared bit for bit equal to the prefill (bitwise_prefill),
the claim Megatron's own test makes with the autotuners pinned.

The mamba2 and common ops folders are loaded by path under empty parent
packages, so that megatron/core/__init__.py (which imports the whole of
Megatron Core) never runs; nothing is stubbed: the kernel files import
only triton, torch, packaging and megatron.core.ssm.ops.common.determinism
(pure Python, loaded from the checkout; it reads MAMBA_DETERMINISTIC).

The prefill maps the suite's rows to Megatron's stream of tokens with the
chunk metadata its MambaMixer builds from cu_seqlens when none is
precomputed (ssmbridge.engines); Megatron's varlen call takes no
cu_seqlens. The step calls with stride-0 views of dt, A, dt_bias and D over
the head dimension, as the mixer does; a padding row (-1) is skipped by the
kernel, its output written as zeros.
"""

import importlib.util
import os
import sys

import numpy as np

from ssmbridge import Unsupported, engines, upstream

ARGS = {"checkout": "", "commit": "", "device": "cuda:0", "pin": "1"}
MODS = {}
PINNED = {"why": "pin=0"}


def open(args):
    pkgs = ("megatron", "megatron.core", "megatron.core.ssm", "megatron.core.ssm.ops",
            "megatron.core.ssm.ops.common", "megatron.core.ssm.ops.mamba2")
    MODS["ssd"], MODS["ssu"] = upstream.open_checkout(
        "mamba2_megatron", ARGS, args, "megatron/core/ssm/ops/mamba2", pkgs,
        ("megatron.core.ssm.ops.mamba2.ssd_combined", "megatron.core.ssm.ops.mamba2.mamba_ssm"))
    path = os.path.join(ARGS["checkout"], "megatron/core/ssm/ops/mamba2/batch_invariant_decode.py")
    if os.path.isfile(path):
        MODS["bid"] = importlib.import_module("megatron.core.ssm.ops.mamba2.batch_invariant_decode")
    if ARGS["pin"] == "1":
        PINNED["why"] = _pin()


def _pin():
    """Pins the Mamba-2 forward kernels' autotuners as Megatron's batch_invariant_mode does; "" when done, else
    why not."""
    name = "megatron.core.transformer.custom_layers.batch_invariant_kernels"
    path = os.path.join(ARGS["checkout"], *name.split(".")) + ".py"
    if not os.path.isfile(path):
        return f"no {os.path.relpath(path, ARGS['checkout'])} in the checkout"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mod._pin_mamba_autotuners()
    except Exception as e:  # the claim is then not declared, and said why
        return f"{type(e).__name__}: {e}"
    return ""


def describe():
    d = {"kernel": "Megatron-LM Mamba-2 (mamba_chunk_scan_combined_varlen + selective_state_update)",
         "checkout": ARGS["checkout"], "commit": ARGS["commit"],
         "autotuners": "pinned (batch_invariant_mode)" if not PINNED["why"] else "not pinned: " + PINNED["why"]}
    d.update(upstream.describe(ARGS["device"]))
    return d


def capabilities():
    caps = engines.capabilities(steps=False)
    if "bid" in MODS:
        caps["ssd_decode_chain"] = {"dtypes": ["f32", "f16", "bf16"], "state_dtypes": ["f32"], "algorithm": "chunked",
                                    "chunk_sizes": [], "features": ["D", "z", "dt_bias", "softplus", "initial_states"] +
                                    ([] if PINNED["why"] else ["bitwise_prefill"])}
    return caps


# the worker's hooks: synchronize(), timer(launch), configs() (the autotuners' choices by kernel), and the
# arrays as tensors on the device
synchronize, timer, configs, _t = upstream.hooks(ARGS, "megatron.core.ssm.ops.mamba2")


def _prefill_call(arrays, params):
    def launch(pk, x, dt, A, B, C, kw):
        return MODS["ssd"].mamba_chunk_scan_combined_varlen(x, dt, A, B, C, pk.chunk,
                                                            return_raw_states=bool(params.get("chunk_states")), **kw)
    return engines.prefill_call(arrays, params, ARGS["device"], launch)


def ssd_prefill(arrays, params):
    call, pk = _prefill_call(arrays, params)
    out, states = call()
    raw = None
    if params.get("chunk_states"):
        states, raw = states  # return_raw_states: (the sequences' states, the state after every chunk)
    return engines.prefill_outputs(pk, out, states, raw)


def ssd_decode_chain(arrays, params):
    """Each row a request: its first prefill_tokens tokens prefilled and the cache written as the mixer writes it
    in batch_invariant_mode (the state after the last complete chunk, raw_states of return_raw_states, else the
    initial state; the unfinished chunk's tokens seeded into the replay buffers), then every later token of all
    rows through batch_invariant_decode_buffered_scan (one new token a request a call, the state float32)."""
    import torch
    from ssmbridge.arrays import from_torch
    if "bid" not in MODS:
        raise Unsupported("the checkout has no megatron/core/ssm/ops/mamba2/batch_invariant_decode.py")
    if not params.get("dt_softplus"):
        raise Unsupported("the batch-invariant decode always applies softplus to dt")
    if "z" not in arrays:
        raise Unsupported("the batch-invariant decode gates by z inside the chunk scan: it needs z")
    lo, hi = params.get("dt_limit", [0.0, None])
    if float(lo) != 0.0 or hi is not None:
        raise Unsupported("the batch-invariant decode takes no dt_limit")
    bid, dev = MODS["bid"], ARGS["device"]
    k, Q = int(params["prefill_tokens"]), int(params["chunk_size"])
    seq = ("x", "dt", "B", "C", "z")
    head = {n: (tag, np.ascontiguousarray(v[:, :k]) if n in seq else v) for n, (tag, v) in arrays.items()}
    call, pk = _prefill_call(head, dict(params, chunk_states=True))
    out, (_, raw) = call()
    x, dt, B, C, z = (upstream.tensor(arrays, n, dev) for n in seq)
    A, D, bias = (upstream.tensor(arrays, n, dev, False) for n in ("A", "D", "dt_bias"))
    rows, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    if k >= Q:
        # a partial tail uses the preceding full chunk's state (MambaMixer, batch_invariant_mode)
        boundary = pk.last_chunk_indices.long() - (1 if k % Q else 0)
        ssm_state = raw[boundary].float().contiguous()
    elif pk.init is not None:
        ssm_state = pk.init.float().contiguous()
    else:
        ssm_state = torch.zeros(rows, H, P, N, device=x.device, dtype=torch.float32)
    buffers = bid.BatchInvariantDecodeBuffers.allocate(rows, Q, H, P, G, N, x.device, x.dtype)
    slots = torch.arange(rows, dtype=torch.int32, device=x.device)
    buffers.seed(pk.x, pk.z, pk.dt, pk.B, pk.C, pk.cu_seqlens, slots)
    ys = [pk.y(out)]
    for t in range(k, L):
        step = bid.batch_invariant_decode_buffered_scan(buffers, x[:, t:t + 1], z[:, t:t + 1], dt[:, t:t + 1],
                                                        B[:, t:t + 1], C[:, t:t + 1], A, D, bias, slots, ssm_state)
        ys.append(step.clone())  # a view of the buffers' output, rewritten by the next call
    return {"y": from_torch(torch.cat(ys, dim=1))}


def _step_call(arrays, params):
    # as the layer's step: stride-0 views over the head dimension
    return upstream.step_call(_t, arrays, params, MODS["ssu"].selective_state_update)


def ssd_step(arrays, params):
    return upstream.step(_t, arrays, params, MODS["ssu"].selective_state_update)


def prepare(op, arrays, params):
    if op == "ssd_prefill":
        return _prefill_call(arrays, params)[0]
    if op == "ssd_step":
        return _step_call(arrays, params)[0]
    raise Unsupported(op)
