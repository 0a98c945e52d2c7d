"""Framing of the bridge's messages (the Go side is bridge/protocol.go).

A message is a 4-byte little-endian length, a UTF-8 JSON header of that
length, then the arrays' bytes in the order the header lists them. The header
holds "arrays": [{"name", "dtype", "shape"}] with dtype one of f64, f32, f16,
bf16 (raw 16-bit patterns), i32, i64, u8. Arrays cross as their bytes: nothing
is converted, so bf16 and fp16 values arrive bit for bit.
"""
import json
import struct

import numpy as np

DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": np.uint16,
          "i32": np.int32, "i64": np.int64, "u8": np.uint8}


def _read_exact(f, n):
    """Reads n bytes into a buffer of their own (an array of gigabytes is
    read where it will lie, never copied)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise EOFError("bridge: the suite closed the pipe")
        got += k
    return buf


def read(f):
    """Reads one message: (header dict, {name: (dtype, ndarray)})."""
    (n,) = struct.unpack("<I", _read_exact(f, 4))
    header = json.loads(_read_exact(f, n))
    arrays = {}
    for a in header.get("arrays") or []:
        dt = DTYPES[a["dtype"]]
        count = int(np.prod(a["shape"])) if a["shape"] else 1
        raw = _read_exact(f, count * np.dtype(dt).itemsize)
        arrays[a["name"]] = (a["dtype"], np.frombuffer(raw, dtype=dt).reshape(a["shape"]))
    return header, arrays


def write(f, header, arrays=None):
    """Writes one message; arrays maps a name to (dtype tag, ndarray)."""
    arrays = arrays or {}
    header = dict(header)
    header["arrays"] = []
    payload = []
    for name, (tag, v) in arrays.items():
        v = np.ascontiguousarray(v, dtype=DTYPES[tag])
        header["arrays"].append({"name": name, "dtype": tag, "shape": list(v.shape)})
        payload.append(v.reshape(-1).view(np.uint8))  # its bytes, not a copy
    h = json.dumps(header).encode()
    f.write(struct.pack("<I", len(h)) + h)
    for p in payload:
        f.write(p)
    f.flush()
