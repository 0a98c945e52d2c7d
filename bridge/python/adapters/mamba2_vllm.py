"""vLLM's copy of the Mamba-2 kernels behind the bridge, loaded from the
user's checkout of vllm-project/vllm (or a fork; nothing of theirs is copied):

  ssd_prefill -> vllm/model_executor/layers/mamba/ops/ssd_combined.py:
                 mamba_chunk_scan_combined_varlen (forward only: vLLM has no
                 backward)
  ssd_step    -> vllm/model_executor/layers/mamba/ops/mamba_ssm.py:
                 selective_state_update
  ssd_steps   -> the same, its speculative path: several tokens a row
                 (cu_seqlens), the start slot by num_accepted_tokens, the
                 state after each token to dst_state_batch_indices

Arguments: checkout=PATH (required: the folder holding vllm/), commit=SHA
(else the checkout's git HEAD), device=cuda:N (default cuda:0), pin=1 (each
autotuner benchmarks only the first configuration its pruning keeps: the
chunk scan lists 23; ssmbridge.upstream.pin_autotuners; default 0).

The ops folder is loaded by path under empty parent packages; the package
utilities its files import are stubbed (ssmbridge.engines.stub), so that
vLLM itself (its config, platforms and compiled _C) never loads:
  vllm.triton_utils            triton, tl, tldevice, HAS_TRITON = True,
                               LOG2E, LOGE2 (what it re-exports)
  vllm._custom_ops             empty (mamba_ssm.py imports it for
                               selective_scan_fn, which is not called)
  vllm.v1.attention.backends.utils
                               NULL_BLOCK_ID and PAD_SLOT_ID, read from the
                               checkout's file (0 and -1 at 7b743ba)

The prefill maps the suite's rows to vLLM's stream of tokens with the chunk
metadata its Mamba attention builder makes for requests with no cached
prefix (ssmbridge.engines). The step calls with keywords (vLLM's D and
dt_bias precede z since 2026-04) and with stride-0 views of dt, A, dt_bias
and D over the head dimension, as vLLM's MambaMixer2 does (the kernel's
tied-head-dimension path, which reads dt_bias's stride: without a bias it
is given a zero one, as vLLM's layer always has a bias). State slots follow
vLLM's convention: slot NULL_BLOCK_ID is reserved as the null block, so the
suite's pool is laid after it and a padding row (-1) names the null block;
a padding row's output, which vLLM discards, is returned as zeros.
"""

import os

from ssmbridge import Unsupported, engines, upstream
from ssmbridge.arrays import from_torch

ARGS = {"checkout": "", "commit": "", "device": "cuda:0", "pin": "0"}
MODS = {}
OPS = "vllm/model_executor/layers/mamba/ops"
NULL = {"id": 0}


def open(args):
    import triton
    import triton.language as tl
    import triton.language.extra.libdevice as tldevice
    root = os.path.abspath(os.path.expanduser(args.get("checkout", "")))
    engines.stub("vllm.triton_utils", triton=triton, tl=tl, tldevice=tldevice, HAS_TRITON=True,
                 LOG2E=1.4426950408889634, LOGE2=0.6931471805599453)
    engines.stub("vllm._custom_ops")
    utils = os.path.join(root, "vllm/v1/attention/backends/utils.py")
    NULL["id"] = engines.constant(utils, "NULL_BLOCK_ID", 0)
    engines.stub("vllm.v1.attention.backends.utils", NULL_BLOCK_ID=NULL["id"],
                 PAD_SLOT_ID=engines.constant(utils, "PAD_SLOT_ID", -1))
    pkgs = ("vllm", "vllm.model_executor", "vllm.model_executor.layers", "vllm.model_executor.layers.mamba",
            "vllm.model_executor.layers.mamba.ops")
    MODS["ssd"], MODS["ssu"] = upstream.open_checkout(
        "mamba2_vllm", ARGS, args, OPS, pkgs,
        ("vllm.model_executor.layers.mamba.ops.ssd_combined", "vllm.model_executor.layers.mamba.ops.mamba_ssm"))


def describe():
    d = {"kernel": "vLLM Mamba-2 (mamba_chunk_scan_combined_varlen + selective_state_update)",
         "checkout": ARGS["checkout"], "commit": ARGS["commit"], "null_block_id": NULL["id"]}
    d["autotuners"] = upstream.autotuning()
    d.update(upstream.describe(ARGS["device"]))
    return d


def capabilities():
    return engines.capabilities(steps=True)


# the worker's hooks: synchronize(), timer(launch), configs() (the autotuners' choices by kernel), and the
# arrays as tensors on the device
synchronize, timer, configs, _t = upstream.hooks(ARGS, "vllm.model_executor.layers.mamba.ops")


def _prefill_call(arrays, params):
    def launch(pk, x, dt, A, B, C, kw):
        return MODS["ssd"].mamba_chunk_scan_combined_varlen(x, dt, A, B, C, pk.chunk, cu_seqlens=pk.cu_seqlens,
                                                            return_intermediate_states=bool(params.get("chunk_states")), **kw)
    return engines.prefill_call(arrays, params, ARGS["device"], launch)


def ssd_prefill(arrays, params):
    call, pk = _prefill_call(arrays, params)
    out, states = call()
    if not params.get("chunk_states"):
        return engines.prefill_outputs(pk, out, states)
    # return_intermediate_states: the state after every chunk, the prefix cache's snapshots
    return engines.prefill_outputs(pk, out, states[pk.last_chunk_indices.long()], states)


def _step_call(arrays, params):
    import torch
    if params.get("dt_limit", [0.0, None]) != [0.0, None]:
        raise Unsupported("selective_state_update takes no dt_limit")
    state, x, dt, A, B, C = (_t(arrays, n) for n in ("state", "x", "dt", "A", "B", "C"))
    D, z, bias = (_t(arrays, n, False) for n in ("D", "z", "dt_bias"))
    idx = _t(arrays, "state_batch_indices", False)
    if bias is None:
        bias = torch.zeros(A.shape[0], dtype=A.dtype, device=A.device)
    A, dt, bias, D = upstream.tied_views(x.shape[-1], state.shape[-1], A, dt, bias, D)
    null = NULL["id"]
    pool, pad = state, None
    if idx is not None:
        # the suite's slots after the reserved null block; padding names it
        if null != 0:
            raise Unsupported(f"NULL_BLOCK_ID = {null}: the adapter reserves slot 0 only")
        pool = torch.cat([state.new_zeros((1,) + tuple(state.shape[1:])), state])
        pad = idx < 0
        idx = torch.where(pad, torch.full_like(idx, null), idx + 1)
    out = torch.zeros_like(x)
    kw = dict(D=D, z=z, dt_bias=bias, dt_softplus=bool(params.get("dt_softplus")), state_batch_indices=idx,
              null_block_id=null, out=out)

    def call():
        MODS["ssu"].selective_state_update(pool, x, dt, A, B, C, **kw)
        return out
    return call, pool, pad, idx is not None


def ssd_step(arrays, params):
    call, pool, pad, slotted = _step_call(arrays, params)
    y = call()
    if pad is not None:
        y = y.masked_fill(pad[:, None, None], 0)
    return {"y": from_torch(y), "state": from_torch(pool[1:] if slotted else pool)}


def _steps_call(arrays, params):
    """selective_state_update's speculative path: the rows' tokens as varlen sequences of equal length (cu_seqlens),
    the start slot state_batch_indices[b, num_accepted_tokens[b] - 1], the state after token i written to
    dst_state_batch_indices[b, i]; slots after the reserved null block, a negative slot naming it."""
    import torch
    state, x, dt, A, B, C = (_t(arrays, n) for n in ("state", "x", "dt", "A", "B", "C"))
    D, z, bias = (_t(arrays, n, False) for n in ("D", "z", "dt_bias"))
    reads, writes = _t(arrays, "read_slots"), _t(arrays, "write_slots")
    acc = _t(arrays, "accepted", False)
    b, T, H, P = x.shape
    N = state.shape[-1]
    null = NULL["id"]
    if null != 0:
        raise Unsupported(f"NULL_BLOCK_ID = {null}: the adapter reserves slot 0 only")
    pool = torch.cat([state.new_zeros((1,) + tuple(state.shape[1:])), state])
    width = max(reads.shape[1], T)

    def slots(v):
        v = torch.where(v < 0, torch.zeros_like(v), v + 1).to(torch.int32)
        return torch.cat([v, v.new_zeros((b, width - v.shape[1]))], dim=1) if v.shape[1] < width else v
    sbi, dsbi = slots(reads), slots(writes)
    if acc is None:
        acc = torch.ones(b, dtype=torch.int32, device=x.device)
    start = reads.gather(1, (acc.long() - 1).clamp(min=0)[:, None])[:, 0]
    if bias is None:
        bias = torch.zeros(H, dtype=A.dtype, device=A.device)
    A3, dt3, bias, D = upstream.tied_views(P, N, A, dt.reshape(b * T, H), bias, D)
    out = torch.zeros((b * T, H, P), dtype=x.dtype, device=x.device)
    cu = torch.arange(0, b * T + 1, T, dtype=torch.int32, device=x.device)
    kw = dict(D=D, z=None if z is None else z.reshape(b * T, H, P), dt_bias=bias, dt_softplus=bool(params.get("dt_softplus")),
              state_batch_indices=sbi, dst_state_batch_indices=dsbi, null_block_id=null, out=out,
              num_accepted_tokens=acc.to(torch.int32), cu_seqlens=cu)
    Bf, Cf = B.reshape(b * T, *B.shape[2:]), C.reshape(b * T, *C.shape[2:])

    def call():
        MODS["ssu"].selective_state_update(pool, x.reshape(b * T, H, P), dt3, A3, Bf, Cf, **kw)
        return out
    return call, pool, start < 0, (b, T, H, P)


def ssd_steps(arrays, params):
    call, pool, pad, shape = _steps_call(arrays, params)
    y = call().reshape(shape).masked_fill(pad[:, None, None, None], 0)
    return {"y": from_torch(y), "state": from_torch(pool[1:])}


def prepare(op, arrays, params):
    if op == "ssd_prefill":
        return _prefill_call(arrays, params)[0]
    if op == "ssd_step":
        return _step_call(arrays, params)[0]
    if op == "ssd_steps":
        return _steps_call(arrays, params)[0]
    raise Unsupported(op)
