"""Upstream Mamba-2 Triton kernels behind the bridge, loaded from the user's
checkout of state-spaces/mamba (nothing of theirs is copied):

  ssd_prefill -> mamba_ssm/ops/triton/ssd_combined.py: mamba_chunk_scan_combined
  ssd_bwd     -> the same under autograd (MambaChunkScanCombinedFn.backward: the
                 Triton backward kernels of ssd_chunk_state, ssd_state_passing,
                 ssd_chunk_scan and ssd_combined)
  ssd_step    -> mamba_ssm/ops/triton/selective_state_update.py: selective_state_update
  ssd_decode_chain -> the prefill of a request's first tokens, then selective_state_update once a token on
                 the state kept on the device, as the Mamba-2 layer serves it (step_loop: upstream.decode_chain)

Arguments: checkout=PATH (required: the folder holding mamba_ssm/), commit=SHA
(else the checkout's git HEAD), device=cuda:N (default cuda:0), pin=1 (each
autotuner benchmarks only the first configuration its pruning keeps;
ssmbridge.upstream.pin_autotuners; default 0, autotuned; MAMBA_DETERMINISTIC=1
makes upstream list one configuration itself).

The modules are loaded by path under empty parent packages, so that
mamba_ssm/__init__.py (which imports the compiled CUDA extension) never runs.
The mapping is the one Mamba-2's layer makes (mamba_ssm/modules/mamba2.py):
prefill with seq_idx built from cu_seqlens and return_varlen_states; decode
with dt, dt_bias, D and A broadcast over the head dimension by stride-0 views
(the kernel's tied-head-dimension path). selective_state_update takes no
dt_limit, so the step declares none. With the prefill's param
fused_projection, x, z, B, C and dt are passed as the layer's strided views
of its in_proj and convolution outputs (upstream.fused_views).
"""

import os

from ssmbridge import Unsupported, upstream
from ssmbridge.arrays import from_torch, torch_dtype

ARGS = {"checkout": "", "commit": "", "device": "cuda:0", "pin": "0"}
MODS = {}


def open(args):
    MODS["ssd"], MODS["ssu"] = upstream.open_checkout(
        "mamba2_upstream", ARGS, args, "mamba_ssm/ops/triton", ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton", "mamba_ssm.utils"),
        ("mamba_ssm.ops.triton.ssd_combined", "mamba_ssm.ops.triton.selective_state_update"))


def describe():
    d = {"kernel": "state-spaces/mamba Triton SSD + selective_state_update", "checkout": ARGS["checkout"], "commit": ARGS["commit"]}
    d["autotuners"] = upstream.autotuning()
    d.update(upstream.describe(ARGS["device"]))
    return d


def capabilities():
    dts = ["f32", "f16", "bf16"]
    # the backward reduces dD and ddt with atomics unless upstream's deterministic mode is on
    # (mamba_ssm/utils/determinism.py reads MAMBA_DETERMINISTIC when the kernels run)
    det = ["deterministic"] if os.environ.get("MAMBA_DETERMINISTIC", "")[:1] == "1" else []
    return {
        "ssd_prefill": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": "chunked", "chunk_sizes": [],
                        "features": ["D", "D_per_channel", "z", "dt_bias", "softplus", "dt_limit", "initial_states",
                                     "cu_seqlens", "fused_projection"]},
        "ssd_bwd": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": "chunked", "chunk_sizes": [],
                    "features": ["D", "D_per_channel", "z", "dt_bias", "softplus", "dt_limit", "initial_states",
                                 "cu_seqlens"] + det},
        "ssd_step": {"dtypes": dts, "state_dtypes": ["same", "f32"],
                     "features": ["D", "z", "dt_bias", "softplus", "state_batch_indices"]},
        "ssd_decode_chain": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": "chunked", "chunk_sizes": [],
                             "features": ["D", "z", "dt_bias", "softplus", "initial_states", "step_loop"]},
    }


# the worker's hooks: synchronize(), timer(launch), configs() (the autotuners' choices by kernel), and the
# arrays as tensors on the device
synchronize, timer, configs, _t = upstream.hooks(ARGS, "mamba_ssm.ops.triton")


GRAD_INPUTS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")


def _prefill_call(arrays, params, varlen_states=True, leaves=None):
    """The prefill's launch and whether it is packed; with leaves (a dict) its inputs require gradients and are
    kept there by name."""
    import torch
    x, dt, A, B, C = (_t(arrays, n) for n in ("x", "dt", "A", "B", "C"))
    D, z, bias, init = (_t(arrays, n, False) for n in ("D", "z", "dt_bias", "initial_states"))
    if params.get("fused_projection") and leaves is None:
        x, z, B, C, dt = upstream.fused_views(x, z, B, C, dt)
    if leaves is not None:
        for name, v in zip(GRAD_INPUTS, (x, dt, A, B, C, D, z, bias, init)):
            if v is not None:
                leaves[name] = v.requires_grad_(True)
    cu = _t(arrays, "cu_seqlens", False)
    lo, hi = params.get("dt_limit", [0.0, None])
    stag = params.get("state_dtype", arrays["x"][0])
    kw = dict(D=D, z=z, dt_bias=bias, initial_states=init, dt_softplus=bool(params.get("dt_softplus")),
              dt_limit=(float(lo), float("inf") if hi is None else float(hi)), return_final_states=True,
              state_dtype=torch_dtype(stag))
    if cu is not None:
        L = x.shape[1]
        seq_idx = torch.repeat_interleave(torch.arange(cu.numel() - 1, device=x.device, dtype=torch.int32),
                                          (cu[1:] - cu[:-1]).long()).reshape(1, L)
        kw.update(seq_idx=seq_idx, cu_seqlens=cu, return_varlen_states=varlen_states)
    chunk = int(params["chunk_size"])
    return lambda: MODS["ssd"].mamba_chunk_scan_combined(x, dt, A, B, C, chunk, **kw), cu is not None


def ssd_prefill(arrays, params):
    call, varlen = _prefill_call(arrays, params)
    res = call()
    out = {"y": from_torch(res[0]), "final_states": from_torch(res[1])}
    if varlen:
        out["seq_states"] = from_torch(res[2])
    return out


def ssd_bwd(arrays, params):
    """The prefill under autograd, then backward for dy and d_final_states. Upstream's backward asserts that the
    varlen states were not asked for, so a packed row's per-sequence states come from a second forward without
    gradients, and a cotangent of them is not supported."""
    import torch
    if "d_seq_states" in arrays:
        raise Unsupported("upstream's backward does not differentiate the per-sequence states "
                          "(MambaChunkScanCombinedFn.backward asserts not return_varlen_states)")
    leaves = {}
    call, varlen = _prefill_call(arrays, params, varlen_states=False, leaves=leaves)
    y, final = call()
    outs, cts = [y], [_t(arrays, "dy")]
    dfin = _t(arrays, "d_final_states", False)
    if dfin is not None:
        outs.append(final)
        cts.append(dfin.to(final.dtype))
    torch.autograd.backward(outs, cts)
    out = {"y": from_torch(y.detach()), "final_states": from_torch(final.detach())}
    if varlen:
        with torch.no_grad():
            out["seq_states"] = from_torch(_prefill_call(arrays, params)[0]()[2])
    for name, v in leaves.items():
        out["d" + name] = from_torch(v.grad if v.grad is not None else torch.zeros_like(v))
    return out


def _step_call(arrays, params):
    # as the layer's step: stride-0 views over the head dimension
    return upstream.step_call(_t, arrays, params, MODS["ssu"].selective_state_update)


def ssd_step(arrays, params):
    return upstream.step(_t, arrays, params, MODS["ssu"].selective_state_update)


def ssd_decode_chain(arrays, params):
    """The first prefill_tokens tokens through mamba_chunk_scan_combined, every later one through
    selective_state_update on the state it left (upstream.decode_chain)."""
    def prefill(head):
        y, final = _prefill_call(head, params)[0]()[:2]
        return y, final
    return upstream.decode_chain(_t, arrays, params, prefill, MODS["ssu"].selective_state_update)


def prepare(op, arrays, params):
    if op == "ssd_prefill":
        return _prefill_call(arrays, params)[0]
    if op == "ssd_step":
        return _step_call(arrays, params)[0]
    if op == "ssd_bwd":
        return lambda: ssd_bwd(arrays, params)
    if op == "ssd_decode_chain":
        return lambda: ssd_decode_chain(arrays, params)
    raise Unsupported(op)
