"""The autograd of the GEMM ops (x first, the weight second, then tensors without gradients):
dx from a dgrad, dW from a wgrad or, with fuse_wgrad_accumulation, added into the weight's
main_grad (main_grad.py); and, for eager mode, an autograd.Function whose forward returns the
output unwritten so the caller launches the GEMM after autograd has saved the inputs (a
non-reentrant checkpoint with early stop then stops its recomputation before the GEMM, as it
does for torch's own GEMMs)."""
import torch

from .main_grad import accumulated, main_grad_view


def gemm_grads(g, inputs, needs, fuse, who, dgrad, wgrad, wgrad_acc):
    """The gradients of `inputs` for the output gradient g: dgrad(g, *inputs) for x,
    wgrad(g, *inputs) for the weight, or with `fuse` wgrad_acc(g, main_grad, *inputs) and a
    placeholder; None for the rest. `who` names the op in errors."""
    x, w = inputs[0], inputs[1]
    dx = dgrad(g, *inputs) if needs[0] else None
    dw = None
    if needs[1] and not fuse:
        dw = wgrad(g, *inputs)
    elif needs[1]:
        param, main_grad = main_grad_view(w, who)
        wgrad_acc(g, main_grad, *inputs)
        dw = accumulated(param, w)
    return (dx, dw) + (None,) * (len(inputs) - 2)


def register_compiled_autograd(name, grads):
    """The autograd of custom op `name` (torch.compile's path): its inputs saved, the backward
    grads(g, inputs, needs, False), grads calling the op's dgrad and wgrad custom ops."""

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        return grads(g, ctx.saved_tensors, ctx.needs_input_grad, False)

    torch.library.register_autograd(name, backward, setup_context=setup)


def deferred_function(output, grads):
    """An autograd.Function: apply(fuse, *inputs) saves the inputs and returns output(*inputs)
    unwritten; its backward returns grads(g, inputs, needs, fuse)."""

    class Deferred(torch.autograd.Function):
        @staticmethod
        def forward(ctx, fuse, *inputs):
            ctx.fuse = fuse
            ctx.save_for_backward(*inputs)
            return output(*inputs)

        @staticmethod
        def backward(ctx, g):
            return (None, *grads(g, ctx.saved_tensors, ctx.needs_input_grad[1:], ctx.fuse))

    return Deferred
