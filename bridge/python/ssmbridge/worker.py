"""The worker process: ``python3 -m ssmbridge.worker ADAPTER [key=value ...]``.

It loads ADAPTER (a module of ``adapters/`` by name, or a path to a .py file),
calls its ``open(args)`` with the key=value arguments, then answers the suite's
messages on stdin/stdout (``protocol``) until "exit" or end of input:

  hello  -> describe(), capabilities(), the protocol version
  call   -> the adapter's function for header["op"] on the arrays and params
  time   -> header["op"] launched iters times after warmup launches on inputs
            kept on the device (adapter.prepare), per-launch times in ms from
            CUDA events (perf_counter around a synchronous call on the CPU)
  exit

SSMK_BRIDGE_PROFILE=DIR profiles the worker (main).

A failure answers {"error", "kind"}: unsupported, invalid, error (the adapter
raised) or fault (the device reported an error: the CUDA context may be
poisoned, so the worker answers and exits; the suite starts a fresh one).
Anything the adapter or its kernel prints goes to stderr: stdout carries only
the protocol.
"""
import importlib.util
import os
import sys
import time
import traceback

from . import Invalid, Unsupported, protocol

PROTOCOL = 1
FAULT_MARKS = ("CUDA error", "illegal memory access", "device-side assert", "unspecified launch failure",
               "CUBLAS_STATUS", "misaligned address", "an illegal instruction", "cudaErrorLaunchFailure")


def load_adapter(spec):
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adapters")
    path = spec if spec.endswith(".py") else os.path.join(here, spec + ".py")
    if not os.path.isfile(path):
        raise SystemExit(f"ssmbridge: adapter {spec!r}: no file {path} (a name in {here} or a path to a .py file)")
    mod_spec = importlib.util.spec_from_file_location("ssmbridge_adapter", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod, path


def is_fault(exc):
    msg = f"{type(exc).__name__}: {exc}"
    return any(m in msg for m in FAULT_MARKS)


def sync(adapter):
    s = getattr(adapter, "synchronize", None)
    if s is not None:
        s()


def timed(adapter, op, arrays, params):
    warmup, iters = int(params.get("warmup", 3)), int(params.get("iters", 10))
    launch = adapter.prepare(op, arrays, params)
    for _ in range(warmup):
        launch()
    sync(adapter)
    timer = getattr(adapter, "timer", None)
    if timer is not None:
        return [timer(launch) for _ in range(iters)]
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        launch()
        sync(adapter)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main(argv):
    """Serves the suite; with SSMK_BRIDGE_PROFILE=DIR the whole of it runs
    under cProfile, its statistics written to DIR/worker-PID.prof at exit
    (python3 -m pstats reads them): where an adapter spends a call's time."""
    where = os.environ.get("SSMK_BRIDGE_PROFILE", "")
    if not where:
        return serve(argv)
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    try:
        return serve(argv)
    finally:
        prof.disable()
        os.makedirs(where, exist_ok=True)
        prof.dump_stats(os.path.join(where, f"worker-{os.getpid()}.prof"))


def serve(argv):
    if len(argv) < 1:
        raise SystemExit("usage: python3 -m ssmbridge.worker ADAPTER [key=value ...]")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the kernel prints goes to stderr
    sys.stdout = sys.stderr
    proto_in = os.fdopen(os.dup(0), "rb")
    args = {}
    for kv in argv[1:]:
        if "=" not in kv:
            raise SystemExit(f"ssmbridge: argument {kv!r}: want key=value")
        k, v = kv.split("=", 1)
        args[k] = v
    adapter, path = load_adapter(argv[0])
    if hasattr(adapter, "open"):
        adapter.open(args)
    while True:
        try:
            header, arrays = protocol.read(proto_in)
        except EOFError:
            return 0
        kind = header.get("kind")
        try:
            if kind == "exit":
                protocol.write(proto_out, {"ok": True})
                return 0
            if kind == "hello":
                d = adapter.describe() if hasattr(adapter, "describe") else {}
                d.setdefault("adapter", path)
                d.setdefault("python", sys.version.split()[0])
                protocol.write(proto_out, {"ok": True, "protocol": PROTOCOL, "describe": d,
                                           "capabilities": adapter.capabilities(), "pid": os.getpid()})
            elif kind == "call":
                fn = getattr(adapter, header["op"], None)
                if fn is None:
                    raise Unsupported(f"the adapter has no operation {header['op']!r}")
                outs = fn(arrays, header.get("params", {}))
                sync(adapter)
                extra = adapter.configs() if hasattr(adapter, "configs") else {}
                protocol.write(proto_out, {"ok": True, "configs": extra}, outs)
            elif kind == "time":
                if not hasattr(adapter, "prepare"):
                    raise Unsupported("the adapter does not time its kernels (no prepare)")
                ms = timed(adapter, header["op"], arrays, header.get("params", {}))
                protocol.write(proto_out, {"ok": True, "ms": ms})
            else:
                raise Invalid(f"unknown message kind {kind!r}")
        except Unsupported as e:
            protocol.write(proto_out, {"error": str(e), "kind": "unsupported"})
        except Invalid as e:
            protocol.write(proto_out, {"error": str(e), "kind": "invalid"})
        except Exception as e:  # the kernel's or the adapter's
            tb = traceback.format_exc(limit=4)
            fault = is_fault(e)
            protocol.write(proto_out, {"error": f"{type(e).__name__}: {e}", "kind": "fault" if fault else "error", "traceback": tb})
            if fault:
                return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
