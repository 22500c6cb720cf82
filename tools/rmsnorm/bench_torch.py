"""RMSNorm: cake (through the C ABI) against torch eager and torch.compile, in one python
process on the GPU, same inputs, CUDA-event medians with L2 flushed (triton's do_bench).
Usage: python3 tools/rmsnorm/bench_torch.py build-gpu/runtime/libcake.so [H,T ...]"""
import os
import sys
import tempfile

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # cake
import cake  # noqa: E402

rt = cake.Runtime(sys.argv[1], cache_dir=tempfile.mkdtemp())
# Default: the hidden sizes of common models (docs/perf.md), at 16384 and 65536 rows.
shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[2:]] or [
    (h, t) for h in (1024, 2048, 3072, 3584, 4096, 5120, 5376, 6144, 7168, 8192, 12288, 16384) for t in (16384, 65536)]
eps = 1e-6


def fwd_eager(x, w):
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * r * w.float()).to(x.dtype), r.squeeze(-1)


def bwd_eager(dy, x, r, w):
    xhat = x.float() * r[:, None]
    g = dy.float() * w.float()
    m = (g * xhat).mean(-1, keepdim=True)
    dx = (r[:, None] * (g - xhat * m)).to(x.dtype)
    dw = (dy.float() * xhat).sum(0).to(w.dtype)
    return dx, dw


# One compiled graph per shape (dynamic=False): more shapes than dynamo's default recompile
# limit (8) would silently fall back to eager for the rest.
torch._dynamo.config.recompile_limit = 64
fwd_comp = torch.compile(fwd_eager, dynamic=False)
bwd_comp = torch.compile(bwd_eager, dynamic=False)


def ms(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


print(f"{'H':>5} {'T':>6} | {'fwd cake':>9} {'eager':>7} {'compile':>8} {'x comp':>7} | "
      f"{'bwd cake':>9} {'eager':>7} {'compile':>8} {'x comp':>7}   (us; TB/s of bytes that must move)")
for H, T in shapes:
    torch.manual_seed(0)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(H, device="cuda") * 0.1 + 1).to(torch.bfloat16)
    dy = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    r = torch.empty(T, device="cuda")
    dx = torch.empty_like(x)
    dw = torch.empty_like(w)
    f = rt.prepare("rmsnorm.fwd", y=y, rstd=r, x=x, w=w, eps=eps)
    b = rt.prepare("rmsnorm.bwd", dx=dx, dw=dw, dy=dy, x=x, rstd=r, w=w)
    f.run()
    yr, rr = fwd_eager(x, w)
    assert (y.float() - yr.float()).abs().max().item() < 0.1, "cake fwd disagrees with torch"
    fb = T * H * 4 + H * 2 + T * 4
    bb = T * H * 6 + H * 4 + T * 4
    t = [ms(lambda: f.run()), ms(lambda: fwd_eager(x, w)), ms(lambda: fwd_comp(x, w)),
         ms(lambda: b.run()), ms(lambda: bwd_eager(dy, x, r, w)), ms(lambda: bwd_comp(dy, x, r, w))]
    print(f"{H:>5} {T:>6} | {t[0]*1e3:>6.1f}/{fb/t[0]/1e9:.2f} {t[1]*1e3:>7.1f} {t[2]*1e3:>5.1f}/{fb/t[2]/1e9:.2f} "
          f"{t[2]/t[0]:>6.2f}x | {t[3]*1e3:>6.1f}/{bb/t[3]/1e9:.2f} {t[4]*1e3:>7.1f} {t[5]*1e3:>5.1f}/{bb/t[5]/1e9:.2f} "
          f"{t[5]/t[3]:>6.2f}x", flush=True)
