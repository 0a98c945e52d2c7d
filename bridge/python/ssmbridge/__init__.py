"""The Python side of ssmverify's bridge to kernels launched from Python.

The suite (Go) starts ``python3 -m ssmbridge.worker ADAPTER [key=value ...]``
and talks to it over its stdin and stdout: framed messages, each a JSON header
followed by the raw bytes of its arrays (``protocol``). The adapter, a module
of the user's or one of ``adapters/``, maps the suite's problems to a kernel:
see ``adapters/numpy_ssd.py`` (the suite's own CPU path) and
``adapters/mamba2_upstream.py`` (upstream's Triton kernels from a checkout).
"""


class Unsupported(Exception):
    """Raised by an adapter for a problem its kernel does not take (a dtype,
    an option): the suite reports the combination as not supported."""


class Invalid(Exception):
    """Raised by an adapter for arguments it refuses (the message names the
    argument): the suite judges whether refusing was right."""


def set_args(adapter, defaults, args):
    """Sets an adapter's key=value arguments into its defaults (a dict),
    refusing a key it does not know."""
    for k, v in args.items():
        if k not in defaults:
            want = ", ".join(f"{d}=" for d in defaults)
            raise SystemExit(f"{adapter}: unknown argument {k!r} (want {want})")
        defaults[k] = v
