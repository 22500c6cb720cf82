"""The MoE grouped GEMM as torch ops: grouped_mm(x, w, offs) with autograd, through cake's
grouped_gemm.fwd / dgrad / wgrad (docs/families.md): x [M, K] bf16, w [E, N, K] bf16, offs [E]
int32 cumulative group ends on the device; y [M, N] = x_e w_e^T per group.

fuse_wgrad_accumulation=True: Megatron's main_grad convention (cake/torch/main_grad.py).

In eager mode the forward GEMM launches after autograd has saved x, w and offs, so a
non-reentrant torch.utils.checkpoint with early stop stops its recomputation before the GEMM
(as it does for torch._grouped_mm); under torch.compile the op launches in place."""
import functools

import torch

from ..calls import calls
from ..gemm_autograd import deferred_function, gemm_grads, register_compiled_autograd

__all__ = ["grouped_mm"]


def _launch_fwd(y, x, w, offs):
    calls.run("grouped_gemm.fwd", {"y": y, "x": x, "w": w, "offs": offs})


def _out(x, w, offs):
    return x.new_empty(x.shape[0], w.shape[1])


def _fwd_impl(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    y = _out(x, w, offs)
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


def _wgrad_acc_impl(g, main_grad, x, w, offs):
    calls.run("grouped_gemm.wgrad", {"dw": main_grad, "g": g, "x": x, "offs": offs}, accumulate=True)


# -- torch.compile's path: custom ops with fake kernels and registered autograd.
_fwd = torch.library.custom_op("cake::grouped_mm", mutates_args=())(_fwd_impl)
_dgrad = torch.library.custom_op("cake::grouped_mm_dgrad", mutates_args=())(_dgrad_impl)
_wgrad = torch.library.custom_op("cake::grouped_mm_wgrad", mutates_args=())(_wgrad_impl)


@_fwd.register_fake
def _(x, w, offs):
    return _out(x, w, offs)


@_dgrad.register_fake
def _(g, w, offs):
    return g.new_empty(g.shape[0], w.shape[2])


@_wgrad.register_fake
def _(g, x, offs, e):
    return g.new_empty(e, g.shape[1], x.shape[1])


def _grads(g, inputs, needs, fuse, dgrad=_dgrad_impl, wgrad=_wgrad_impl):
    return gemm_grads(g.contiguous(), inputs, needs, fuse, "cake.torch.grouped_mm",
                      lambda g, x, w, offs: dgrad(g, w, offs), lambda g, x, w, offs: wgrad(g, x, offs, w.shape[0]),
                      _wgrad_acc_impl)


register_compiled_autograd("cake::grouped_mm", functools.partial(_grads, dgrad=_dgrad, wgrad=_wgrad))

# -- eager: the same functions called directly (a custom op's dispatch costs tens of us a call).
_Deferred = deferred_function(_out, _grads)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, fuse_wgrad_accumulation: bool = False):
    """y[offs[e-1]:offs[e]] = x[offs[e-1]:offs[e]] @ w[e]^T, with autograd (dgrad and wgrad
    through cake)."""
    if torch.compiler.is_compiling():
        if fuse_wgrad_accumulation:
            raise NotImplementedError("cake.torch.grouped_mm: fuse_wgrad_accumulation runs in eager mode only")
        return _fwd(x, w, offs)
    if not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return _fwd_impl(x, w, offs)
    y = _Deferred.apply(fuse_wgrad_accumulation, x, w, offs)
    _launch_fwd(y, x, w, offs)
    return y
