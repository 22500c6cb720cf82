"""Megatron's fused weight-gradient accumulation, for every op that takes
fuse_wgrad_accumulation=True: the backward adds dW into the FP32 `main_grad` kept beside the
weight (the fused route where the planner has one), sets `grad_added_to_main_grad` on the
parameter and returns a placeholder weight gradient (zeros when the parameter has
`zero_out_wgrad`, else uninitialised), so autograd's own accumulation adds nothing real.

The parameter is `w` itself, or the tensor `w` views (a weight kept [K, N] and passed as
w_kn.t()); main_grad must be FP32 with the parameter's shape and strides, and is handed to
the op as a tensor of w's shape and layout."""
import torch


def main_grad_view(w: torch.Tensor, who: str):
    """(parameter, main_grad seen as w): raises RuntimeError naming `who` when the parameter
    has no main_grad or one of the wrong dtype or layout."""
    param = w if hasattr(w, "main_grad") or w._base is None else w._base
    main_grad = getattr(param, "main_grad", None)
    if main_grad is None:
        raise RuntimeError(f"{who}(fuse_wgrad_accumulation=True): w has no main_grad")
    if main_grad.dtype != torch.float32 or main_grad.shape != param.shape or main_grad.stride() != param.stride():
        raise RuntimeError(f"{who}(fuse_wgrad_accumulation=True): w.main_grad must be float32 of shape "
                           f"{tuple(param.shape)} and strides {param.stride()}, got {main_grad.dtype} "
                           f"{tuple(main_grad.shape)} strides {main_grad.stride()}")
    if param is w:
        return param, main_grad
    offset = main_grad.storage_offset() + w.storage_offset() - param.storage_offset()
    return param, main_grad.as_strided(w.shape, w.stride(), offset)


def accumulated(param: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Marks dW as added to param.main_grad and returns the placeholder gradient for w."""
    param.grad_added_to_main_grad = True
    return torch.zeros_like(w) if getattr(param, "zero_out_wgrad", False) else torch.empty_like(w)
