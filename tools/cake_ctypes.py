"""cake's C ABI from Python through ctypes, for scripts that run cake next to torch.

    rt = CakeRuntime("build-gpu/runtime/libcake.so")
    rt.run("family.op", out=out, x=x, accumulate=True)  # one call, on torch's stream
    launch = rt.prepare("family.op", y=y, x=x, eps=1e-6)    # launch.run() replays it
    rt.ops()                                             # every op's name and arguments
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


class CakeError(RuntimeError):
    pass


class Launch:
    """A prepared call. It holds its tensors: the launch replays their addresses."""

    def __init__(self, lib, handle, keep=None):
        self._lib, self._h, self._keep = lib, handle, keep

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


_OPTIONS = {"deterministic": bool, "candidate": str, "max_sms": int, "accumulate": bool, "eps": float}


class CakeRuntime:
    """One cake runtime. Every op of every family goes through prepare() (a Launch to replay)
    or run() (one call on a stream): the op's name, its tensors by argument name, and any of
    the options deterministic, candidate, max_sms, accumulate, eps. An argument named after a
    Python keyword takes a trailing underscore (`in_` for `in`).

        rt.prepare("family.op", y=y, x=x, eps=1e-6).run()
        rt.run("family.op", out=out, a=a, b=b)
    """

    def __init__(self, libpath, **options):
        self.lib = ctypes.CDLL(libpath)
        self.lib.cake_last_error.restype = ctypes.c_char_p
        self.lib.cake_launch_describe.restype = ctypes.c_char_p
        self.lib.cake_launch_describe.argtypes = [ctypes.c_void_p]
        self.lib.cake_launch_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cake_launch_free.argtypes = [ctypes.c_void_p]
        self.lib.cake_runtime_destroy.argtypes = [ctypes.c_void_p]
        self.lib.cake_compile_worker_path.restype = ctypes.c_char_p
        self.lib.cake_ops_json.restype = ctypes.c_char_p
        call = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                ctypes.POINTER(ctypes.POINTER(DLTensor)), ctypes.c_char_p]
        self.lib.cake_prepare.argtypes = call + [ctypes.POINTER(ctypes.c_void_p)]
        self.lib.cake_run.argtypes = call + [ctypes.c_void_p]
        self.lib.cake_prebuild_for.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
        h = ctypes.c_void_p()
        self._check(self.lib.cake_runtime_create(json.dumps(options).encode(), ctypes.byref(h)))
        self.h = h

    def ops(self):
        """Every op's schema: name, arguments (name, dtypes, output, optional), options."""
        return json.loads(self.lib.cake_ops_json().decode())

    def compile_worker(self):
        """The compile worker this library runs NVRTC in; "" when compiles run in process."""
        return self.lib.cake_compile_worker_path().decode()

    def prebuild_for(self, shapes):
        """Compiles (or loads) every program the planner picks for a job's problems, so their
        first calls compile nothing. shapes: a dict or JSON text in the format of
        `cakec build --shapes` ({"problems": [{"op", "dims", "dtypes", ...}]}, optionally
        "arch" and "sms"). Returns the summary: built, up_to_date, skipped, failed; raises
        CakeError (with .summary) when a problem has no route or a build failed."""
        text = shapes if isinstance(shapes, str) else json.dumps(shapes)
        out = ctypes.c_char_p()
        status = self.lib.cake_prebuild_for(self.h, text.encode(), ctypes.byref(out))
        summary = json.loads(out.value.decode()) if out.value else None
        if status != 0:
            err = CakeError(f"cake status {status}: {self.lib.cake_last_error().decode()}")
            err.summary = summary
            raise err
        return summary

    def _check(self, status):
        if status != 0:
            raise CakeError(f"cake status {status}: {self.lib.cake_last_error().decode()}")

    @staticmethod
    def _call(op, kwargs):
        """The C arguments of a call: tensors (None: an optional one left out) and options."""
        options = {k: _OPTIONS[k](kwargs.pop(k)) for k in list(kwargs) if k in _OPTIONS and kwargs[k] is not None}
        named = [(name[:-1] if name.endswith("_") else name, t) for name, t in kwargs.items() if t is not None]
        dls = [dltensor(t, name) for name, t in named]
        names = (ctypes.c_char_p * len(named))(*[name.encode() for name, _ in named])
        ptrs = (ctypes.POINTER(DLTensor) * len(dls))(*[ctypes.pointer(d) for d in dls])
        keep = (dls, names, ptrs, [t for _, t in named])
        return (op.encode(), len(named), names, ptrs, json.dumps(options).encode()), keep

    def prepare(self, op, **kwargs):
        args, keep = self._call(op, kwargs)
        h = ctypes.c_void_p()
        self._check(self.lib.cake_prepare(self.h, *args, ctypes.byref(h)))
        return Launch(self, h, keep)

    def run(self, op, stream=None, **kwargs):
        args, _keep = self._call(op, kwargs)
        self._check(self.lib.cake_run(self.h, *args, _stream(stream)))

    def __del__(self):
        if getattr(self, "h", None):
            self.lib.cake_runtime_destroy(self.h)
            self.h = None
