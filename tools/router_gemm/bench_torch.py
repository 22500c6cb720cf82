"""FP32 router GEMM: cake (through the C ABI) against torch's FP32 matmuls, in one python process
on the GPU, same inputs, CUDA-event medians with L2 flushed (triton's do_bench). torch's side, on
x widened to f32 (as a framework keeps its router in f32): fwd F.linear(x32, w); dgrad
dlogits @ w; wgrad dlogits.t() @ x32; each exact (allow_tf32 off) and with TF32. cake's outputs
are checked against FP64 (relative Frobenius <= 5e-5, TARGETS.md's FP32 budget).
Usage: python3 tools/router_gemm/bench_torch.py build-gpu/runtime/libcake.so [E,H,T ...]"""
import os
import sys
import tempfile

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # cake
import cake  # noqa: E402

rt = cake.Runtime(sys.argv[1], cache_dir=tempfile.mkdtemp())
# Default: the router shapes at small, odd and large T.
shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[2:]] or [
    (e, h, t) for e in (64, 256) for h in (4096, 7168) for t in (4097, 16173, 131072)]


def ms(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def with_tf32(on, fn):
    def call():
        torch.backends.cuda.matmul.allow_tf32 = on
        return fn()
    return call


print(f"{'E':>4} {'H':>5} {'T':>7} | " + " | ".join(f"{op:>6} cake  fp32 x     tf32 x" for op in ("fwd", "dgrad", "wgrad"))
      + "   (us)")
failed = False
for E, H, T in shapes:
    torch.manual_seed(0)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    x32 = x.float()
    w = torch.randn(E, H, device="cuda") * 0.02
    g = torch.randn(T, E, device="cuda") * 1e-3
    logits, dx, dw = torch.empty(T, E, device="cuda"), torch.empty(T, H, device="cuda"), torch.empty(E, H, device="cuda")
    launches = {
        "fwd": rt.prepare("router_gemm.fwd", logits=logits, x=x, w=w),
        "dgrad": rt.prepare("router_gemm.dgrad", dx=dx, dlogits=g, w=w),
        "wgrad": rt.prepare("router_gemm.wgrad", dw=dw, dlogits=g, x=x),
    }
    torch_ops = {
        "fwd": lambda: torch.nn.functional.linear(x32, w),
        "dgrad": lambda: torch.mm(g, w),
        "wgrad": lambda: torch.mm(g.t(), x32),
    }
    refs = {"fwd": lambda: x.double() @ w.double().t(), "dgrad": lambda: g.double() @ w.double(),
            "wgrad": lambda: g.double().t() @ x.double()}
    cells = []
    for op in ("fwd", "dgrad", "wgrad"):
        launches[op].run()
        err = rel({"fwd": logits, "dgrad": dx, "wgrad": dw}[op], refs[op]())
        if err > 5e-5:
            print(f"FAIL {op} E={E} H={H} T={T}: relative error {err:.2e} against FP64")
            failed = True
        tc = ms(lambda: launches[op].run())
        t32, ttf = ms(with_tf32(False, torch_ops[op])), ms(with_tf32(True, torch_ops[op]))
        cells.append(f"{tc * 1e3:>7.1f} {t32 * 1e3:>6.1f} {t32 / tc:>4.2f} {ttf * 1e3:>6.1f} {ttf / tc:>4.2f}")
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{E:>4} {H:>5} {T:>7} | " + " | ".join(cells), flush=True)
sys.exit(1 if failed else 0)
