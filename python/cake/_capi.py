"""cake's C ABI (include/cake/cake_c.h) through ctypes: the library, DLPack tensors, status
codes as exceptions. Nothing here imports torch until a tensor or a stream is given."""
import ctypes
import json
import os

from .errors import error_for

kDLCUDA = 2
_DTYPES = {"torch.float32": (2, 32), "torch.bfloat16": (4, 16), "torch.float16": (2, 16),
           "torch.int32": (0, 32), "torch.int64": (0, 64), "torch.float64": (2, 64)}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def dltensor(t, name="tensor"):
    """A DLTensor over a torch CUDA tensor (kept alive by the returned object). The device comes
    from the tensor itself: a tensor cake cannot describe is refused here, before any call."""
    if getattr(t, "device", None) is None or t.device.type != "cuda":
        raise ValueError(f"{name}: must be a CUDA tensor, got one on {getattr(t, 'device', type(t).__name__)}")
    if str(t.dtype) not in _DTYPES:
        raise ValueError(f"{name}: dtype {t.dtype} is not one cake takes ({', '.join(sorted(_DTYPES))})")
    code, bits = _DTYPES[str(t.dtype)]
    shape = (ctypes.c_int64 * t.dim())(*t.shape)
    strides = (ctypes.c_int64 * t.dim())(*t.stride())
    index = t.device.index if t.device.index is not None else _current_device()
    d = DLTensor(ctypes.c_void_p(t.data_ptr()), DLDevice(kDLCUDA, index), t.dim(),
                 DLDataType(code, bits, 1), shape, strides, 0)
    d._keep = (shape, strides, t)
    return d


def _current_device():
    import torch
    return torch.cuda.current_device()


def stream_handle(stream):
    """A CUstream from a torch stream, a raw handle, or None (torch's current stream)."""
    if stream is None:
        import torch
        stream = torch.cuda.current_stream()
    return ctypes.c_void_p(getattr(stream, "cuda_stream", stream))


def default_library():
    """CAKE_LIBRARY if set, else the libcake.so installed inside this package."""
    env = os.environ.get("CAKE_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libcake.so")


class Library:
    """One loaded libcake.so with its C signatures declared."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"libcake.so not found at {path} (set CAKE_LIBRARY or pass library=)")
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.cake_last_error.restype = cp
        lib.cake_launch_describe.restype = cp
        lib.cake_launch_describe.argtypes = [vp]
        lib.cake_launch_run.argtypes = [vp, vp]
        lib.cake_launch_rebind.argtypes = [vp, ctypes.c_int, ctypes.POINTER(cp), ctypes.POINTER(ctypes.POINTER(DLTensor)),
                                           vp]
        lib.cake_launch_rebind_data.argtypes = [vp, ctypes.c_int, ctypes.POINTER(vp), vp]
        lib.cake_launch_memory_bytes.argtypes = [vp]
        lib.cake_launch_memory_bytes.restype = ctypes.c_size_t
        lib.cake_launch_free.argtypes = [vp]
        lib.cake_runtime_create.argtypes = [cp, ctypes.POINTER(vp)]
        lib.cake_runtime_destroy.argtypes = [vp]
        lib.cake_runtime_stats.argtypes = [vp]
        lib.cake_runtime_stats.restype = cp
        lib.cake_compile_worker_path.restype = cp
        lib.cake_ops_json.restype = cp
        call = [vp, cp, ctypes.c_int, ctypes.POINTER(cp), ctypes.POINTER(ctypes.POINTER(DLTensor)), cp]
        lib.cake_prepare.argtypes = call + [ctypes.POINTER(vp)]
        lib.cake_run.argtypes = call + [vp]
        lib.cake_prebuild_for.argtypes = [vp, cp, ctypes.POINTER(cp)]
        lib.cake_plan.argtypes = [vp, cp, ctypes.POINTER(cp)]

    def check(self, status, details=None):
        if status != 0:
            raise error_for(status, self.lib.cake_last_error().decode(), details)

    def json_call(self, fn, handle, document):
        """A call that takes a JSON document and hands back JSON: (status, parsed answer)."""
        text = document if isinstance(document, str) else json.dumps(document)
        out = ctypes.c_char_p()
        status = fn(handle, text.encode(), ctypes.byref(out))
        return status, (json.loads(out.value.decode()) if out.value else None)
