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
    return mods


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
    """Versions, GPU, architecture and driver."""
    import torch
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
    """Milliseconds of one launch by CUDA events."""
    import torch
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    launch()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def configs(prefix):
    """The configuration each autotuner of the modules under prefix chose
    last."""
    from triton.runtime.autotuner import Autotuner
    out = {}
    for mname in list(sys.modules):
        if mname.startswith(prefix):
            for name, obj in vars(sys.modules[mname]).items():
                if isinstance(obj, Autotuner) and getattr(obj, "cache", None):
                    out[name] = str(list(obj.cache.values())[-1])
    return out


def synchronize(device):
    import torch
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
