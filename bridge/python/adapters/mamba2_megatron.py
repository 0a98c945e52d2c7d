"""Megatron-LM's copy of the Mamba-2 kernels behind the bridge, loaded from
the user's checkout of NVIDIA/Megatron-LM (nothing of theirs is copied):

  ssd_prefill -> megatron/core/ssm/ops/mamba2/ssd_combined.py:
                 mamba_chunk_scan_combined_varlen (the inference path's
                 forward; training runs upstream's mamba_ssm)
  ssd_step    -> megatron/core/ssm/ops/mamba2/mamba_ssm.py:
                 selective_state_update

Arguments: checkout=PATH (required: the folder holding megatron/), commit=SHA
(else the checkout's git HEAD), device=cuda:N (default cuda:0).

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

from ssmbridge import Unsupported, engines, upstream

ARGS = {"checkout": "", "commit": "", "device": "cuda:0"}
MODS = {}


def open(args):
    pkgs = ("megatron", "megatron.core", "megatron.core.ssm", "megatron.core.ssm.ops",
            "megatron.core.ssm.ops.common", "megatron.core.ssm.ops.mamba2")
    MODS["ssd"], MODS["ssu"] = upstream.open_checkout(
        "mamba2_megatron", ARGS, args, "megatron/core/ssm/ops/mamba2", pkgs,
        ("megatron.core.ssm.ops.mamba2.ssd_combined", "megatron.core.ssm.ops.mamba2.mamba_ssm"))


def describe():
    d = {"kernel": "Megatron-LM Mamba-2 (mamba_chunk_scan_combined_varlen + selective_state_update)",
         "checkout": ARGS["checkout"], "commit": ARGS["commit"]}
    d.update(upstream.describe(ARGS["device"]))
    return d


def capabilities():
    return engines.capabilities(steps=False)


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
