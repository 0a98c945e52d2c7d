"""Upstream Mamba-3 SISO Triton kernels behind the bridge, loaded from the
user's checkout of state-spaces/mamba (nothing of theirs is copied):

  mamba3_fwd  -> mamba_ssm/ops/triton/mamba3/mamba3_siso_combined.py: mamba3_siso_combined
  mamba3_step -> mamba_ssm/ops/triton/mamba3/mamba3_siso_step.py: mamba3_siso_step
  mamba3_bwd  -> mamba3_siso_combined under torch.autograd: its forward, then
                 torch.autograd.backward with the suite's cotangents of y and
                 of the final states; the leaves' .grad are the gradients

Arguments: checkout=PATH (required), commit=SHA, device=cuda:N, pin=1 (each
autotuner benchmarks only the first configuration its pruning keeps:
upstream's Mamba-3 kernels list 27 to 54, each compiled for every new key;
ssmbridge.upstream.pin_autotuners; default 0, autotuned).

What the adapter declares is the kernels' contract as their code states it:
the combined wrapper casts Q, K, V, Trap, Angles and Z to bf16 itself
(casts_to: the suite judges it on bf16 inputs and says so); both kernels
evaluate tanh, sigmoid, sin and cos with PTX's approximate instructions and
take bf16 operands in their matrix products; the step takes a state (it
unpacks Input_States unconditionally). Head dimensions must be powers of two
and the angle dimension even (the wrapper's asserts).
"""

from ssmbridge import Unsupported, upstream
from ssmbridge.arrays import from_torch

ARGS = {"checkout": "", "commit": "", "device": "cuda:0", "pin": "0"}
MODS = {}


def open(args):
    MODS["fwd"], MODS["step"] = upstream.open_checkout(
        "mamba3_upstream", ARGS, args, "mamba_ssm/ops/triton/mamba3",
        ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton", "mamba_ssm.ops.triton.mamba3", "mamba_ssm.utils"),
        ("mamba_ssm.ops.triton.mamba3.mamba3_siso_combined", "mamba_ssm.ops.triton.mamba3.mamba3_siso_step"))


def describe():
    d = {"kernel": "state-spaces/mamba Triton mamba3_siso_combined + mamba3_siso_step", "checkout": ARGS["checkout"], "commit": ARGS["commit"]}
    d["autotuners"] = upstream.autotuning()
    d.update(upstream.describe(ARGS["device"]))
    return d


def capabilities():
    arith = {"chunk": 64, "operands": "bf16", "approx": True}
    return {"mamba3_fwd": {"dtypes": ["f32", "bf16"], "casts_to": "bf16", "algorithm": "chunked",
                           "features": ["D", "z", "state", "cu_seqlens"], "arithmetic": arith},
            "mamba3_bwd": {"dtypes": ["f32", "bf16"], "casts_to": "bf16", "algorithm": "chunked",
                           "features": ["D", "z", "state", "cu_seqlens"], "arithmetic": arith},
            "mamba3_step": {"dtypes": ["f32", "bf16"], "algorithm": "sequential", "features": ["D", "z", "state"],
                            "arithmetic": {"chunk": 0, "operands": "bf16", "approx": True}}}


def synchronize():
    upstream.synchronize(ARGS["device"])


def timer(launch):
    return upstream.timer(launch)


def configs():
    """The configurations the autotuners chose, by kernel."""
    return upstream.configs("mamba_ssm.ops.triton.mamba3")


def _t(arrays, name, required=True):
    return upstream.tensor(arrays, name, ARGS["device"], required)


def _contract(arrays):
    """The wrappers' asserts on the angle dimension, as a declared limit
    (the suite draws any 0 … N/2): an odd width or one above half the q/k
    head dimension is refused before the kernel asserts. Width 0 passes the
    asserts and goes to the kernel (it fails to compile: a finding)."""
    hqk, ha = arrays["Q"][1].shape[-1], arrays["Angles"][1].shape[-1]
    if hqk % 2:
        raise Unsupported(f"headdim_qk {hqk}: upstream's wrapper asserts an even q/k head dimension")
    if ha % 2 or ha > hqk // 2:
        raise Unsupported(f"headdim_angles {ha}: upstream's wrappers assert an even angle dimension of at most "
                          f"headdim_qk // 2 = {hqk // 2}")


def _call(op, arrays, params):
    _contract(arrays)
    a = {n: _t(arrays, n) for n in ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles")}
    D, Z = _t(arrays, "D", False), _t(arrays, "Z", False)
    st = tuple(_t(arrays, n, False) for n in ("state_angle", "state_ssm", "state_k", "state_v"))
    st = None if st[0] is None else st
    args = [a[n] for n in ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles")]
    if op == "mamba3_fwd":
        cu = _t(arrays, "cu_seqlens", False)
        return lambda: MODS["fwd"].mamba3_siso_combined(*args, D=D, Z=Z, Input_States=st, chunk_size=int(params.get("chunk_size") or 64),
                                                        return_final_states=True, cu_seqlens=cu)
    return lambda: MODS["step"].mamba3_siso_step(*args, D=D, Z=Z, Input_States=st)


_INPUTS = ("Q", "K", "V", "ADT", "DT", "Trap", "Q_bias", "K_bias", "Angles")
_STATES = ("angle", "ssm", "k", "v")


def _backward(arrays, params):
    """The forward under autograd and its backward: a launch (for the timer)
    and the leaves whose .grad it fills."""
    import torch
    _contract(arrays)
    leaf = lambda t: None if t is None else t.detach().clone().requires_grad_(True)
    a = {n: leaf(_t(arrays, n)) for n in _INPUTS}
    D, Z = leaf(_t(arrays, "D", False)), leaf(_t(arrays, "Z", False))
    st = tuple(leaf(_t(arrays, "state_" + n, False)) for n in _STATES)
    st = None if st[0] is None else st
    cu = _t(arrays, "cu_seqlens", False)
    dy = _t(arrays, "dy")
    dst = [_t(arrays, "d_state_" + n, False) for n in _STATES]
    leaves = dict(a, D=D, Z=Z)
    if st is not None:
        leaves.update({"state_" + n: x for n, x in zip(_STATES, st)})
    res = {}

    def launch():
        for x in leaves.values():
            if x is not None:
                x.grad = None
        out = MODS["fwd"].mamba3_siso_combined(*[a[n] for n in _INPUTS], D=D, Z=Z, Input_States=st,
                                               chunk_size=int(params.get("chunk_size") or 64), return_final_states=True, cu_seqlens=cu)
        outs, cots = [out[0]], [dy.to(out[0].dtype)]
        for o, d in zip(out[1:], dst):
            if d is not None:
                outs.append(o)
                cots.append(d.to(o.dtype))
        torch.autograd.backward(outs, cots)
        res["out"] = out
        return out
    return launch, leaves, res


def mamba3_bwd(arrays, params):
    launch, leaves, res = _backward(arrays, params)
    launch()
    out = _outputs(res["out"])
    for n, x in leaves.items():
        if x is not None and x.grad is not None:
            out["d" + n] = from_torch(x.grad)  # dQ, …, dD, dZ, dstate_angle, …
    return out


def _outputs(res):
    y, rest = res[0], res[1:]
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        rest = rest[0]
    names = ("angle", "ssm", "k", "v")
    out = {"y": from_torch(y)}
    for n, t in zip(names, rest):
        out[n] = from_torch(t)
    return out


def mamba3_fwd(arrays, params):
    return _outputs(_call("mamba3_fwd", arrays, params)())


def mamba3_step(arrays, params):
    return _outputs(_call("mamba3_step", arrays, params)())


def prepare(op, arrays, params):
    if op == "mamba3_bwd":
        return _backward(arrays, params)[0]
    return _call(op, arrays, params)
