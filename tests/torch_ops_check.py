"""cake.torch where a training framework meets it (label gpu; exit 77, a skip, without torch or
a GPU): each op's forward and gradients against FP64 and torch's own op, main_grad
accumulation bitwise, deterministic mode, torch.compile(fullgraph=True) of a small MoE block,
CUDA graph capture of a training step, the checkpoint early-stop launch count, a 20-step toy
MoE training loop against the same loop on torch's ops, and the host time per call.
Usage: python3 torch_ops_check.py PYTHON_DIR LIBCAKE"""
import gc
import os
import sys
import tempfile
import time
import weakref

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: torch is not importable")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

sys.path.insert(0, sys.argv[1])
os.environ["CAKE_LIBRARY"] = os.path.abspath(sys.argv[2])
os.environ.setdefault("CAKE_CACHE_DIR", tempfile.mkdtemp(prefix="cake-torch-"))
import cake  # noqa: E402
import cake.torch as ct  # noqa: E402

failures = []
dev = "cuda"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def close(got, ref, atol, rtol, what):
    err = (got.double() - ref.double()).abs()
    bound = atol + rtol * ref.double().abs()
    bad = int((err > bound).sum())
    check(bad == 0, f"{what}: {bad} of {got.numel()} outside {atol}+{rtol}|ref| (max err {float(err.max()) if err.numel() else 0.0:.3g})")


def bf16(*shape, scale=1.0):
    return (torch.randn(*shape, device=dev) * scale).to(torch.bfloat16)


def offsets(sizes):
    return torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def main_grad_bits(tag, w, overwrite, backward):
    """Megatron's main_grad through a fused backward: fp32(main_grad + dW) bitwise, with dW what
    overwrite() returns (the op's wgrad into a fresh FP32 dw); the flag and a placeholder."""
    w.main_grad = torch.randn(*w.shape, device=dev)
    before = w.main_grad.clone()
    dw32 = overwrite()
    backward()
    check(torch.equal(w.main_grad, before + dw32), f"{tag}: main_grad == fp32(main_grad + dW) bitwise")
    check(getattr(w, "grad_added_to_main_grad", False) is True and w.grad is not None and w.grad.shape == w.shape,
          f"{tag}: grad_added_to_main_grad set, a placeholder weight gradient")


def wgrad32(op, shape, **tensors):
    dw = torch.empty(*shape, device=dev)
    cake.runtime().run(op, dw=dw, **tensors)
    return dw


# -- rms_norm: forward and gradients against FP64 and F.rms_norm
for shape, residual in [((4, 300, 4096), False), ((1000, 7168), True), ((257, 3072), False)]:
    h = shape[-1]
    x = bf16(*shape).requires_grad_()
    r = bf16(*shape).requires_grad_() if residual else None
    w = (1 + 0.5 * torch.randn(h, device=dev)).to(torch.bfloat16).requires_grad_()
    dy = bf16(*shape)
    out = ct.rms_norm(x, w, 1e-6, residual=r)
    y = out[0] if residual else out
    y.backward(dy)
    hin = (x.double() + r.double()).to(torch.bfloat16).double() if residual else x.double()
    ref_rstd = torch.rsqrt(hin.pow(2).mean(-1, keepdim=True) + 1e-6)
    xhat = hin * ref_rstd
    yref = xhat * w.double()
    gw = dy.double() * w.double()
    dxref = ref_rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
    dwref = (dy.double() * xhat).reshape(-1, h).sum(0)
    tag = f"rms_norm {tuple(shape)}{' residual' if residual else ''}"
    close(y, yref, 1e-2, 1e-2, f"{tag} y vs FP64")
    close(x.grad, dxref, 1e-2, 1e-2, f"{tag} dx vs FP64")
    close(w.grad, dwref, 1e-2 * (shape[0] if len(shape) == 2 else shape[0] * shape[1]) ** 0.5, 1e-2, f"{tag} dw vs FP64")
    if residual:
        check(torch.equal(r.grad, x.grad), f"{tag} d residual == dx")
        check(torch.equal(out[1], (x + r).detach()), f"{tag} h = bf16(x + residual)")
    else:
        close(y, F.rms_norm(x.detach().float(), (h,), w.detach().float(), 1e-6), 2e-2, 2e-2, f"{tag} y vs F.rms_norm")

# -- grouped_mm: forward and gradients against FP64 and torch._grouped_mm
E, N, K = 8, 512, 1024
sizes = [0, 100, 513, 64, 1, 700, 0, 300]
M = sum(sizes)
offs = offsets(sizes)
x = bf16(M, K).requires_grad_()
w = bf16(E, N, K, scale=0.05).requires_grad_()
g = bf16(M, N)
y = ct.grouped_mm(x, w, offs)
y.backward(g)
ends = offs.tolist()
yref = torch.zeros(M, N, dtype=torch.float64, device=dev)
dxref = torch.zeros(M, K, dtype=torch.float64, device=dev)
dwref = torch.zeros(E, N, K, dtype=torch.float64, device=dev)
start = 0
for e, end in enumerate(ends):
    xs, gs = x.detach()[start:end].double(), g[start:end].double()
    yref[start:end] = xs @ w.detach()[e].double().T
    dxref[start:end] = gs @ w.detach()[e].double()
    dwref[e] = gs.T @ xs
    start = end
close(y, yref, 1e-2, 1e-2, "grouped_mm y vs FP64")
close(x.grad, dxref, 1e-2, 1e-2, "grouped_mm dx vs FP64")
close(w.grad, dwref, 5e-2, 1e-2, "grouped_mm dw vs FP64")
if hasattr(torch, "_grouped_mm"):
    xt, wt = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    yt = torch._grouped_mm(xt, wt.transpose(-2, -1), offs=offs)
    yt.backward(g)
    close(y, yt, 2e-2, 2e-2, "grouped_mm y vs torch._grouped_mm")
    close(x.grad, xt.grad, 2e-2, 2e-2, "grouped_mm dx vs torch._grouped_mm")
    close(w.grad, wt.grad, 5e-2, 2e-2, "grouped_mm dw vs torch._grouped_mm")

# -- Megatron's main_grad: fp32(main_grad + dW) bitwise, flags, placeholder, errors
wm = w.detach().clone().requires_grad_()
main_grad_bits("grouped_mm", wm, lambda: wgrad32("grouped_gemm.wgrad", (E, N, K), g=g, x=x.detach(), offs=offs),
               lambda: ct.grouped_mm(x.detach(), wm, offs, fuse_wgrad_accumulation=True).backward(g))
for bad, text in [(None, "no main_grad"), (torch.zeros(E, N, K, device=dev, dtype=torch.bfloat16), "float32")]:
    wb = w.detach().clone().requires_grad_()
    if bad is not None:
        wb.main_grad = bad
    try:
        ct.grouped_mm(x.detach(), wb, offs, fuse_wgrad_accumulation=True).backward(g)
        check(False, f"main_grad {text}: no error")
    except RuntimeError as e:
        check(text in str(e), f"main_grad {text}: {e}")

# -- dense_gemm through the generic entry point: F.linear's y, its dx and dw (batched too)
for shape_x, shape_w in [((1000, 512), (64, 512)), ((3, 300, 256), (3, 128, 256))]:
    xd, wd = bf16(*shape_x), bf16(*shape_w, scale=0.5)
    batched = len(shape_x) == 3
    yd = torch.empty(*shape_x[:-1], shape_w[-2], device=dev, dtype=torch.bfloat16)
    cake.runtime().run("dense_gemm.fwd", y=yd, x=xd, w=wd)
    yref = (xd.double() @ wd.double().transpose(-2, -1))
    close(yd, yref, 1e-2, 1e-2, f"dense_gemm.fwd {shape_x} vs FP64")
    gd = bf16(*yd.shape)
    dxd, dwd = torch.empty_like(xd), torch.zeros(*shape_w, device=dev)
    cake.runtime().run("dense_gemm.dgrad", dx=dxd, dy=gd, w=wd)
    close(dxd, gd.double() @ wd.double(), 1e-2, 1e-2, f"dense_gemm.dgrad {shape_x} vs FP64")
    before = dwd.clone()
    cake.runtime().run("dense_gemm.wgrad", dw=dwd, dy=gd, x=xd, accumulate=True)
    close(dwd, before + gd.double().transpose(-2, -1) @ xd.double(), 1e-3, 1e-4, f"dense_gemm.wgrad {shape_x} vs FP64")
    if not batched:
        close(yd, torch.nn.functional.linear(xd, wd), 2e-2, 2e-2, "dense_gemm.fwd vs F.linear")
        w_kn = wd.t().contiguous()  # a weight kept [K, N], passed as its transposed view
        y_kn = torch.empty_like(yd)
        cake.runtime().run("dense_gemm.fwd", y=y_kn, x=xd, w=w_kn.t())
        close(y_kn, yref, 1e-2, 1e-2, "dense_gemm.fwd, w stored [K, N], vs FP64")

# Heads as strided views of [T, B, C] tensors (x_tbk.transpose(0, 1)), through the generic
# entry point: the same values as contiguous heads, nothing written between the rows.
x_tbk, w_h = bf16(300, 3, 256), bf16(3, 128, 256, scale=0.5)
y_tbn = torch.full((300, 3, 128), float("nan"), device=dev, dtype=torch.bfloat16)
cake.runtime().run("dense_gemm.fwd", y=y_tbn.transpose(0, 1), x=x_tbk.transpose(0, 1), w=w_h)
close(y_tbn.transpose(0, 1), x_tbk.transpose(0, 1).double() @ w_h.double().transpose(-2, -1), 1e-2, 1e-2,
      "dense_gemm.fwd of [T, B, K] heads vs FP64")
padded = torch.full((300, 3, 136), float("nan"), device=dev, dtype=torch.bfloat16)
cake.runtime().run("dense_gemm.fwd", y=padded[:, :, :128].transpose(0, 1), x=x_tbk.transpose(0, 1), w=w_h)
check(bool(padded[:, :, 128:].isnan().all()), "dense_gemm.fwd into padded [T, B, N] rows: nothing written past N")
check(torch.equal(padded[:, :, :128], y_tbn), "dense_gemm.fwd into padded rows: the same bits")

# -- router_gemm through the generic entry point: FP32 logits from an f32 master weight (and a
# bf16 one), dx and dw, within the FP32 budget (relative Frobenius <= 5e-5)
def fp32_close(got, ref, what):
    rel = ((got.double() - ref).norm() / ref.norm()).item()
    check(rel <= 5e-5, f"{what}: relative Frobenius error {rel:.2e}")


xr, wr, gr = bf16(2000, 512), torch.randn(64, 512, device=dev) * 0.02, torch.randn(2000, 64, device=dev) * 1e-3
for w_router in (wr, wr.to(torch.bfloat16)):
    logits = torch.empty(2000, 64, device=dev)
    cake.runtime().run("router_gemm.fwd", logits=logits, x=xr, w=w_router)
    fp32_close(logits, xr.double() @ w_router.double().t(), f"router_gemm.fwd ({w_router.dtype} w) vs FP64")
    dxr = torch.empty(2000, 512, device=dev)
    cake.runtime().run("router_gemm.dgrad", dx=dxr, dlogits=gr, w=w_router)
    fp32_close(dxr, gr.double() @ w_router.double(), f"router_gemm.dgrad ({w_router.dtype} w) vs FP64")
dwr = torch.randn(64, 512, device=dev)
before = dwr.clone()
cake.runtime().run("router_gemm.wgrad", dw=dwr, dlogits=gr, x=xr, accumulate=True)
fp32_close(dwr, before.double() + gr.double().t() @ xr.double(), "router_gemm.wgrad accumulate vs FP64")

# -- linear: F.linear's forward and gradients through cake.torch (leading dims, a weight kept
# [K, N] and passed as w.t(), heads batched), against FP64 and F.linear
for shape_x, shape_w, kn in [((1000, 512), (64, 512), False), ((2, 300, 256), (128, 256), False),
                             ((777, 256), (96, 256), True), ((3, 300, 256), (3, 128, 256), False), ((0, 512), (64, 512), False)]:
    tag = f"linear x {shape_x} w {shape_w}{' kept [K, N]' if kn else ''}"
    wl = bf16(*shape_w, scale=0.5)
    w_leaf = (wl.t().contiguous() if kn else wl.clone()).requires_grad_()
    w_used = w_leaf.t() if kn else w_leaf
    xl = bf16(*shape_x).requires_grad_()
    yl = ct.linear(xl, w_used)
    gl = bf16(*yl.shape)
    yl.backward(gl)
    x64, w64, g64 = xl.detach().double(), wl.double(), gl.double()
    n_, k_ = shape_w[-2], shape_w[-1]
    dwref = g64.transpose(-2, -1) @ x64 if len(shape_w) == 3 else g64.reshape(-1, n_).T @ x64.reshape(-1, k_)
    check(yl.shape == (*shape_x[:-1], n_) and yl.dtype == torch.bfloat16, f"{tag}: y shape and dtype")
    close(yl, x64 @ w64.transpose(-2, -1), 1e-2, 1e-2, f"{tag}: y vs FP64")
    close(xl.grad, g64 @ w64, 1e-2, 1e-2, f"{tag}: dx vs FP64")
    close(w_leaf.grad.t() if kn else w_leaf.grad, dwref, 5e-2, 1e-2, f"{tag}: dw vs FP64")
    if len(shape_w) == 2 and shape_x[0] > 0:
        xt, wt = xl.detach().clone().requires_grad_(), wl.clone().requires_grad_()
        yt = F.linear(xt, wt)
        yt.backward(gl)
        close(yl, yt, 2e-2, 2e-2, f"{tag}: y vs F.linear")
        close(xl.grad, xt.grad, 2e-2, 2e-2, f"{tag}: dx vs F.linear")
        close(w_leaf.grad.t() if kn else w_leaf.grad, wt.grad, 1e-1, 2e-2, f"{tag}: dw vs F.linear")

# linear over heads of a [T, B, K] tensor: served without a copy, y and dx laid out as x is.
x_tbk = bf16(300, 3, 256).requires_grad_()
w_h = bf16(3, 128, 256, scale=0.5).requires_grad_()
y_h = ct.linear(x_tbk.transpose(0, 1), w_h)
check(y_h.shape == (3, 300, 128) and y_h.transpose(0, 1).is_contiguous(), "linear of [T, B, K] heads: y laid out [T, B, N]")
g_h = bf16(300, 3, 128).transpose(0, 1)
y_h.backward(g_h)
x64, w64, g64 = x_tbk.detach().transpose(0, 1).double(), w_h.detach().double(), g_h.double()
close(y_h, x64 @ w64.transpose(-2, -1), 1e-2, 1e-2, "linear of [T, B, K] heads: y vs FP64")
close(x_tbk.grad.transpose(0, 1), g64 @ w64, 1e-2, 1e-2, "linear of [T, B, K] heads: dx vs FP64")
close(w_h.grad, g64.transpose(-2, -1) @ x64, 5e-2, 1e-2, "linear of [T, B, K] heads: dw vs FP64")
y_in = ct.linear(x_tbk.transpose(0, 1), w_h)
y_in.mul_(2.0)  # an in-place op on the output under autograd (it is not a view)
y_in.float().sum().backward()
check(bool(torch.isfinite(x_tbk.grad).all()), "linear of [T, B, K] heads: in-place op on y, then backward")

# linear's main_grad: bitwise fp32(main_grad + dW) on a [N, K] weight; through w.t() of a [K, N]
# weight the main_grad is the parameter's, [K, N]
xl, gl = bf16(1000, 512), bf16(1000, 64)
wm = bf16(64, 512, scale=0.5).requires_grad_()
main_grad_bits("linear", wm, lambda: wgrad32("dense_gemm.wgrad", (64, 512), dy=gl, x=xl),
               lambda: ct.linear(xl, wm, fuse_wgrad_accumulation=True).backward(gl))
w_kn = bf16(512, 64, scale=0.5).requires_grad_()
w_kn.main_grad = torch.randn(512, 64, device=dev)
before = w_kn.main_grad.clone()
ct.linear(xl, w_kn.t(), fuse_wgrad_accumulation=True).backward(gl)
close(w_kn.main_grad, before.double() + (gl.double().T @ xl.double()).T, 1e-3, 1e-4,
      "linear through w.t(): the [K, N] main_grad + dW vs FP64")
check(getattr(w_kn, "grad_added_to_main_grad", False) is True, "linear through w.t(): the parameter's flag set")
try:
    ct.linear(xl, bf16(64, 512).requires_grad_(), fuse_wgrad_accumulation=True).backward(gl)
    check(False, "linear without main_grad: no error")
except RuntimeError as e:
    check("no main_grad" in str(e), f"linear without main_grad: {e}")

# Weights of the wrong rank are refused by name before anything runs.
for call, text in [(lambda: ct.linear(bf16(4, 64), bf16(64)), "cake.torch.linear"),
                   (lambda: ct.linear(bf16(4, 64), bf16(2, 8, 64)), "cake.torch.linear"),
                   (lambda: ct.router_logits(bf16(4, 64), torch.randn(2, 8, 64, device=dev)), "cake.torch.router_logits")]:
    try:
        call()
        check(False, f"{text} with a weight of the wrong rank: no error")
    except ValueError as e:
        check(text in str(e), f"{text} with a weight of the wrong rank: {e}")

# -- router_logits: FP32 logits and gradients through cake.torch (f32 master and bf16 weight)
for w_dtype in (torch.float32, torch.bfloat16):
    tag = f"router_logits ({w_dtype} w)"
    xr3 = bf16(3, 700, 512).requires_grad_()
    wr3 = (torch.randn(64, 512, device=dev) * 0.02).to(w_dtype).requires_grad_()
    lg = ct.router_logits(xr3, wr3)
    check(lg.shape == (3, 700, 64) and lg.dtype == torch.float32, f"{tag}: logits shape and dtype")
    g3 = torch.randn(3, 700, 64, device=dev) * 1e-3
    lg.backward(g3)
    x64, w64, g64 = xr3.detach().double(), wr3.detach().double(), g3.double()
    fp32_close(lg, x64 @ w64.T, f"{tag}: logits vs FP64")
    check(xr3.grad.dtype == torch.bfloat16 and wr3.grad.dtype == w_dtype, f"{tag}: gradients in the inputs' dtypes")
    close(xr3.grad, g64 @ w64, 1e-2, 1e-2, f"{tag}: dx vs FP64")
    dwref = g64.reshape(-1, 64).T @ x64.reshape(-1, 512)
    if w_dtype == torch.float32:
        fp32_close(wr3.grad, dwref, f"{tag}: dw vs FP64")
    else:
        close(wr3.grad, dwref, 1e-2, 1e-2, f"{tag}: dw vs FP64")
wrm = (torch.randn(64, 512, device=dev) * 0.02).requires_grad_()
main_grad_bits("router_logits", wrm, lambda: wgrad32("router_gemm.wgrad", (64, 512), dlogits=gr, x=xr),
               lambda: ct.router_logits(xr, wrm, fuse_wgrad_accumulation=True).backward(gr))


# linear and router_logits under torch.compile(fullgraph=True): the eager bits, and a backward
def gate_and_project(t, wg, wp):
    return ct.router_logits(t, wg), ct.linear(t, wp)


xc2 = bf16(500, 512).requires_grad_()
wg2 = (torch.randn(64, 512, device=dev) * 0.02).requires_grad_()
wp2 = bf16(128, 512, scale=0.5).requires_grad_()
eager_out = gate_and_project(xc2, wg2, wp2)
compiled_out = torch.compile(gate_and_project, fullgraph=True)(xc2, wg2, wp2)
check(all(torch.equal(a, b) for a, b in zip(eager_out, compiled_out)),
      "torch.compile(fullgraph=True) of linear and router_logits == eager, bitwise")
(compiled_out[0].sum() + compiled_out[1].float().sum()).backward()
check(xc2.grad is not None and wg2.grad is not None and wp2.grad is not None and bool(torch.isfinite(xc2.grad).all()),
      "compiled linear and router_logits: backward")


# linear over heads of a [T, B, K] tensor under torch.compile(fullgraph=True): the eager bits
# (the fake kernel lays y out as the real one does), values and layout.
def heads_project(t_tbk, w):
    return ct.linear(t_tbk.transpose(0, 1), w) * 1.0


xh3, wh3 = bf16(200, 3, 256), bf16(3, 64, 256, scale=0.5)
check(torch.equal(torch.compile(heads_project, fullgraph=True)(xh3, wh3), heads_project(xh3, wh3)),
      "torch.compile(fullgraph=True) of linear over [T, B, K] heads == eager, bitwise")

# -- deterministic mode: a non-deterministic request runs deterministic (and logs once)
torch.use_deterministic_algorithms(True)
check(ct.calls.options(deterministic=False)["deterministic"] is True, "use_deterministic_algorithms forces deterministic")
torch.use_deterministic_algorithms(False)
check(ct.calls.options(deterministic=False)["deterministic"] is False, "otherwise deterministic=False is passed on")
y1 = ct.grouped_mm(x.detach(), w.detach(), offs)
y2 = ct.grouped_mm(x.detach(), w.detach(), offs)
check(torch.equal(y1, y2), "grouped_mm bitwise repeatable")


# -- a small MoE block: eager, torch.compile(fullgraph=True), and on torch's ops
def block(xin, wn, w1, w2, offs, ops):
    hn = ops["norm"](xin, wn)
    a = ops["mm"](hn, w1, offs)
    u, v = a.chunk(2, dim=-1)
    return ops["mm"](F.silu(u) * v, w2, offs)


cake_ops = {"norm": lambda t, wn: ct.rms_norm(t, wn, 1e-6), "mm": ct.grouped_mm}
torch_ops = {"norm": lambda t, wn: F.rms_norm(t, (t.shape[-1],), wn, 1e-6),
             "mm": lambda t, ww, o: torch._grouped_mm(t, ww.transpose(-2, -1), offs=o)}
H, I = 1024, 512
xb = bf16(M, H)
wn = torch.ones(H, device=dev, dtype=torch.bfloat16, requires_grad=True)
w1 = bf16(E, 2 * I, H, scale=0.05).requires_grad_()
w2 = bf16(E, H, I, scale=0.05).requires_grad_()


def chain(xin, wn, w1, w2, offs, ops):  # cake's ops only: nothing for inductor to compute
    return ops["mm"](ops["mm"](ops["norm"](xin, wn), w1, offs)[:, :I].contiguous(), w2, offs)


def block_fp64(xin, wn, w1, w2, offs):
    x64 = xin.double()
    hn = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * wn.double()
    ends = offs.tolist()
    outs, start = [], 0
    for e, end in enumerate(ends):
        a = hn[start:end] @ w1[e].double().T
        u, v = a.chunk(2, dim=-1)
        outs.append((F.silu(u) * v) @ w2[e].double().T)
        start = end
    return torch.cat(outs)


def rel_err(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


compiled_chain = torch.compile(chain, fullgraph=True)(xb, wn, w1, w2, offs, cake_ops)
check(torch.equal(compiled_chain, chain(xb, wn, w1, w2, offs, cake_ops)), "torch.compile(fullgraph=True) of cake's ops == eager, bitwise")
# Inductor fuses silu(u) * v and rounds it to bf16 once where eager rounds twice, so the
# compiled block is compared with FP64 as closely as eager is, not with eager's bits.
eager = block(xb, wn, w1, w2, offs, cake_ops)
compiled = torch.compile(block, fullgraph=True)(xb, wn, w1, w2, offs, cake_ops)
ref = block_fp64(xb, wn, w1, w2, offs)
e_eager, e_compiled = rel_err(eager, ref), rel_err(compiled, ref)
check(e_compiled <= 1e-2 and e_compiled <= 1.5 * e_eager,
      f"torch.compile(fullgraph=True) block vs FP64: relative error {e_compiled:.3g} (eager {e_eager:.3g})")
compiled.sum().backward()
check(w1.grad is not None and bool(torch.isfinite(w1.grad).all()), "compiled block's backward")
del eager, compiled, compiled_chain  # their autograd graphs hold the parameters' AccumulateGrad nodes

# -- CUDA graph capture of a training step. New parameters: their AccumulateGrad nodes must
# be made on the capture's side stream (in the warm-up), as torch's CUDA graph notes say.
static_x = bf16(M, H)
wn, w1, w2 = (p.detach().clone().requires_grad_() for p in (wn, w1, w2))
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    for _ in range(2):  # warm-up: the launches are prepared before capture
        block(static_x, wn, w1, w2, offs, cake_ops).float().pow(2).mean().backward()
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
for p in (wn, w1, w2):
    p.grad = None
with torch.cuda.graph(graph):
    static_loss = block(static_x, wn, w1, w2, offs, cake_ops).float().pow(2).mean()
    static_loss.backward()
new_x = bf16(M, H)
static_x.copy_(new_x)
graph.replay()
g1 = w1.grad.clone()
for p in (wn, w1, w2):
    p.grad = None
ref_loss = block(new_x, wn, w1, w2, offs, cake_ops).float().pow(2).mean()
ref_loss.backward()
check(torch.equal(static_loss, ref_loss.detach()), "graph replay: the loss of eager on the new input, bitwise")
check(torch.equal(g1, w1.grad), "graph replay: w1's gradient bitwise")

# -- checkpoint early stop: the recomputation stops before the forward GEMM
launches = {"n": 0}
real_run = ct.calls.run


def counting_run(op, tensors, *args, **kw):
    if op == "grouped_gemm.fwd":
        launches["n"] += 1
    return real_run(op, tensors, *args, **kw)


ct.calls.run = counting_run
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop  # noqa: E402

xc = bf16(M, K).requires_grad_()
for early, want in [(True, 1), (False, 2)]:
    launches["n"] = 0
    with set_checkpoint_early_stop(early):
        out = checkpoint(lambda t: ct.grouped_mm(t, w.detach(), offs), xc, use_reentrant=False)
        out.backward(g)
    check(launches["n"] == want, f"checkpoint early stop {early}: {launches['n']} forward launches (want {want})")
ct.calls.run = real_run

# -- 20 steps of a toy MoE model: the loss follows the same loop on torch's ops
def train(ops, seed):
    torch.manual_seed(seed)
    params = [torch.ones(H, device=dev, dtype=torch.bfloat16), bf16(E, 2 * I, H, scale=0.05),
              bf16(E, H, I, scale=0.05)]
    for p in params:
        p.requires_grad_()
    opt = torch.optim.SGD(params, lr=0.5)
    data = [bf16(M, H) for _ in range(4)]
    losses = []
    for step in range(20):
        opt.zero_grad()
        loss = (block(data[step % 4], *params, offs, ops).float() - data[step % 4].float()).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


lc, lt = train(cake_ops, 5), train(torch_ops, 5)
check(all(abs(a - b) <= 2e-2 * abs(b) + 1e-3 for a, b in zip(lc, lt)) and lc[-1] < lc[0],
      f"20-step loss follows torch's: cake {lc[0]:.4f} -> {lc[-1]:.4f}, torch {lt[0]:.4f} -> {lt[-1]:.4f}")


# -- host time per call (a cached problem: rebind + launch), against torch's ops
def host_us(fn, n=2000, burst=8):
    """The host's time per call: bursts of `burst` calls after a synchronisation, so the
    launch queue never fills and the GPU's time for the kernels is not what is measured."""
    for _ in range(50):
        fn()
    total = 0.0
    for _ in range(n // burst):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(burst):
            fn()
        total += time.perf_counter() - t0
    torch.cuda.synchronize()
    return total / (n // burst * burst) * 1e6


xs, ws = bf16(64, 1024), torch.ones(1024, device=dev, dtype=torch.bfloat16)
# The launch cache keeps no tensor of a call alive, the first (prepare's) included.
for shape in ((48, 2048), (64, 1024)):
    xt = bf16(*shape)
    alive = weakref.ref(xt)
    ct.rms_norm(xt, torch.ones(shape[1], device=dev, dtype=torch.bfloat16), 1e-6)
    torch.cuda.synchronize()
    del xt
    gc.collect()
    check(alive() is None, f"the launch cache keeps no tensor of a call {shape} alive")
# A bounded cache: the least recently used problem goes first, and comes back prepared anew.
from cake.torch.calls import Calls  # noqa: E402
try:
    Calls(max_problems=0)
    check(False, "Calls(max_problems=0): no error")
except ValueError as e:
    check("max_problems" in str(e), f"Calls(max_problems=0): {e}")
small = Calls(max_problems=2)
xs3 = [bf16(t, 512) for t in (8, 16, 24)]
w512 = torch.randn(512, device=dev, dtype=torch.bfloat16)
for xt in xs3 + [xs3[0]]:
    small.run("rmsnorm.fwd", {"x": xt, "w": w512, "y": torch.empty_like(xt),
                              "rstd": torch.empty(xt.shape[0], device=dev, dtype=torch.float32)}, eps=1e-6)
check(len(small) == 2, f"Calls(max_problems=2) keeps 2 launches after 4 calls of 3 problems, has {len(small)}")
y_small = torch.empty_like(xs3[1])
small.run("rmsnorm.fwd", {"x": xs3[1], "w": w512, "y": y_small,
                          "rstd": torch.empty(16, device=dev, dtype=torch.float32)}, eps=1e-6)
check(torch.equal(y_small, ct.rms_norm(xs3[1], w512, 1e-6)), "an evicted problem runs again, same bits")
xg, wg, og = bf16(64, 256), bf16(4, 256, 256), offsets([16, 16, 16, 16])
wl_host, wr_host = bf16(256, 1024), torch.randn(64, 1024, device=dev)
xs3 = xs.view(4, 16, 1024)
rows = [("rms_norm [64, 1024]", host_us(lambda: ct.rms_norm(xs, ws, 1e-6)),
         host_us(lambda: F.rms_norm(xs, (1024,), ws, 1e-6))),
        ("rms_norm [4, 16, 1024]", host_us(lambda: ct.rms_norm(xs3, ws, 1e-6)),
         host_us(lambda: F.rms_norm(xs3, (1024,), ws, 1e-6))),
        ("grouped_mm [64, 256] x [4, 256, 256]", host_us(lambda: ct.grouped_mm(xg, wg, og)),
         host_us(lambda: torch._grouped_mm(xg, wg.transpose(-2, -1), offs=og))),
        ("linear [64, 1024] x [256, 1024]", host_us(lambda: ct.linear(xs, wl_host)), host_us(lambda: F.linear(xs, wl_host))),
        ("router_logits [64, 1024] x [64, 1024] f32", host_us(lambda: ct.router_logits(xs, wr_host)),
         host_us(lambda: F.linear(xs.float(), wr_host)))]
print("host time per call (us): op | cake.torch | torch | cake / torch")
for name, c_us, t_us in rows:
    print(f"  {name} | {c_us:.1f} | {t_us:.1f} | {c_us / t_us:.2f}")

print(f"torch_ops_check: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
