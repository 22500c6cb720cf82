"""cake's ops as torch ops (torch.library custom ops with fake kernels and autograd), one
module a family in cake/torch/<family>/, each listing its ops in __all__; all of them are
importable from here:

    import cake.torch
    y = cake.torch.rms_norm(x, w, 1e-6)
    y = cake.torch.grouped_mm(x, w, offs)

Launches go on torch's current stream through the process's shared cake.Runtime; a call whose
tensors make a problem seen before rebinds that problem's prepared launch (calls.py)."""
import importlib
import pkgutil

from .calls import calls  # noqa: F401

__all__ = []
for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.ispkg:
        _mod = importlib.import_module(f"{__name__}.{_m.name}")
        for _name in getattr(_mod, "__all__", ()):
            globals()[_name] = getattr(_mod, _name)
            __all__.append(_name)
