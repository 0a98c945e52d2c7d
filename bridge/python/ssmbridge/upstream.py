"""What the adapters of upstream's Triton kernels share: loading modules from
a user's checkout by path, under empty parent packages, so that
mamba_ssm/__init__.py (which imports the compiled CUDA extension) never runs;
the checkout's commit; the device's description; CUDA-event timing; the
configurations the autotuners chose."""
import importlib
import os
import subprocess
import sys
import types


def open_checkout(adapter, args, given, folder, packages, modules):
    """Sets the adapter's arguments (checkout=, commit=, device=) from given,
    checks that the checkout holds folder, and loads modules from it; the
    checkout becomes an absolute path and the commit the one named, else
    the checkout's git HEAD. Returns the modules."""
    from . import set_args
    set_args(adapter, args, given)
    root = os.path.abspath(os.path.expanduser(args["checkout"]))
    if not args["checkout"] or not os.path.isdir(os.path.join(root, folder)):
        raise SystemExit(f"{adapter}: checkout={args['checkout']!r}: want a folder holding {folder}")
    args["checkout"] = root
    mods = load(root, packages, modules)
    args["commit"] = commit(root, args["commit"])
    if args.get("pin", "0") not in ("0", "1"):
        raise SystemExit(f"{adapter}: pin={args['pin']!r}: want 0 (autotuned) or 1 (one configuration a key)")
    if args.get("pin") == "1":
        PINNED.extend(pin_autotuners(packages[0]))
    return mods


# the kernels pin=1 pinned (pin_autotuners), for describe()
PINNED = []


def pin_autotuners(prefix, autotuner=None):
    """Pins every autotuner of the modules under prefix to one
    configuration: the first that its own pruning keeps for a call's
    arguments (Triton's Autotuner.prune_configs, which every version calls
    before it benchmarks), so that each new key compiles and times one
    configuration rather than every one listed (Mamba-3's kernels list 27
    to 54: a mutation run compiles each anew). The kernels' numbers are
    then that configuration's, which an autotuned run need not choose;
    the computation is the same. Returns the names pinned. autotuner is
    the class to look for (Triton's, unless a test gives its own)."""
    if autotuner is None:
        from triton.runtime.autotuner import Autotuner as autotuner
    pinned = set()
    for mname in list(sys.modules):
        if not (mname == prefix or mname.startswith(prefix + ".")):
            continue
        for name, obj in list(vars(sys.modules[mname]).items()):
            if not isinstance(obj, autotuner) or len(obj.configs) < 2:
                continue
            if not getattr(obj, "_ssmverify_pinned", False):
                prune = obj.prune_configs
                obj.prune_configs = lambda kwargs, prune=prune: list(prune(kwargs))[:1]
                obj._ssmverify_pinned = True
            pinned.add(name)
    return sorted(pinned)


def autotuning():
    """What describe() says of the autotuners."""
    if PINNED:
        return f"pinned (pin=1): the first configuration each pruning keeps, {len(PINNED)} kernels"
    return "autotuned (each key benchmarks every configuration listed)"


def load(root, packages, modules):
    """Imports modules (dotted names) from the checkout root, each of the
    packages an empty module whose __path__ is its folder."""
    for pkg in packages:
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(root, *pkg.split("."))]
        sys.modules[pkg] = m
    return [importlib.import_module(m) for m in modules]


def commit(root, given):
    """The commit the user named, else the checkout's git HEAD."""
    if given:
        return given
    try:
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown (no git; pass commit=)"


def describe(device):
    """Versions, GPU, architecture and driver (device cpu: torch's version
    and "cpu", for an adapter tried against a CPU stand-in of a kernel)."""
    import torch
    if str(device).startswith("cpu"):
        return {"torch": torch.__version__, "device": "cpu"}
    import triton
    props = torch.cuda.get_device_properties(torch.device(device))
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split("\n")[0].strip()
    except Exception:
        drv = "unknown"
    return {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
            "device": props.name, "arch": f"sm_{props.major}{props.minor}", "driver": drv}


def timer(launch):
    """Milliseconds of one launch by CUDA events (by the clock without a
    GPU)."""
    import torch
    if not torch.cuda.is_available():
        import time
        t0 = time.perf_counter()
        launch()
        return (time.perf_counter() - t0) * 1e3
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    launch()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def configs(prefix, autotuner=None):
    """The configuration each autotuner of the modules under prefix chose
    last. The autotuners are found once for each set of loaded modules
    (the worker asks after every call, and walking every module's names
    cost 0.9 ms a call, a fifth of a decode step's round trip); autotuner
    is the class to look for (Triton's, unless a test gives its own)."""
    if autotuner is None:
        from triton.runtime.autotuner import Autotuner as autotuner
    key = (prefix, autotuner, len(sys.modules))
    if _TUNERS.get("key") != key:
        found = []
        for mname in list(sys.modules):
            if mname.startswith(prefix):
                found.extend((name, obj) for name, obj in vars(sys.modules[mname]).items() if isinstance(obj, autotuner))
        _TUNERS.update(key=key, found=found)
    out = {}
    for name, obj in _TUNERS["found"]:
        if getattr(obj, "cache", None):
            out[name] = str(list(obj.cache.values())[-1])
    return out


# the autotuners configs() found, and for which modules
_TUNERS = {}


def synchronize(device):
    import torch
    if not str(device).startswith("cpu"):
        torch.cuda.synchronize(device)


def tensor(arrays, name, device, required=True):
    """The named array on the device, bit for bit (None when absent and not
    required)."""
    from . import Invalid
    from .arrays import to_torch
    if name not in arrays:
        if required:
            raise Invalid(f"missing array {name}")
        return None
    tag, v = arrays[name]
    return to_torch(tag, v, device)


def fused_views(x, z, B, C, dt):
    """x, z, B, C and dt as a Mamba-2 layer hands them to the scan
    (mamba_ssm/modules/mamba2.py and the engines' mixers): z and dt strided
    views of one in_proj output per token [z | xBC | dt], x, B and C strided
    views of the causal convolution's output per token [x | B | C]. The
    leading axes (batch, seqlen) or (tokens,) are kept; the values are the
    given ones, bit for bit."""
    import torch
    lead = tuple(x.shape[:-2])
    H, P = x.shape[-2:]
    G, N = B.shape[-2:]
    hp, gn = H * P, G * N
    xbc = torch.empty(lead + (hp + 2 * gn,), dtype=x.dtype, device=x.device)
    xbc[..., :hp] = x.reshape(lead + (hp,))
    xbc[..., hp:hp + gn] = B.reshape(lead + (gn,))
    xbc[..., hp + gn:] = C.reshape(lead + (gn,))
    zw = hp if z is not None else 0
    proj = torch.zeros(lead + (zw + hp + 2 * gn + H,), dtype=x.dtype, device=x.device)
    if z is not None:
        proj[..., :zw] = z.reshape(lead + (hp,))
    proj[..., -H:] = dt
    xv = xbc[..., :hp].unflatten(-1, (H, P))
    Bv = xbc[..., hp:hp + gn].unflatten(-1, (G, N))
    Cv = xbc[..., hp + gn:].unflatten(-1, (G, N))
    zv = proj[..., :zw].unflatten(-1, (H, P)) if z is not None else None
    return xv, zv, Bv, Cv, proj[..., -H:]


def tied_views(P, N, A, dt, bias, D):
    """A (h) as (h, p, n), dt (…, h) as (…, h, p), dt_bias and D (h) as (h, p),
    each a stride-0 view over the head dimension (and the state), as Mamba-2's
    layers call selective_state_update (the kernels' tied-head-dimension
    path); an absent bias or D stays None."""
    from einops import repeat
    A = repeat(A, "h -> h p n", p=P, n=N)
    dt = repeat(dt, "... h -> ... h p", p=P)
    bias = None if bias is None else repeat(bias, "h -> h p", p=P)
    D = None if D is None else repeat(D, "h -> h p", p=P)
    return A, dt, bias, D


def hooks(args, prefix):
    """The worker's hooks every adapter of a torch kernel has, bound to its
    arguments (args["device"]) and its modules (prefix): synchronize(),
    timer(launch), configs() and tensor(arrays, name, required=True)."""
    return (lambda: synchronize(args["device"]), timer, lambda: configs(prefix),
            lambda arrays, name, required=True: tensor(arrays, name, args["device"], required))


def step_call(tensor, arrays, params, update):
    """The decode step as upstream's layer and Megatron's mixer call
    selective_state_update (update): tied-head-dimension views, the pool
    updated in place, a negative slot a padding row the kernel skips.
    Returns the launch (giving y) and the pool."""
    from . import Unsupported
    if params.get("dt_limit", [0.0, None]) != [0.0, None]:
        raise Unsupported("selective_state_update takes no dt_limit")
    state, x, dt, A, B, C = (tensor(arrays, n) for n in ("state", "x", "dt", "A", "B", "C"))
    D, z, bias = (tensor(arrays, n, False) for n in ("D", "z", "dt_bias"))
    A, dt, bias, D = tied_views(x.shape[-1], state.shape[-1], A, dt, bias, D)
    kw = dict(D=D, z=z, dt_bias=bias, dt_softplus=bool(params.get("dt_softplus")),
              state_batch_indices=tensor(arrays, "state_batch_indices", False))
    return lambda: update(state, x, dt, A, B, C, **kw), state


def step(tensor, arrays, params, update):
    """step_call's launch run once: the suite's outputs y and state."""
    from .arrays import from_torch
    call, state = step_call(tensor, arrays, params, update)
    y = call()
    return {"y": from_torch(y), "state": from_torch(state)}


def decode_chain(tensor, arrays, params, prefill, update):
    """ssd_decode_chain as upstream's layer serves a request (step_loop): each row's first prefill_tokens tokens
    through prefill (given the arrays cut to them, it returns the y (b, k, h, p) and final-state tensors), then
    every later token one update (selective_state_update) of all rows, called as step_call calls it, on the state
    kept on the device between launches, which updates it in place. The arrays move to the device once and no
    launch waits for another: a chain of thousands of tokens is one call of the suite, not one round trip a token.
    Returns y (b, l, h, p) and final_states, the state after the last token."""
    import torch
    from einops import repeat
    from . import Unsupported
    from .arrays import from_torch
    k, L = int(params["prefill_tokens"]), arrays["x"][1].shape[1]
    if not 1 <= k < L:
        raise Unsupported(f"prefill_tokens {k}: want 1 <= k < {L}")
    if params.get("dt_limit", [0.0, None]) != [0.0, None]:
        raise Unsupported("selective_state_update takes no dt_limit")
    seq = ("x", "dt", "B", "C", "z")
    y0, state = prefill({n: (t, v[:, :k] if n in seq else v) for n, (t, v) in arrays.items()})
    # each token's inputs contiguous, as a layer's step receives them
    x, dt, B, C = (tensor(arrays, n).transpose(0, 1).contiguous() for n in ("x", "dt", "B", "C"))
    z = tensor(arrays, "z", False)
    z = None if z is None else z.transpose(0, 1).contiguous()
    A, D, bias = tensor(arrays, "A"), tensor(arrays, "D", False), tensor(arrays, "dt_bias", False)
    P, N = x.shape[-1], B.shape[-1]
    A, _, bias, D = tied_views(P, N, A, dt[0], bias, D)
    state = state.contiguous()
    ys = [y0]
    for t in range(k, L):
        y = update(state, x[t], repeat(dt[t], "... h -> ... h p", p=P), A, B[t], C[t], D=D,
                   z=None if z is None else z[t], dt_bias=bias, dt_softplus=bool(params.get("dt_softplus")))
        ys.append(y.unsqueeze(1))
    return {"y": from_torch(torch.cat(ys, 1)), "final_states": from_torch(state)}
