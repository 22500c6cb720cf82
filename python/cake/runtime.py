"""cake.Runtime: one runtime (registry, planner, loader, caches) over libcake.so's C ABI."""
import ctypes
import json
import threading

from ._capi import DLTensor, Library, default_library, dltensor, stream_handle

_OPTIONS = {"deterministic": bool, "candidate": str, "max_sms": int, "accumulate": bool, "eps": float,
            "external_memory": bool}
_libraries = {}
_libraries_lock = threading.Lock()


def _library(path):
    path = path or default_library()
    with _libraries_lock:
        if path not in _libraries:
            _libraries[path] = Library(path)
        return _libraries[path]


def tensor_args(tensors):
    """Tensors by argument name as the C ABI takes them: (n, names, DLTensor pointers, what
    keeps them alive). None leaves an optional argument out; a trailing underscore names a
    Python keyword (`in_` for `in`)."""
    named = [(name[:-1] if name.endswith("_") else name, t) for name, t in tensors.items() if t is not None]
    dls = [dltensor(t, name) for name, t in named]
    names = (ctypes.c_char_p * len(named))(*[name.encode() for name, _ in named])
    ptrs = (ctypes.POINTER(DLTensor) * len(dls))(*[ctypes.pointer(d) for d in dls])
    return len(named), names, ptrs, (dls, names, ptrs, [t for _, t in named])


class Rebinder:
    """cake.torch's fast path: runs one launch, again and again, on tensors laid out as the
    ones of its last checked bind (the same names, shapes, strides, dtypes and device, in the
    same order; the caller guarantees it, as cake.torch's Calls does by keying launches on the
    layout), given by their addresses alone (cake_launch_rebind_data: alignment, null and
    overlap checked, the layout not). It holds no tensor between calls. Not part of the
    public API: Launch.rebind checks a new layout."""

    def __init__(self, launch, n):
        launch._keep = None  # prepare's tensors: every run here follows a rebind to new ones
        self._launch = launch
        lib = launch._lib
        self._h, self._check = launch._h, lib.check
        self._rebind, self._run = lib.lib.cake_launch_rebind_data, lib.lib.cake_launch_run
        self._n, self._data = n, (ctypes.c_void_p * n)()
        self.memory_bytes = launch.memory_bytes

    def run(self, addresses, memory, stream):
        """addresses: the tensors' data pointers in the bind's order; memory: the block's
        address (external memory) or None; stream: a raw CUstream handle."""
        self._data[:] = addresses
        status = self._rebind(self._h, self._n, self._data, memory)
        if status == 0:
            status = self._run(self._h, stream)
        if status != 0:
            self._check(status)


class Launch:
    """A prepared call (validated, planned, kernels loaded, scratch held): run() replays it on
    the tensors it was prepared with, with no allocation, compile or host synchronisation."""

    def __init__(self, lib, handle, keep):
        self._lib, self._h, self._keep = lib, handle, keep

    def run(self, stream=None):
        """Enqueues on `stream` (default: torch's current stream)."""
        self._lib.check(self._lib.lib.cake_launch_run(self._h, stream_handle(stream)))

    @property
    def memory_bytes(self):
        """With external_memory: the bytes of the block each rebind must give (0: none)."""
        return self._lib.lib.cake_launch_memory_bytes(self._h)

    def rebind(self, memory=None, **tensors):
        """Binds the launch to new tensors of the same problem (as prepare took them): checked
        as prepare checks them, with the plan, kernels and scratch reused. memory: for a
        launch prepared with external_memory=True, its block (a tensor of at least
        memory_bytes bytes, or an address), kept alive by the caller until the launches that
        use it have run. ArgumentError (the launch unchanged) when the problem differs."""
        n, names, ptrs, keep = tensor_args(tensors)
        self._rebind(n, names, ptrs, memory)
        self._keep = keep

    def _rebind(self, n, names, ptrs, memory):
        address = memory.data_ptr() if hasattr(memory, "data_ptr") else memory
        self._lib.check(self._lib.lib.cake_launch_rebind(self._h, n, names, ptrs, ctypes.c_void_p(address or None)))

    def describe(self):
        """The plan as text: route, accumulate mode, stages, candidates passed over."""
        return self._lib.lib.cake_launch_describe(self._h).decode()

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.lib.cake_launch_free(self._h)
            self._h = None


def _problem(op, dims, dtypes=None, accumulate=False, deterministic=True):
    p = {"op": op, "dims": dict(dims)}
    if dtypes:
        p["dtypes"] = dict(dtypes)
    if accumulate:
        p["accumulate"] = True
    if not deterministic:
        p["deterministic"] = False
    return p


def _document(problems, arch=None, sms=None):
    doc = {"problems": problems}
    if arch is not None:
        doc["arch"] = arch
    if sms is not None:
        doc["sms"] = sms
    return doc


class Runtime:
    """One cake runtime. Options (default: the environment's CAKE_AOT_DIR, CAKE_CACHE_DIR,
    CAKE_JIT): aot_dir, cache_dir ("" disables the disk cache), jit, registry (extra registry
    files). library: a libcake.so other than the package's (default: CAKE_LIBRARY, else the
    one installed with the package).

        rt = cake.Runtime()
        rt.plan("family.op", {"t": 4096, "h": 4096}, arch="sm_90a", sms=132)["route"]
        rt.prepare("family.op", y=y, x=x, w=w, eps=1e-6).run()
    """

    def __init__(self, library=None, *, aot_dir=None, cache_dir=None, jit=None, registry=None):
        self._lib = _library(library)
        options = {k: v for k, v in (("aot_dir", aot_dir), ("cache_dir", cache_dir), ("jit", jit),
                                     ("registry", list(registry) if registry else None)) if v is not None}
        h = ctypes.c_void_p()
        self._lib.check(self._lib.lib.cake_runtime_create(json.dumps(options).encode(), ctypes.byref(h)))
        self._h = h

    @property
    def library(self):
        return self._lib.path

    @property
    def compile_worker(self):
        """The compile worker NVRTC runs in; "" when compiles run in this process."""
        return self._lib.lib.cake_compile_worker_path().decode()

    def stats(self):
        """What the loader did so far: memory_hits, aot_loads, disk_hits, compiles, failures,
        module_loads, stand_ins, swaps."""
        return json.loads(self._lib.lib.cake_runtime_stats(self._h).decode())

    def ops(self):
        """Every op's schema: name, arguments (name, dtypes, output, optional), options."""
        return json.loads(self._lib.lib.cake_ops_json().decode())

    def plan(self, op, dims, dtypes=None, *, arch=None, sms=None, accumulate=False, deterministic=True):
        """What the planner picks for one problem, as `cakec plan --json` prints it (a dict with
        "route", "stages", "passed_over", "notes", "text"). arch and sms name the device (both, or
        neither: device 0's). Raises NoRouteError (its .details is the plan) when no candidate
        can serve it, ArgumentError for a malformed problem."""
        return self.plans([_problem(op, dims, dtypes, accumulate, deterministic)], arch=arch, sms=sms)[0]

    def plans(self, problems, *, arch=None, sms=None):
        """plan() for several problems (dicts with "op", "dims", and optionally "dtypes",
        "accumulate", "deterministic"), or a shapes document (a dict or JSON text in the format
        of `cakec build --shapes`)."""
        doc = problems if isinstance(problems, (str, dict)) else _document(list(problems), arch, sms)
        status, out = self._lib.json_call(self._lib.lib.cake_plan, self._h, doc)
        plans = out["plans"] if out else None
        self._lib.check(status, plans[0] if plans and len(plans) == 1 else plans)
        return plans

    def prebuild(self, problems, *, arch=None, sms=None):
        """Compiles (or loads from aot/ and the disk cache) every program the planner picks for
        the problems (as plans() takes them), so that their first calls compile nothing. Returns
        the summary ("built", "up_to_date", "skipped", "failed"); raises NoRouteError or
        CompileError with the summary as .details when a problem has no route or a build failed."""
        doc = problems if isinstance(problems, (str, dict)) else _document(list(problems), arch, sms)
        status, summary = self._lib.json_call(self._lib.lib.cake_prebuild_for, self._h, doc)
        self._lib.check(status, summary)
        return summary

    @staticmethod
    def _call(op, kwargs):
        """The C arguments of a call: the tensors (tensor_args) and the options."""
        options = {k: _OPTIONS[k](kwargs.pop(k)) for k in list(kwargs) if k in _OPTIONS and kwargs[k] is not None}
        n, names, ptrs, keep = tensor_args(kwargs)
        return (op.encode(), n, names, ptrs, json.dumps(options).encode()), keep

    def prepare(self, op, **kwargs):
        """Validates, plans, loads and allocates one call: a Launch to replay. Tensors by
        argument name, and any of deterministic, candidate, max_sms, accumulate, eps,
        external_memory (the launch allocates nothing; rebind gives it memory_bytes)."""
        args, keep = self._call(op, kwargs)
        h = ctypes.c_void_p()
        self._lib.check(self._lib.lib.cake_prepare(self._h, *args, ctypes.byref(h)))
        return Launch(self._lib, h, keep)

    def run(self, op, stream=None, **kwargs):
        """One call on `stream` (default: torch's current stream): prepare and launch."""
        args, _keep = self._call(op, kwargs)
        self._lib.check(self._lib.lib.cake_run(self._h, *args, stream_handle(stream)))

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.lib.cake_runtime_destroy(self._h)
            self._h = None
