"""RMSNorm as torch ops: rms_norm(x, w, eps, residual=None) with autograd, through cake's
rmsnorm.fwd / rmsnorm.bwd (docs/families.md). x: [..., H] bf16, H a multiple of 8; w: [H]
bf16 or f32. With a residual, h = x + residual (rounded to bf16) is normalised and returned
too, as the next layer's residual stream: (y, h)."""
from typing import Optional, Tuple

import torch

from ..calls import calls

__all__ = ["rms_norm"]


def _rows(t):
    """[..., H] as [T, H] rows the kernels take (row stride a multiple of 8, unit inner stride)."""
    if t.is_contiguous():  # the common case, without the stride checks' cost
        return t if t.dim() == 2 else t.view(-1, t.shape[-1])
    rows = t.reshape(-1, t.shape[-1])
    ok = rows.stride(-1) == 1 and rows.stride(0) >= rows.shape[1] and rows.stride(0) % 8 == 0
    return rows if ok else rows.contiguous()


def _like(x):
    """A new contiguous tensor of x's shape and dtype (empty_like: less than half the host time of torch.empty)."""
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _rstd(x):
    return x.new_empty((x.numel() // x.shape[-1],), dtype=torch.float32)


def _fwd_impl(x: torch.Tensor, w: torch.Tensor, eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
    y, rstd = _like(x), _rstd(x)
    calls.run("rmsnorm.fwd", {"y": _rows(y), "rstd": rstd, "x": _rows(x), "w": w}, eps=eps)
    return y, rstd


def _fwd_res_impl(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor,
                  eps: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, h, rstd = _like(x), _like(x), _rstd(x)
    calls.run("rmsnorm.fwd", {"y": _rows(y), "rstd": rstd, "x": _rows(x), "residual": _rows(residual),
                              "h_out": _rows(h), "w": w}, eps=eps)
    return y, h, rstd


def _bwd_impl(dy: torch.Tensor, h: torch.Tensor, rstd: torch.Tensor, w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    dx = _like(h)
    dw = torch.empty_like(w, memory_format=torch.contiguous_format)
    calls.run("rmsnorm.bwd", {"dx": _rows(dx), "dw": dw, "dy": _rows(dy), "x": _rows(h), "rstd": rstd, "w": w})
    return dx, dw


# -- torch.compile's path: custom ops with fake kernels and registered autograd.
_fwd = torch.library.custom_op("cake::rms_norm", mutates_args=())(_fwd_impl)
_fwd_res = torch.library.custom_op("cake::rms_norm_residual", mutates_args=())(_fwd_res_impl)
_bwd = torch.library.custom_op("cake::rms_norm_backward", mutates_args=())(_bwd_impl)


@_fwd.register_fake
def _(x, w, eps):
    return torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1], dtype=torch.float32)


@_fwd_res.register_fake
def _(x, residual, w, eps):
    return torch.empty_like(x), torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1], dtype=torch.float32)


@_bwd.register_fake
def _(dy, h, rstd, w):
    return torch.empty_like(h), torch.empty_like(w)


def _setup(ctx, inputs, output):
    x, w, _ = inputs
    ctx.save_for_backward(x, output[1], w)


def _backward(ctx, dy, _drstd):
    x, rstd, w = ctx.saved_tensors
    dx, dw = _bwd(dy, x, rstd, w)
    return dx, dw, None


def _setup_res(ctx, inputs, output):
    _, _, w, _ = inputs
    ctx.save_for_backward(output[1], output[2], w)


def _backward_res(ctx, dy, dh, _drstd):
    h, rstd, w = ctx.saved_tensors
    dx, dw = _bwd(dy, h, rstd, w)
    if dh is not None:
        dx = dx + dh
    return dx, dx, dw, None


torch.library.register_autograd("cake::rms_norm", _backward, setup_context=_setup)
torch.library.register_autograd("cake::rms_norm_residual", _backward_res, setup_context=_setup_res)


# -- eager: the same functions called directly (a custom op's dispatch costs tens of us a call).
class _RmsNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        y, rstd = _fwd_impl(x, w, eps)
        ctx.save_for_backward(x, rstd, w)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, rstd, w = ctx.saved_tensors
        dx, dw = _bwd_impl(dy, x, rstd, w)
        return dx, dw, None


class _RmsNormResidual(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, w, eps):
        y, h, rstd = _fwd_res_impl(x, residual, w, eps)
        ctx.save_for_backward(h, rstd, w)
        ctx.set_materialize_grads(False)
        return y, h

    @staticmethod
    def backward(ctx, dy, dh):
        h, rstd, w = ctx.saved_tensors
        if dy is None:
            dy = torch.zeros_like(h)
        dx, dw = _bwd_impl(dy, h, rstd, w)
        if dh is not None:
            dx = dx + dh
        return dx, dx, dw, None


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6, residual: Optional[torch.Tensor] = None):
    """y = x / rms(x) * w over the last dim (fp32 inside, deterministic dw). With `residual`:
    h = x + residual is normalised and (y, h) returned."""
    if torch.compiler.is_compiling():
        if residual is None:
            return _fwd(x, w, eps)[0]
        y, h, _ = _fwd_res(x, residual, w, eps)
        return y, h
    grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or
                                        (residual is not None and residual.requires_grad))
    if residual is None:
        return _RmsNorm.apply(x, w, eps) if grad else _fwd_impl(x, w, eps)[0]
    if grad:
        return _RmsNormResidual.apply(x, residual, w, eps)
    y, h, _ = _fwd_res_impl(x, residual, w, eps)
    return y, h
