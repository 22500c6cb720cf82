"""cake's C ABI from Python through ctypes, for scripts that run cake next to torch.

    rt = CakeRuntime("build-gpu/runtime/libcake.so")
    rt.cast(out, inp, accumulate=True)          # one call on torch's current stream
    launch = rt.prepare_cast(out, inp, True)    # prepared: launch.run(stream) replays it
"""
import ctypes
import json

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


def _ref(t, name):
    return ctypes.byref(dltensor(t, name))


class CakeError(RuntimeError):
    pass


class Launch:
    def __init__(self, lib, handle):
        self._lib, self._h = lib, handle

    def run(self, stream=None):
        self._lib._check(self._lib.lib.cake_launch_run(self._h, _stream(stream)))

    def describe(self):
        return self._lib.lib.cake_launch_describe(self._h).decode()

    def __del__(self):
        if self._h:
            self._lib.lib.cake_launch_free(self._h)
            self._h = None


def _stream(stream):
    if stream is None:
        import torch
        stream = torch.cuda.current_stream()
    return ctypes.c_void_p(getattr(stream, "cuda_stream", stream))


class CakeRuntime:
    def __init__(self, libpath, **options):
        self.lib = ctypes.CDLL(libpath)
        self.lib.cake_last_error.restype = ctypes.c_char_p
        self.lib.cake_launch_describe.restype = ctypes.c_char_p
        self.lib.cake_launch_describe.argtypes = [ctypes.c_void_p]
        self.lib.cake_launch_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cake_launch_free.argtypes = [ctypes.c_void_p]
        self.lib.cake_runtime_destroy.argtypes = [ctypes.c_void_p]
        self.lib.cake_compile_worker_path.restype = ctypes.c_char_p
        h = ctypes.c_void_p()
        self._check(self.lib.cake_runtime_create(json.dumps(options).encode(), ctypes.byref(h)))
        self.h = h

    def compile_worker(self):
        """The compile worker this library runs NVRTC in; "" when compiles run in process."""
        return self.lib.cake_compile_worker_path().decode()

    def _check(self, status):
        if status != 0:
            raise CakeError(f"cake status {status}: {self.lib.cake_last_error().decode()}")

    def prepare_add(self, out, a, b, deterministic=True):
        h = ctypes.c_void_p()
        self._check(self.lib.cake_prepare_add(self.h, _ref(out, "out"), _ref(a, "a"), _ref(b, "b"),
                                              int(deterministic), ctypes.byref(h)))
        return Launch(self, h)

    def prepare_cast(self, out, inp, accumulate=False, deterministic=True):
        h = ctypes.c_void_p()
        self._check(self.lib.cake_prepare_cast(self.h, _ref(out, "out"), _ref(inp, "in"),
                                               int(accumulate), int(deterministic), ctypes.byref(h)))
        return Launch(self, h)

    def prepare_rmsnorm_fwd(self, y, rstd, x, w, eps, residual=None, h_out=None):
        h = ctypes.c_void_p()
        ref = lambda t, name: _ref(t, name) if t is not None else None
        self.lib.cake_prepare_rmsnorm_fwd.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(DLTensor)] * 6 + [
            ctypes.c_float, ctypes.POINTER(ctypes.c_void_p)]
        self._check(self.lib.cake_prepare_rmsnorm_fwd(self.h, ref(y, "y"), ref(rstd, "rstd"), ref(h_out, "h_out"),
                                                      ref(x, "x"), ref(residual, "residual"), ref(w, "w"), eps,
                                                      ctypes.byref(h)))
        return Launch(self, h)

    def prepare_rmsnorm_bwd(self, dx, dw, dy, x, rstd, w):
        h = ctypes.c_void_p()
        self._check(self.lib.cake_prepare_rmsnorm_bwd(self.h, _ref(dx, "dx"), _ref(dw, "dw"), _ref(dy, "dy"),
                                                      _ref(x, "x"), _ref(rstd, "rstd"), _ref(w, "w"), ctypes.byref(h)))
        return Launch(self, h)

    # grouped_gemm (runtime/ops.hpp): offs is an int32 [E] device tensor of cumulative group ends.
    # candidate: None for the planner's choice, else the one route candidate to consider.
    def _prepare_grouped(self, fn, tensors, names, flags, candidate):
        h = ctypes.c_void_p()
        f = getattr(self.lib, fn)
        f.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(DLTensor)] * len(tensors) + [ctypes.c_int] * len(flags) + [
            ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        self._check(f(self.h, *[_ref(t, n) for t, n in zip(tensors, names)], *[int(v) for v in flags],
                      candidate.encode() if candidate else None, ctypes.byref(h)))
        return Launch(self, h)

    def prepare_grouped_gemm_fwd(self, y, x, w, offs, deterministic=True, candidate=None):
        return self._prepare_grouped("cake_prepare_grouped_gemm_fwd", [y, x, w, offs], ["y", "x", "w", "offs"],
                                     [deterministic], candidate)

    def prepare_grouped_gemm_dgrad(self, dx, g, w, offs, deterministic=True, candidate=None):
        return self._prepare_grouped("cake_prepare_grouped_gemm_dgrad", [dx, g, w, offs], ["dx", "g", "w", "offs"],
                                     [deterministic], candidate)

    def prepare_grouped_gemm_wgrad(self, dw, g, x, offs, accumulate=False, deterministic=True, candidate=None):
        return self._prepare_grouped("cake_prepare_grouped_gemm_wgrad", [dw, g, x, offs], ["dw", "g", "x", "offs"],
                                     [accumulate, deterministic], candidate)

    def add(self, out, a, b, stream=None):
        self._check(self.lib.cake_add(self.h, _ref(out, "out"), _ref(a, "a"), _ref(b, "b"), _stream(stream)))

    def cast(self, out, inp, accumulate=False, stream=None):
        self._check(self.lib.cake_cast(self.h, _ref(out, "out"), _ref(inp, "in"), int(accumulate), _stream(stream)))

    def __del__(self):
        if getattr(self, "h", None):
            self.lib.cake_runtime_destroy(self.h)
            self.h = None
