"""Grouped GEMM: cake (through the C ABI) against torch._grouped_mm, in one python process on
the GPU, same inputs, CUDA-event medians with L2 flushed before each timed call; cake and
torch are timed in turn, rep by rep (one shared clock), or with --sustained each alone for a
while, at the clock its own power draw allows under the card's cap (as `cakec bench
grouped_gemm --sustained`).

    python3 tools/grouped_gemm/bench_torch.py build-gpu/runtime/libcake.so \
        [--shape gate_up down] [--m 131072] [--e 8 32] [--dist balanced lognormal] \
        [--op fwd dgrad wgrad wgrad_acc] [--reps 10 | --sustained [--warm-ms 1000]
        [--window-ms 500] [--rounds 2]]

torch's side: fwd _grouped_mm(x, w.transpose(-2, -1), offs) -> [M, N]; dgrad
_grouped_mm(g, w, offs) -> [M, K]; wgrad _grouped_mm(g.t(), x, offs) -> [E, N, K] bf16;
wgrad_acc main_grad.add_(that) into an f32 [E, N, K] (torch has no fused accumulate, and a
f32 out_dtype leaves its fast path). Group sizes follow `cakec bench grouped_gemm`'s recipes;
lognormal draws from torch's generator, so its sizes differ from the C++ bench's.
Exit code 1 when a cake call fails or a row's output disagrees with torch's."""
import argparse
import ctypes
import math
import os
import struct
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # cake
import cake  # noqa: E402

SHAPES = {"gate_up": (4096, 6144), "down": (6144, 2048)}  # (N, K)


def split(m, parts):
    return [m // parts + (1 if i < m % parts else 0) for i in range(parts)]


def group_sizes(dist, m, e):
    if dist == "balanced":
        return split(m, e)
    if dist == "skewed":
        return [m] if e == 1 else [m // 2] + split(m - m // 2, e - 1)
    if dist == "one_empty":
        if e < 2:
            raise SystemExit("--dist one_empty needs E >= 2")
        s = split(m, e - 1)
        return s[:e // 2] + [0] + s[e // 2:]
    gen = torch.Generator().manual_seed(20261129 + e)  # lognormal, sigma 1
    w = torch.randn(e, generator=gen, dtype=torch.float64).exp()
    exact = w / w.sum() * m
    sizes = exact.floor().long()
    order = (exact - sizes).argsort(descending=True)
    for i in range(m - int(sizes.sum())):
        sizes[order[i % e]] += 1
    return sizes.tolist()


class _FieldValue(ctypes.Structure):  # nvml.h's nvmlFieldValue_t
    _fields_ = [("field_id", ctypes.c_uint), ("scope_id", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latency_us", ctypes.c_longlong), ("value_type", ctypes.c_int), ("nvml_return", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class Nvml:
    """SM clock (MHz) and board power (W) of torch's current device through libnvidia-ml, as
    cakec's NVML reader does (instant power where the driver has it, else the averaged
    reading); `error` says why not where it cannot."""

    def __init__(self):
        self.error, self.dev = None, ctypes.c_void_p()
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".encode()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(self.dev)) != 0:
                raise OSError(f"no NVML device at {bus.decode()}")
            self.lib = lib
            self.instant = self._instant_mw() is not None
        except (OSError, AttributeError) as err:
            self.error = str(err)

    def _instant_mw(self):
        v = _FieldValue(field_id=186)  # NVML_FI_DEV_POWER_INSTANT, mW
        if self.lib.nvmlDeviceGetFieldValues(self.dev, 1, ctypes.byref(v)) != 0 or v.nvml_return != 0:
            return None
        if v.value_type == 0:  # a double
            return struct.unpack("d", struct.pack("Q", v.value))[0]
        return v.value & (0xFFFFFFFF if v.value_type == 1 else 0xFFFFFFFFFFFFFFFF)

    def read(self):
        """(MHz, W), or None."""
        if self.error:
            return None
        mhz, mw = ctypes.c_uint(), ctypes.c_uint()
        if self.lib.nvmlDeviceGetClockInfo(self.dev, 1, ctypes.byref(mhz)) != 0:  # NVML_CLOCK_SM
            return None
        if self.instant:
            instant = self._instant_mw()
            return None if instant is None else (mhz.value, instant / 1000.0)
        if self.lib.nvmlDeviceGetPowerUsage(self.dev, ctypes.byref(mw)) != 0:
            return None
        return mhz.value, mw.value / 1000.0


class Timer:
    def __init__(self, reps):
        self.reps = reps
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")  # > 4x the 60 MB L2
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def timed_ms(self, fn):
        self.flush.zero_()
        self.a.record()
        fn()
        self.b.record()
        self.b.synchronize()
        return self.a.elapsed_time(self.b)

    def median_ms(self, cake, other):
        """cake's and the other's median times, timed in turn rep by rep (the same clocks and
        temperature for both), the two in the other order every other rep (the clock a call
        starts at is what the call before it left), and the median over reps of the rep's other
        time / cake's: a rep's two calls run one after the other, so the ratio cancels most of
        the clock's drift between reps (docs/decisions.md, "VS_BEST taken per rep"; as `cakec
        bench grouped_gemm`, whose median of an even count of ratios is likewise the geometric
        mean of the middle two)."""
        cake(), other()  # warm-up
        t = []
        for i in range(self.reps):
            if i % 2 == 0:
                c = self.timed_ms(cake)
                o = self.timed_ms(other)
            else:
                o = self.timed_ms(other)
                c = self.timed_ms(cake)
            t.append((c, o))
        med = lambda v: sorted(v)[len(v) // 2]
        r = sorted(o / c for c, o in t)
        n = len(r)
        ratio = r[n // 2] if n % 2 else math.sqrt(r[n // 2 - 1] * r[n // 2])
        return med([c for c, _ in t]), med([o for _, o in t]), ratio

    def sustained(self, fns, warm_ms, window_ms, rounds, nvml):
        """Each fn alone, calls back to back (L2 flushed before each): warm_ms of untimed calls
        while the clock settles at what this fn's own draw allows, then window_ms of timed
        calls, the clock and power read after each. fns in turn, `rounds` times. Per fn: the
        mean over rounds of the mean time a call, and the mean clock and power (NaN without
        NVML)."""
        out = [[0.0, 0.0, 0.0] for _ in fns]
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < warm_ms / 1000:
                    self.timed_ms(fn)
                total, calls, samples = 0.0, 0, []
                t0 = time.perf_counter()
                while calls == 0 or time.perf_counter() - t0 < window_ms / 1000:
                    total += self.timed_ms(fn)
                    calls += 1
                    s = nvml.read()
                    if s:
                        samples.append(s)
                mhz = sum(s[0] for s in samples) / len(samples) if samples else float("nan")
                watts = sum(s[1] for s in samples) / len(samples) if samples else float("nan")
                for j, v in enumerate((total / calls, mhz, watts)):
                    out[i][j] += v / rounds
        return out


def bad_count(got, want):
    """Elements outside |got - want| <= 1e-2 + 1e-2 |want| (NaN counts), and the total."""
    got, want = got.float(), want.float()
    ok = (got - want).abs() <= 1e-2 + 1e-2 * want.abs()
    return int((~ok).sum()), want.numel()


def route_of(launch):
    first = launch.describe().splitlines()[0] if launch.describe() else "-"
    if first.startswith("route "):
        name, _, rest = first[len("route "):].partition(" (accumulate ")
        acc = rest.split(",")[0]
        return name + ("" if acc == "off" else f" ({acc})")
    return first


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("libcake")
    p.add_argument("--shape", nargs="+", default=["gate_up", "down"], choices=list(SHAPES))
    p.add_argument("--m", nargs="+", type=int, default=[131072])
    p.add_argument("--e", nargs="+", type=int, default=[8, 32])
    p.add_argument("--dist", nargs="+", default=["balanced", "lognormal"],
                   choices=["balanced", "skewed", "one_empty", "lognormal"])
    p.add_argument("--op", nargs="+", default=["fwd", "dgrad", "wgrad", "wgrad_acc"],
                   choices=["fwd", "dgrad", "wgrad", "wgrad_acc"])
    p.add_argument("--reps", type=int, default=None, help="timed calls a contender and row, in turn (default 10)")
    p.add_argument("--sustained", action="store_true",
                   help="time each contender alone after --warm-ms of calls, at the clock its own draw allows")
    p.add_argument("--warm-ms", type=int, help="with --sustained: untimed calls before each window (default 1000)")
    p.add_argument("--window-ms", type=int, help="with --sustained: timed calls a contender and round (default 500)")
    p.add_argument("--rounds", type=int, help="with --sustained: windows a contender, in turn (default 2)")
    a = p.parse_args()
    if a.sustained and a.reps is not None:
        p.error("--reps and --sustained exclude each other (sustained windows are timed by length)")
    if not a.sustained and (a.warm_ms, a.window_ms, a.rounds) != (None, None, None):
        p.error("--warm-ms, --window-ms and --rounds need --sustained")
    for name in ("reps", "warm_ms", "window_ms", "rounds"):
        v = getattr(a, name)
        if v is not None and v < (0 if name == "warm_ms" else 1):
            p.error(f"--{name.replace('_', '-')} must be {'>= 0' if name == 'warm_ms' else 'positive'}, got {v}")
    for name, default in (("reps", 10), ("warm_ms", 1000), ("window_ms", 500), ("rounds", 2)):
        if getattr(a, name) is None:
            setattr(a, name, default)

    # Each row prepares its launch once: it must run the route's program, not a stand-in
    # serving while that program compiles (README, "Stand-ins").
    os.environ["CAKE_JIT_STAND_IN"] = "0"
    rt = cake.Runtime(a.libcake, cache_dir=tempfile.mkdtemp())
    timer = Timer(a.reps)
    nvml = Nvml() if a.sustained else None
    mode = (f"each alone: {a.warm_ms} ms warm, {a.window_ms} ms timed, rounds in turn: {a.rounds} (own clock); "
            f"MHZ / W c/t: NVML means over the windows" + (f" (NVML: {nvml.error})" if a.sustained and nvml.error else "")
            if a.sustained else f"median of {a.reps}, in turn call by call (one shared clock)")
    print(f"bench_grouped_gemm_torch: {torch.cuda.get_device_name()}, torch {torch.__version__}; bf16 in; "
          f"L2 flushed; {mode}; TF = TFLOP/s (2*M*N*K); VS_TORCH = torch's time / cake's time"
          + ("" if a.sustained else " in each rep, the median over reps (CAKE_MS and the TF columns: medians)"))
    cols = ["SHAPE", "M", "E", "DIST", "OP", "GROUPS", "CAKE_MS", "CAKE_TF", "TORCH_TF", "VS_TORCH", "CHECK"]
    widths = [7, 6, 2, 9, 9, 11, 7, 7, 8, 8, 7]
    if a.sustained:
        cols += ["MHZ c/t", "W c/t"]
        widths += [9, 7]
    cols.append("ROUTE")
    widths.append(0)
    line = lambda row: print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip(), flush=True)
    line(cols)
    ratios, failed = [], False
    for shape in a.shape:
        N, K = SHAPES[shape]
        max_m, max_e = max(a.m), max(a.e)
        torch.manual_seed(0)
        x_all = torch.randn(max_m, K, device="cuda", dtype=torch.bfloat16)
        g_all = torch.randn(max_m, N, device="cuda", dtype=torch.bfloat16)
        w_all = torch.randn(max_e, N, K, device="cuda", dtype=torch.bfloat16)
        for M in a.m:
            x, g = x_all[:M], g_all[:M]
            y, dx = torch.empty(M, N, device="cuda", dtype=torch.bfloat16), torch.empty_like(x)
            for E in a.e:
                w = w_all[:E]
                dw16 = torch.empty(E, N, K, device="cuda", dtype=torch.bfloat16)
                dw32 = torch.zeros(E, N, K, device="cuda", dtype=torch.float32)
                for dist in a.dist:
                    sizes = group_sizes(dist, M, E)
                    offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
                    nonempty = torch.tensor([s > 0 for s in sizes], device="cuda")
                    flop = 2.0 * M * N * K
                    for op in a.op:
                        row = [shape, M, E, dist, op, f"{min(sizes)}-{max(sizes)}"]
                        try:
                            if op == "fwd":
                                launch = rt.prepare("grouped_gemm.fwd", y=y, x=x, w=w, offs=offs)
                                ref = lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
                                out, mask = y, None
                            elif op == "dgrad":
                                launch = rt.prepare("grouped_gemm.dgrad", dx=dx, g=g, w=w, offs=offs)
                                ref = lambda: torch._grouped_mm(g, w, offs=offs)
                                out, mask = dx, None
                            elif op == "wgrad":
                                launch = rt.prepare("grouped_gemm.wgrad", dw=dw16, g=g, x=x, offs=offs)
                                ref = lambda: torch._grouped_mm(g.t(), x, offs=offs)
                                out, mask = dw16, nonempty  # torch's empty groups: not compared
                            else:
                                launch = rt.prepare("grouped_gemm.wgrad", dw=dw32, g=g, x=x, offs=offs, accumulate=True)
                                ref = lambda: dw32.add_(torch._grouped_mm(g.t(), x, offs=offs))
                                out, mask = dw32, None
                            # Check: one call of each on the same starting output.
                            if op == "wgrad_acc":
                                dw32.fill_(1.0)
                                launch.run()
                                want = 1.0 + torch._grouped_mm(g.t(), x, offs=offs).float()
                            else:
                                out.fill_(float("nan"))
                                launch.run()
                                want = ref()
                            got = out if mask is None else out[mask]
                            bad, total = bad_count(got, want if mask is None else want[mask])
                            check = "ok" if bad == 0 else f"BAD {bad}/{total}"
                            failed |= bad != 0
                            del want
                            if a.sustained:
                                (cake_ms, cmhz, cw), (torch_ms, tmhz, tw) = timer.sustained(
                                    [lambda: launch.run(), ref], a.warm_ms, a.window_ms, a.rounds, nvml)
                            else:
                                cake_ms, torch_ms, ratio = timer.median_ms(lambda: launch.run(), ref)
                            if a.sustained:
                                ratio = torch_ms / cake_ms
                            ratios.append((ratio, op, " ".join(str(v) for v in row[:5])))
                            row += [f"{cake_ms:.3f}", f"{flop / cake_ms / 1e9:.0f}", f"{flop / torch_ms / 1e9:.0f}",
                                    f"{ratio:.3f}x", check]
                            if a.sustained:
                                row += [f"{cmhz:.0f}/{tmhz:.0f}", f"{cw:.0f}/{tw:.0f}"]
                            row.append(route_of(launch))
                        except Exception as err:  # a cake error: report the row, go on
                            failed = True
                            row.append(f"error: {err}")
                        line(row)
    if ratios:
        print("\ngeomean of VS_TORCH:")
        for op in a.op:
            r = [v for v, o, _ in ratios if o == op]
            if r:
                print(f"  {op:<9} {math.exp(sum(map(math.log, r)) / len(r)):.3f}x")
        print(f"  {'all':<9} {math.exp(sum(math.log(v) for v, _, _ in ratios) / len(ratios)):.3f}x "
              f"over {len(ratios)} rows")
        worst = min(ratios)
        print(f"  min row   {worst[0]:.3f}x  ({worst[2]})")
    if failed:
        print("\nFAILED: a row above has an error or a BAD check")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
