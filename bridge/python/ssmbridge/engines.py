"""What the adapters of the engines' copies of Mamba-2 share (vLLM's and
Megatron-LM's, under mamba2_vllm and mamba2_megatron): the stubs of the
package utilities their kernel files import, and the mapping of the suite's
batched problem to their varlen calling convention.

The engines' prefill has no batch axis. The suite's rows (b, l, ...), each
one sequence or, with cu_seqlens, several packed (batch 1), become one
stream of tokens (T, ...) with cumulative sequence starts; each sequence is
cut into chunks of chunk_size tokens from its own start (a chunk never holds
two sequences: the metadata both engines build for a prefill with no cached
prefix, vLLM's Mamba attention metadata builder and Megatron's mixer's
fallback), described by

  cu_chunk_seqlens   (nchunks + 1,) int32  the chunks' starts in the stream
  last_chunk_indices (nseqs,) int32        each sequence's last chunk
  seq_idx            (nchunks,) int32      each chunk's sequence

Initial states are per sequence: a row's is its first sequence's, every
other sequence starts from zeros (the suite's contract: a packed row's
initial state is its first sequence's). The states the engines return per
sequence are the suite's seq_states; a row's final state is its last
sequence's.

Nothing of the engines is copied: the adapters load the user's checkout.
"""
import re
import sys
import types

import numpy as np


def stub(name, **attrs):
    """Installs an empty module under name (and its parents where absent)
    with attrs, so that an import of it by a loaded file finds these and
    never the engine's own (which would pull in the whole engine)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            m = types.ModuleType(parent)
            m.__path__ = []
            sys.modules[parent] = m
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def constant(path, name, default):
    """The integer constant `name = N` of the file at path (read, not
    imported), else default."""
    try:
        with open(path) as f:
            m = re.search(rf"^{name}\s*(?::\s*int)?\s*=\s*(-?\d+)", f.read(), re.M)
        return int(m.group(1)) if m else default
    except OSError:
        return default


def sequences(batch, seqlen, cu):
    """The (row, start, end) of every sequence, in order: one per row, or
    those of cu (a list of ints) in a packed row."""
    if cu is None:
        return [(b, 0, seqlen) for b in range(batch)]
    return [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]


def chunk_metadata(seqs, chunk_size):
    """cu_chunk_seqlens, last_chunk_indices and seq_idx (lists) of sequences
    of the given lengths laid end to end, chunks cut from each one's start."""
    if chunk_size <= 0:
        from . import Invalid
        raise Invalid(f"chunk_size {chunk_size}: the engines' metadata cuts chunks of at least one token")
    cu, last, idx, pos = [0], [], [], 0
    for s, n in enumerate(seqs):
        if n <= 0:
            raise ValueError(f"sequence {s} is empty: the engines' metadata has no chunk for it")
        for c0 in range(0, n, chunk_size):
            pos += min(chunk_size, n - c0)
            cu.append(pos)
            idx.append(s)
        last.append(len(idx) - 1)
    return cu, last, idx


class Packed:
    """A suite problem laid out as one stream: the flat arrays (T, ...), the
    chunk metadata (int32 arrays on the inputs' device), the per-sequence
    initial states, and how to bring the outputs back. The arrays are torch
    tensors or numpy arrays (the suite's CPU path of this layout)."""

    def __init__(self, x, dt, B, C, z, init, cu, chunk_size):
        batch, seqlen = x.shape[0], x.shape[1]
        cu_list = None if cu is None else [int(v) for v in cu.tolist()]
        self.seqs = sequences(batch, seqlen, cu_list)
        self.batch, self.seqlen, self.packed, self.chunk = batch, seqlen, cu is not None, chunk_size
        flat = lambda t: None if t is None else t.reshape(batch * seqlen, *t.shape[2:])
        self.x, self.dt, self.B, self.C, self.z = (flat(t) for t in (x, dt, B, C, z))
        lens = [e - s for _, s, e in self.seqs]
        cc, last, idx = chunk_metadata(lens, chunk_size)
        self.starts = [0]
        for n in lens:
            self.starts.append(self.starts[-1] + n)
        self.chunks = list(zip(cc[:-1], cc[1:], idx))
        self.cu_seqlens, self.cu_chunk_seqlens, self.last_chunk_indices, self.seq_idx = (
            self._i32(x, v) for v in (self.starts, cc, last, idx))
        self.init = None
        if init is not None:
            first = {}
            for s, (b, _, _) in enumerate(self.seqs):
                first.setdefault(b, s)
            per = self._zeros(init, (len(self.seqs),) + tuple(init.shape[1:]))
            for b, s in first.items():
                per[s] = init[b]
            self.init = per

    @staticmethod
    def _i32(like, v):
        if isinstance(like, np.ndarray):
            return np.asarray(v, dtype=np.int32)
        import torch
        return torch.tensor(v, dtype=torch.int32, device=like.device)

    @staticmethod
    def _zeros(like, shape):
        if isinstance(like, np.ndarray):
            return np.zeros(shape, dtype=like.dtype)
        return like.new_zeros(shape)

    def out(self):
        """The preallocated output, zeros (what the engines' mixers pass)."""
        return self._zeros(self.x, self.x.shape)

    def y(self, out):
        return out.reshape(self.batch, self.seqlen, *out.shape[1:])

    def final_states(self, per_seq):
        """Each row's final state: its last sequence's."""
        last = {}
        for s, (b, _, _) in enumerate(self.seqs):
            last[b] = s
        return per_seq[[last[b] for b in range(self.batch)]]

    def chunk_ends(self):
        """(row, position) of the token after each chunk's last, int32
        (nchunks, 2): where the state after the chunk is taken in the
        suite's rows."""
        ends = []
        for c0, c1, s in self.chunks:
            b, start, _ = self.seqs[s]
            ends.append((b, start + c1 - self.starts[s]))
        return np.asarray(ends, dtype=np.int32).reshape(-1, 2)


def prefill_call(arrays, params, device, launch):
    """An engine's prefill of the suite's message: the rows laid out as the
    engine's stream (Packed), as fused-projection views on request, and
    launch(pk, x, dt, A, B, C, kw) the copy's own call, kw the keywords both
    copies take (the chunk metadata, out, D, z, dt_bias, the initial
    states, softplus, the limit and the state type). Returns the launch
    (giving out and what the copy returned) and the layout."""
    from . import upstream
    from .arrays import torch_dtype
    t = lambda name, required=True: upstream.tensor(arrays, name, device, required)
    x, dt, A, B, C = (t(n) for n in ("x", "dt", "A", "B", "C"))
    D, z, bias, init = (t(n, False) for n in ("D", "z", "dt_bias", "initial_states"))
    pk = Packed(x, dt, B, C, z, init, t("cu_seqlens", False), int(params["chunk_size"]))
    if params.get("fused_projection"):
        pk.x, pk.z, pk.B, pk.C, pk.dt = upstream.fused_views(pk.x, pk.z, pk.B, pk.C, pk.dt)
    lo, hi = params.get("dt_limit", [0.0, None])
    out = pk.out()
    kw = dict(cu_chunk_seqlens=pk.cu_chunk_seqlens, last_chunk_indices=pk.last_chunk_indices, seq_idx=pk.seq_idx,
              out=out, D=D, z=pk.z, dt_bias=bias, initial_states=pk.init, dt_softplus=bool(params.get("dt_softplus")),
              dt_limit=(float(lo), float("inf") if hi is None else float(hi)),
              state_dtype=torch_dtype(params.get("state_dtype", arrays["x"][0])))
    return (lambda: (out, launch(pk, pk.x, pk.dt, A, pk.B, pk.C, kw))), pk


def prefill_outputs(pk, out, per_seq, chunk_states=None):
    """The suite's outputs of an engine's prefill: y in the rows, each row's
    final state, the sequences' states when packed, and the chunk states
    with where each ends when asked for."""
    from .arrays import from_torch
    res = {"y": from_torch(pk.y(out)), "final_states": from_torch(pk.final_states(per_seq))}
    if pk.packed:
        res["seq_states"] = from_torch(per_seq)
    if chunk_states is not None:
        res["chunk_states"], res["chunk_ends"] = from_torch(chunk_states), ("i32", pk.chunk_ends())
    return res


def capabilities(steps):
    """What an engine's adapter declares: the prefill with the engines'
    options (chunk_states, fused_projection), the decode step, and the
    multi-token decode where steps."""
    dts = ["f32", "f16", "bf16"]
    caps = {
        "ssd_prefill": {"dtypes": dts, "state_dtypes": ["same", "f32"], "algorithm": "chunked", "chunk_sizes": [],
                        "features": ["D", "D_per_channel", "z", "dt_bias", "softplus", "dt_limit", "initial_states",
                                     "cu_seqlens", "chunk_states", "fused_projection"]},
        "ssd_step": {"dtypes": dts, "state_dtypes": ["same", "f32"],
                     "features": ["D", "z", "dt_bias", "softplus", "state_batch_indices"]},
    }
    if steps:
        caps["ssd_steps"] = {"dtypes": dts, "state_dtypes": ["same", "f32"], "features": ["D", "z", "dt_bias", "softplus"]}
    return caps
