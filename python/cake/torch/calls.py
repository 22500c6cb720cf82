"""Prepared launches by problem, for the torch ops: the first call of a problem (op, shapes,
strides, dtypes, alignments, device, options) prepares a launch, later calls bind it to
their tensors' addresses (the layout is the key, so only alignment, null and overlap are
checked; no plan lookup, no load) and launch it on torch's current stream. The
scratch, counters and workspace a launch needs come from torch's caching allocator at each
call (external memory), in the order of the stream the call runs on, so torch sees and
reuses them and one problem may run on several streams. Prepare before a CUDA graph capture
(a warm-up step): capture may rebind and launch, not allocate. At most `max_problems`
launches are kept (the least recently used one goes first), so a job whose shapes keep
changing (variable sequence lengths) does not grow without bound.
torch.use_deterministic_algorithms(True) forces deterministic routes."""
import collections
import logging
import threading

import torch

import cake
from cake.runtime import Rebinder

_log = logging.getLogger("cake")


# torch's current stream of a device as a raw handle: the private call takes a tenth of the
# time of torch.cuda.current_stream(), which builds a Stream object; the public one where the
# private one is gone.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(index):
    return _raw_stream(index) if _raw_stream is not None else torch.cuda.current_stream(index).cuda_stream


class Calls:
    def __init__(self, runtime=None, max_problems=1024):
        if max_problems < 1:
            raise ValueError(f"max_problems must be >= 1, got {max_problems}")
        self._runtime = runtime
        self._max = max_problems
        self._launches = collections.OrderedDict()  # least recently used first
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
        options = self.options(deterministic, **options) if not deterministic else dict(options, deterministic=True)
        # The layout cake's problem records and rebind_data trusts: every tensor's name (in the
        # caller's order: a problem given in another order is another key, never another tensor
        # bound to a name), device, shape, strides, dtype, and the largest power of two (<= 256)
        # dividing its address.
        data, layout, device = [], [], None
        for k, t in tensors.items():
            if t is None:
                continue
            p = t.data_ptr()
            data.append(p)
            if device is None:
                device = t.get_device()
            layout.append((k, t.get_device(), t.shape, t.stride(), t.dtype, min(256, (p & -p) or 256)))
        key = (op, tuple(layout), tuple(options.items()))
        with self._lock:
            bound = self._launches.get(key)
            if bound is None:
                given = {k: t for k, t in tensors.items() if t is not None}
                launch = self.runtime.prepare(op, **given, external_memory=True, **options)
                bound = Rebinder(launch, len(given))
                self._launches[key] = bound
                if len(self._launches) > self._max:
                    # A launch owns no device memory (it comes from torch at each call) and
                    # the runtime keeps the loaded kernels: dropping one while the GPU runs it
                    # is safe, and a later call of its problem prepares it again.
                    self._launches.popitem(last=False)
            else:
                self._launches.move_to_end(key)
            size = bound.memory_bytes
            if size:
                # The block goes back to torch's pool in this stream's order when `memory` dies.
                memory = torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", device))
                bound.run(data, memory.data_ptr(), _current_stream(device))
            else:
                bound.run(data, None, _current_stream(device))

    def clear(self):
        """Frees every prepared launch (their scratch) and forgets the problems."""
        with self._lock:
            self._launches.clear()

    def __len__(self):
        return len(self._launches)


calls = Calls()
