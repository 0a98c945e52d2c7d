"""Conversions between the protocol's arrays and numpy or torch values.

bf16 crosses as its 16-bit patterns (numpy has no bfloat16): ``to_float``
widens any tag to float32 (float64 for f64) exactly, ``from_float`` rounds to
a tag to nearest, ties to even. ``to_torch``/``from_torch`` move arrays to and
from a device keeping every bit.
"""
import numpy as np

FLOAT_TAGS = ("f64", "f32", "f16", "bf16")


def to_float(tag, v):
    if tag == "bf16":
        return (v.astype(np.uint32) << 16).view(np.float32)
    if tag == "f64":
        return v.astype(np.float64)
    return v.astype(np.float32)


def from_float(tag, v):
    if tag == "bf16":
        u = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
        r = ((u >> 16) & 1) + np.uint32(0x7FFF)
        out = ((u + r) >> 16).astype(np.uint16)
        nan = np.isnan(v)
        out[nan] = 0x7FC0
        return out
    return np.asarray(v).astype({"f64": np.float64, "f32": np.float32, "f16": np.float16}[tag])


def compute_dtype(tag):
    return np.float64 if tag == "f64" else np.float32


def torch_dtype(tag):
    import torch
    return {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i32": torch.int32, "i64": torch.int64}[tag]


def to_torch(tag, v, device):
    import torch
    if tag == "bf16":
        return torch.from_numpy(v.view(np.int16).copy()).to(device).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(v)).to(device)


def from_torch(t):
    """(tag, ndarray) of a tensor, bit for bit."""
    import torch
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return "bf16", t.view(torch.int16).numpy().view(np.uint16)
    tag = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.int32: "i32", torch.int64: "i64"}[t.dtype]
    return tag, t.numpy()


def get(arrays, name, ct, required=True):
    """The named array widened to the computing type ct (None when absent and
    not required)."""
    if name not in arrays:
        if required:
            from . import Invalid
            raise Invalid(f"missing array {name}")
        return None
    tag, v = arrays[name]
    return to_float(tag, v).astype(ct)
