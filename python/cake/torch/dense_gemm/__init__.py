"""The projection GEMM as torch ops: linear(x, w) with autograd, through cake's dense_gemm.fwd
/ dgrad / wgrad (docs/families.md): F.linear without a bias, in bf16. x [..., K] and w [N, K]
give y [..., N]; a weight kept [K, N] is passed as its transposed view (w_kn.t()) and served
without a copy; batched over heads, x [B, T, K] and w [B, N, K] give y [B, T, N] in one
launch, x contiguous or the heads of a [T, B, K] tensor (x_tbk.transpose(0, 1), served without
a copy; y and dx then come laid out the same way). K and N are multiples of 8.

fuse_wgrad_accumulation=True: Megatron's main_grad convention (cake/torch/main_grad.py).

In eager mode the forward GEMM launches after autograd has saved x and w (as grouped_mm's
does, for a non-reentrant checkpoint's early stop); under torch.compile the op launches in
place."""
import functools
import math

import torch

from ..calls import calls
from ..gemm_autograd import deferred_function, gemm_grads, register_compiled_autograd

__all__ = ["linear"]


def _heads_interleaved(t):
    """t [B, T, C] is the heads of a contiguous [T, B, C] tensor (t_tbc.transpose(0, 1))."""
    return t.dim() == 3 and t.shape[0] > 1 and t.shape[1] > 1 and t.transpose(0, 1).is_contiguous()


def _heads_outer_rows(t):
    """t [B, T, C] steps over heads by less than over rows (by stride order alone, which is
    what torch.compile's fake tensors keep)."""
    return t.dim() == 3 and t.shape[0] > 1 and t.shape[1] > 1 and t.stride(0) < t.stride(1)


def _served_rows(t):
    """Token rows the op takes as they are (docs/families.md): contiguous, heads of a [T, B, C]
    tensor, or [T, C] rows a multiple of 16 bytes apart."""
    if t.is_contiguous() or _heads_interleaved(t):
        return True
    return (t.dim() == 2 and t.stride(1) == 1 and t.stride(0) >= t.shape[1]
            and t.stride(0) * t.element_size() % 16 == 0)


def _packed(t, rows=False):
    """t as the kernels take it, 16-byte aligned: contiguous, or with `rows` any layout of
    token rows the op serves (a copy keeps the layout)."""
    if not (t.is_contiguous() or (rows and _served_rows(t))):
        t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _weight(w):
    """w [.., N, K] contiguous, or the transposed view of a contiguous [.., K, N] weight."""
    if w.is_contiguous() or not w.transpose(-2, -1).is_contiguous() or w.data_ptr() % 16 != 0:
        return _packed(w)
    return w


def _as_rows(t, w):
    """t as the op takes it: [T, K] rows (leading dims folded) for a 2-D w, [B, T, K] for a 3-D one."""
    return t if w.dim() == 3 or t.dim() == 2 else t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _rows(x, w):
    return _packed(_as_rows(x, w), rows=True)


def _launch_fwd(y, x, w):
    calls.run("dense_gemm.fwd", {"y": _as_rows(y, w), "x": _rows(x, w), "w": _weight(w)})


def _like(t, w, cols):
    """A new output of t's rows and `cols` columns: for heads (a 3-D w) laid out [T, B, cols]
    when t's heads are interleaved so, else contiguous (its rows fold into a view). Not a view
    of another tensor, so in-place ops on it stay allowed under autograd."""
    if w.dim() == 3 and _heads_outer_rows(t):
        b, rows = t.shape[0], t.shape[1]
        return torch.empty_strided((b, rows, cols), (cols, b * cols, 1), dtype=t.dtype, device=t.device)
    return t.new_empty(*t.shape[:-1], cols)


def _out(x, w):
    return _like(x, w, w.shape[-2])


def _fwd_impl(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = _out(x, w)
    _launch_fwd(y, x, w)
    return y


def _dgrad_impl(g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    dx = _like(g, w, w.shape[-1])
    calls.run("dense_gemm.dgrad", {"dx": _as_rows(dx, w), "dy": _rows(g, w), "w": _weight(w)})
    return dx


def _wgrad_impl(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    dw = w.new_empty(w.shape)  # contiguous [.., N, K], whatever w's layout
    calls.run("dense_gemm.wgrad", {"dw": dw, "dy": _rows(g, w), "x": _rows(x, w)})
    return dw


def _wgrad_acc_impl(g, main_grad, x, w):
    calls.run("dense_gemm.wgrad", {"dw": main_grad, "dy": _rows(g, w), "x": _rows(x, w)}, accumulate=True)


# -- torch.compile's path: custom ops with fake kernels and registered autograd.
_fwd = torch.library.custom_op("cake::linear", mutates_args=())(_fwd_impl)
_dgrad = torch.library.custom_op("cake::linear_dgrad", mutates_args=())(_dgrad_impl)
_wgrad = torch.library.custom_op("cake::linear_wgrad", mutates_args=())(_wgrad_impl)


@_fwd.register_fake
def _(x, w):
    return _out(x, w)


@_dgrad.register_fake
def _(g, w):
    return _like(g, w, w.shape[-1])


@_wgrad.register_fake
def _(g, x, w):
    return w.new_empty(w.shape)


def _grads(g, inputs, needs, fuse, dgrad=_dgrad_impl, wgrad=_wgrad_impl):
    return gemm_grads(g, inputs, needs, fuse, "cake.torch.linear", lambda g, x, w: dgrad(g, w),
                      lambda g, x, w: wgrad(g, x, w), _wgrad_acc_impl)


register_compiled_autograd("cake::linear", functools.partial(_grads, dgrad=_dgrad, wgrad=_wgrad))

# -- eager: the same functions called directly (a custom op's dispatch costs tens of us a call).
_Deferred = deferred_function(_out, _grads)


def linear(x: torch.Tensor, w: torch.Tensor, fuse_wgrad_accumulation: bool = False) -> torch.Tensor:
    """y = x w^T (F.linear without a bias; per head when w is [B, N, K]), with autograd (dgrad
    and wgrad through cake)."""
    if w.dim() not in (2, 3) or (w.dim() == 3 and x.dim() != 3):
        raise ValueError(f"cake.torch.linear: w must be [N, K], or [B, N, K] with x [B, T, K]; got x "
                         f"{tuple(x.shape)}, w {tuple(w.shape)}")
    if torch.compiler.is_compiling():
        if fuse_wgrad_accumulation:
            raise NotImplementedError("cake.torch.linear: fuse_wgrad_accumulation runs in eager mode only")
        return _fwd(x, w)
    if not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return _fwd_impl(x, w)
    y = _Deferred.apply(fuse_wgrad_accumulation, x, w)
    _launch_fwd(y, x, w)
    return y
