"""cake: a JIT kernel compiler and runtime loader for CUDA training kernels.

    import cake
    cake.plan("family.op", {"t": 4096, "h": 4096}, arch="sm_90a", sms=132)
    rt = cake.Runtime()              # or cake.runtime(): the process's shared one

Importing cake needs neither torch nor a GPU; `cake.torch` has the torch ops. The library is
libcake.so from this package (or CAKE_LIBRARY); its C ABI is include/cake/cake_c.h.
"""
import importlib.metadata
import threading

from ._capi import dltensor
from .errors import ArgumentError, CakeError, CompileError, DriverError, NoRouteError
from .runtime import Launch, Runtime

try:
    __version__ = importlib.metadata.version("cake")
except importlib.metadata.PackageNotFoundError:  # used from a source tree (python/ on sys.path)
    __version__ = "source"
__all__ = ["Runtime", "Launch", "runtime", "plan", "prebuild", "ops", "dltensor", "CakeError",
           "ArgumentError", "NoRouteError", "CompileError", "DriverError"]

_default = None
_default_lock = threading.Lock()


def runtime():
    """The process's shared Runtime, made at the first call with the environment's options."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
        return _default


def plan(op, dims, dtypes=None, **kwargs):
    """Runtime.plan on the shared runtime."""
    return runtime().plan(op, dims, dtypes, **kwargs)


def prebuild(problems, **kwargs):
    """Runtime.prebuild on the shared runtime."""
    return runtime().prebuild(problems, **kwargs)


def ops():
    """Every op's schema (Runtime.ops on the shared runtime)."""
    return runtime().ops()
