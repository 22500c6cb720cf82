"""Prepared launches by problem, for the torch ops: the first call of a problem (op, shapes,
strides, dtypes, alignments, device, options) prepares a launch, later calls rebind it to
their tensors (checked, no plan lookup, no load) and launch it on torch's current stream. The
scratch, counters and workspace a launch needs come from torch's caching allocator at each
call (external memory), so torch sees and reuses them. A problem's launches share its scratch, so they must run in stream order: one
problem on two streams at once needs a Calls of its own for the second. Prepare before a CUDA
graph capture (a warm-up step): capture may rebind and launch, not allocate.
torch.use_deterministic_algorithms(True) forces deterministic routes."""
import logging
import threading

import torch

import cake

_log = logging.getLogger("cake")


def _alignment(ptr):
    """The largest power of two (<= 256) dividing the address, as cake's problem records it."""
    a = 256
    while a > 1 and ptr % a:
        a //= 2
    return a


def _meta(t):
    return (t.device.index, tuple(t.shape), tuple(t.stride()), t.dtype, _alignment(t.data_ptr()))


class Calls:
    def __init__(self, runtime=None):
        self._runtime = runtime
        self._launches = {}
        self._lock = threading.Lock()
        self._warned = False

    @property
    def runtime(self):
        return self._runtime or cake.runtime()

    def options(self, deterministic=True, **options):
        if torch.are_deterministic_algorithms_enabled() and not deterministic:
            if not self._warned:
                _log.warning("cake: deterministic=False asked for while torch.use_deterministic_algorithms(True) "
                             "is on: running deterministic routes")
                self._warned = True
            deterministic = True
        options["deterministic"] = deterministic
        return options

    def run(self, op, tensors, deterministic=True, **options):
        """Runs `op` on `tensors` (by argument name; None leaves an optional one out) on the
        current stream of their device."""
        options = self.options(deterministic, **options)
        given = {k: t for k, t in tensors.items() if t is not None}
        device = next(iter(given.values())).device
        stream = torch.cuda.current_stream(device)
        key = (op, tuple(sorted((k, _meta(t)) for k, t in given.items())), tuple(sorted(options.items())))
        with self._lock:
            launch = self._launches.get(key)
            if launch is None:
                launch = self.runtime.prepare(op, **given, external_memory=True, **options)
                self._launches[key] = launch
            size = launch.memory_bytes
            memory = torch.empty(size, dtype=torch.uint8, device=device) if size else None
            launch.rebind(memory=memory, **given)
            launch.run(stream)  # `memory` goes back to torch's pool in this stream's order
            launch._keep = None  # the next call rebinds first: hold no tensor of this one

    def clear(self):
        """Frees every prepared launch (their scratch) and forgets the problems."""
        with self._lock:
            self._launches.clear()

    def __len__(self):
        return len(self._launches)


calls = Calls()
