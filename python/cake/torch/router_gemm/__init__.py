"""The MoE router's gate in FP32 as a torch op: router_logits(x, w) with autograd, through
cake's router_gemm.fwd / dgrad / wgrad (docs/families.md): x [..., H] bf16, w [E, H] bf16 or
an f32 master weight, logits [..., E] f32 within the FP32 budget (exact BF16 parts on the
tensor cores). The backward takes the FP32 dlogits: dx in x's dtype, dw in FP32 (returned in
w's dtype), both deterministic. E and H are multiples of 8.

fuse_wgrad_accumulation=True: Megatron's main_grad convention (cake/torch/main_grad.py).

In eager mode the forward launches after autograd has saved x and w; under torch.compile the
op launches in place."""
import functools
import math

import torch

from ..calls import calls
from ..gemm_autograd import deferred_function, gemm_grads, register_compiled_autograd

__all__ = ["router_logits"]


def _flat(t):
    """[..., C] as [T, C] (a view of an output this module allocated)."""
    return t if t.dim() == 2 else t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _rows(t):
    """An input as [T, C] rows, contiguous and 16-byte aligned."""
    t = _flat(t)
    if not t.is_contiguous():
        t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _launch_fwd(logits, x, w):
    calls.run("router_gemm.fwd", {"logits": _flat(logits), "x": _rows(x), "w": _rows(w)})


def _out(x, w):
    return x.new_empty(*x.shape[:-1], w.shape[0], dtype=torch.float32)


def _fwd_impl(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    logits = _out(x, w)
    _launch_fwd(logits, x, w)
    return logits


def _dgrad_impl(g: torch.Tensor, w: torch.Tensor, x_dtype: torch.dtype) -> torch.Tensor:
    dx = g.new_empty(*g.shape[:-1], w.shape[1], dtype=x_dtype)
    calls.run("router_gemm.dgrad", {"dx": _flat(dx), "dlogits": _rows(g), "w": _rows(w)})
    return dx


def _wgrad_impl(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    dw = g.new_empty(g.shape[-1], x.shape[-1], dtype=torch.float32)
    calls.run("router_gemm.wgrad", {"dw": dw, "dlogits": _rows(g), "x": _rows(x)})
    return dw


def _wgrad_acc_impl(g, main_grad, x, w):
    calls.run("router_gemm.wgrad", {"dw": main_grad, "dlogits": _rows(g), "x": _rows(x)}, accumulate=True)


# -- torch.compile's path: custom ops with fake kernels and registered autograd.
_fwd = torch.library.custom_op("cake::router_logits", mutates_args=())(_fwd_impl)
_dgrad = torch.library.custom_op("cake::router_logits_dgrad", mutates_args=())(_dgrad_impl)
_wgrad = torch.library.custom_op("cake::router_logits_wgrad", mutates_args=())(_wgrad_impl)


@_fwd.register_fake
def _(x, w):
    return _out(x, w)


@_dgrad.register_fake
def _(g, w, x_dtype):
    return g.new_empty(*g.shape[:-1], w.shape[1], dtype=x_dtype)


@_wgrad.register_fake
def _(g, x):
    return g.new_empty(g.shape[-1], x.shape[-1], dtype=torch.float32)


def _grads(g, inputs, needs, fuse, dgrad=_dgrad_impl, wgrad=_wgrad_impl):
    return gemm_grads(g, inputs, needs, fuse, "cake.torch.router_logits", lambda g, x, w: dgrad(g, w, x.dtype),
                      lambda g, x, w: wgrad(g, x).to(w.dtype), _wgrad_acc_impl)


register_compiled_autograd("cake::router_logits", functools.partial(_grads, dgrad=_dgrad, wgrad=_wgrad))

# -- eager: the same functions called directly (a custom op's dispatch costs tens of us a call).
_Deferred = deferred_function(_out, _grads)


def router_logits(x: torch.Tensor, w: torch.Tensor, fuse_wgrad_accumulation: bool = False) -> torch.Tensor:
    """logits = x w^T in FP32 (the router's gate), with autograd (dgrad and wgrad through cake)."""
    if w.dim() != 2:
        raise ValueError(f"cake.torch.router_logits: w must be [E, H], got {tuple(w.shape)}")
    if torch.compiler.is_compiling():
        if fuse_wgrad_accumulation:
            raise NotImplementedError("cake.torch.router_logits: fuse_wgrad_accumulation runs in eager mode only")
        return _fwd(x, w)
    if not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return _fwd_impl(x, w)
    y = _Deferred.apply(fuse_wgrad_accumulation, x, w)
    _launch_fwd(y, x, w)
    return y
