"""Dense projection GEMM: cake (through the C ABI) against torch.mm / F.linear, in one python
process on the GPU, same inputs, CUDA-event medians with L2 flushed (triton's do_bench).
torch's side: fwd F.linear(x, w); dgrad dy @ w; wgrad dy.t() @ x (bf16); wgrad_acc
main_grad.add_(dy.t() @ x) into an f32 main_grad (torch has no fused accumulate).
Usage: python3 tools/dense_gemm/bench_torch.py build-gpu/runtime/libcake.so [K,N,T ...]"""
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # cake
import cake  # noqa: E402

rt = cake.Runtime(sys.argv[1], cache_dir=tempfile.mkdtemp())
# Default: the projections (K -> N) at small, odd and large T.
shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[2:]] or [
    (k, n, t) for k in (4096,) for n in (32, 64, 128, 512, 1024) for t in (1024, 16173, 131072)]


def ms(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


print(f"{'K':>5} {'N':>5} {'T':>7} | " + " | ".join(f"{op:>9} cake  torch   x" for op in
                                                    ("fwd", "dgrad", "wgrad", "wgrad_acc")) + "   (us)")
failed = False
for K, N, T in shapes:
    torch.manual_seed(0)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(N, K, device="cuda") * 0.5).to(torch.bfloat16)
    dy = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
    y, dx = torch.empty(T, N, device="cuda", dtype=torch.bfloat16), torch.empty_like(x)
    dw, mg = torch.empty_like(w), torch.zeros(N, K, device="cuda")
    launches = {
        "fwd": rt.prepare("dense_gemm.fwd", y=y, x=x, w=w),
        "dgrad": rt.prepare("dense_gemm.dgrad", dx=dx, dy=dy, w=w),
        "wgrad": rt.prepare("dense_gemm.wgrad", dw=dw, dy=dy, x=x),
        "wgrad_acc": rt.prepare("dense_gemm.wgrad", dw=mg, dy=dy, x=x, accumulate=True),
    }
    mg_torch = torch.zeros_like(mg)
    torch_ops = {
        "fwd": lambda: F.linear(x, w),
        "dgrad": lambda: torch.mm(dy, w),
        "wgrad": lambda: torch.mm(dy.t(), x),
        "wgrad_acc": lambda: mg_torch.add_(torch.mm(dy.t(), x)),
    }
    for op in ("fwd", "dgrad", "wgrad"):
        launches[op].run()
        got = {"fwd": y, "dgrad": dx, "wgrad": dw}[op]
        err = rel(got, torch_ops[op]())
        if err > 1e-2:
            print(f"FAIL {op} K={K} N={N} T={T}: relative difference {err:.2e} from torch")
            failed = True
    cells = []
    for op in ("fwd", "dgrad", "wgrad", "wgrad_acc"):
        tc, tt = ms(lambda: launches[op].run()), ms(torch_ops[op])
        cells.append(f"{tc * 1e3:>8.1f} {tt * 1e3:>6.1f} {tt / tc:>4.2f}")
    print(f"{K:>5} {N:>5} {T:>7} | " + " | ".join(cells), flush=True)
sys.exit(1 if failed else 0)
