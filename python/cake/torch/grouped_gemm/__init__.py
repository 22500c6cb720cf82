"""The MoE grouped GEMM as torch ops: grouped_mm(x, w, offs) with autograd, through cake's
grouped_gemm.fwd / dgrad / wgrad (docs/families.md): x [M, K] bf16, w [E, N, K] bf16, offs [E]
int32 cumulative group ends on the device; y [M, N] = x_e w_e^T per group.

Megatron's convention: with fuse_wgrad_accumulation=True the backward adds dW into
w.main_grad (FP32; the fused route where the planner has one), sets w.grad_added_to_main_grad
and returns a placeholder weight gradient (zeros when w.zero_out_wgrad, else uninitialised).

In eager mode the forward GEMM launches after autograd has saved x, w and offs, so a
non-reentrant torch.utils.checkpoint with early stop stops its recomputation before the GEMM
(as it does for torch._grouped_mm); under torch.compile the op launches in place."""
import torch

from ..calls import calls

__all__ = ["grouped_mm"]


def _launch_fwd(y, x, w, offs):
    calls.run("grouped_gemm.fwd", {"y": y, "x": x, "w": w, "offs": offs})


def _fwd_impl(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    y = x.new_empty(x.shape[0], w.shape[1])
    _launch_fwd(y, x, w, offs)
    return y


def _dgrad_impl(g: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    dx = g.new_empty(g.shape[0], w.shape[2])
    calls.run("grouped_gemm.dgrad", {"dx": dx, "g": g, "w": w, "offs": offs})
    return dx


def _wgrad_impl(g: torch.Tensor, x: torch.Tensor, offs: torch.Tensor, e: int) -> torch.Tensor:
    dw = g.new_empty(e, g.shape[1], x.shape[1])
    calls.run("grouped_gemm.wgrad", {"dw": dw, "g": g, "x": x, "offs": offs})
    return dw


def _wgrad_acc_impl(g: torch.Tensor, x: torch.Tensor, offs: torch.Tensor, main_grad: torch.Tensor) -> None:
    calls.run("grouped_gemm.wgrad", {"dw": main_grad, "g": g, "x": x, "offs": offs}, accumulate=True)


# -- torch.compile's path: custom ops with fake kernels and registered autograd.
_fwd = torch.library.custom_op("cake::grouped_mm", mutates_args=())(_fwd_impl)
_dgrad = torch.library.custom_op("cake::grouped_mm_dgrad", mutates_args=())(_dgrad_impl)
_wgrad = torch.library.custom_op("cake::grouped_mm_wgrad", mutates_args=())(_wgrad_impl)


@_fwd.register_fake
def _(x, w, offs):
    return x.new_empty(x.shape[0], w.shape[1])


@_dgrad.register_fake
def _(g, w, offs):
    return g.new_empty(g.shape[0], w.shape[2])


@_wgrad.register_fake
def _(g, x, offs, e):
    return g.new_empty(e, g.shape[1], x.shape[1])


def _grads(g, x, w, offs, need_x, need_w, fuse, dgrad, wgrad):
    g = g.contiguous()
    dx = dgrad(g, w, offs) if need_x else None
    if not need_w:
        return dx, None
    if not fuse:
        return dx, wgrad(g, x, offs, w.shape[0])
    main_grad = getattr(w, "main_grad", None)
    if main_grad is None:
        raise RuntimeError("cake.torch.grouped_mm(fuse_wgrad_accumulation=True): w has no main_grad")
    if main_grad.dtype != torch.float32 or main_grad.shape != w.shape:
        raise RuntimeError(f"cake.torch.grouped_mm(fuse_wgrad_accumulation=True): w.main_grad must be float32 of "
                           f"shape {tuple(w.shape)}, got {main_grad.dtype} {tuple(main_grad.shape)}")
    _wgrad_acc_impl(g, x, offs, main_grad)
    w.grad_added_to_main_grad = True
    if getattr(w, "zero_out_wgrad", False):
        return dx, torch.zeros_like(w)
    return dx, torch.empty_like(w)


def _setup(ctx, inputs, output):
    x, w, offs = inputs
    ctx.save_for_backward(x, w, offs)


def _backward(ctx, g):
    x, w, offs = ctx.saved_tensors
    dx, dw = _grads(g, x, w, offs, ctx.needs_input_grad[0], ctx.needs_input_grad[1], False, _dgrad, _wgrad)
    return dx, dw, None


torch.library.register_autograd("cake::grouped_mm", _backward, setup_context=_setup)


# -- eager: the same functions called directly (a custom op's dispatch costs tens of us a call).
class _Deferred(torch.autograd.Function):
    """Forward saves the inputs and returns the output unwritten; the caller launches the GEMM
    into it once apply has returned (after the saves)."""

    @staticmethod
    def forward(ctx, x, w, offs, fuse):
        ctx.fuse = fuse
        ctx.save_for_backward(x, w, offs)
        return x.new_empty(x.shape[0], w.shape[1])

    @staticmethod
    def backward(ctx, g):
        x, w, offs = ctx.saved_tensors
        dx, dw = _grads(g, x, w, offs, ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.fuse,
                        _dgrad_impl, _wgrad_impl)
        return dx, dw, None, None


def grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, fuse_wgrad_accumulation: bool = False):
    """y[offs[e-1]:offs[e]] = x[offs[e-1]:offs[e]] @ w[e]^T, with autograd (dgrad and wgrad
    through cake)."""
    if torch.compiler.is_compiling():
        if fuse_wgrad_accumulation:
            raise NotImplementedError("cake.torch.grouped_mm: fuse_wgrad_accumulation runs in eager mode only")
        return _fwd(x, w, offs)
    if not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return _fwd_impl(x, w, offs)
    y = _Deferred.apply(x, w, offs, fuse_wgrad_accumulation)
    _launch_fwd(y, x, w, offs)
    return y
