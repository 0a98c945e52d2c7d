"""A worker adapter that misbehaves on demand, for the bridge's own tests: the
operation "ssd_prefill" does what params["do"] says — segv (the process dies
by SIGSEGV, as a kernel's fault in a native extension), exit (exits 7), hang
(sleeps past any timeout), fault (raises what torch raises on a sticky CUDA
error), raise (an ordinary exception), shape (returns y of a wrong shape),
print (writes to stdout, which must not corrupt the protocol), ok (zeros)."""
import os
import signal
import sys
import time

import numpy as np


def describe():
    return {"kernel": "faulty", "device": "cpu"}


def capabilities():
    return {"ssd_prefill": {"dtypes": ["f32"], "state_dtypes": ["same"], "algorithm": "chunked", "features": []}}


def ssd_prefill(arrays, params):
    do = params.get("do", "ok")
    x = arrays["x"][1]
    if do == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if do == "exit":
        os._exit(7)
    if do == "hang":
        time.sleep(3600)
    if do == "fault":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if do == "raise":
        raise ValueError("the adapter failed")
    if do == "print":
        print("autotuning: chose BLOCK_M=64", flush=True)
        sys.stdout.write("more noise\n")
    y = np.zeros(x.shape if do != "shape" else x.shape[:-1], dtype=np.float32)
    b, _, h, p = x.shape
    n = arrays["B"][1].shape[-1]
    return {"y": ("f32", y), "final_states": ("f32", np.zeros((b, h, p, n), dtype=np.float32))}
