// The rmsnorm family: training forward (optional residual add) and backward.
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include "ops.hpp"

namespace cake::ops {

// rmsnorm.fwd: h = x (+ residual, then written to h_out), rstd = 1/sqrt(mean(h^2) + eps),
// y = h * rstd * w. x, residual, y, h_out: bf16 [T, H], contiguous rows with a row stride
// >= H and a multiple of 8; H a multiple of 8; w: [H] bf16 or f32; rstd: f32 [T]. y and
// h_out may be x (or residual) itself; other overlaps are rejected. T = 0 is a no-op.
Launch prepare_rmsnorm_fwd(Runtime& rt, const DLTensor& y, const DLTensor& rstd, const DLTensor* h_out,
                           const DLTensor& x, const DLTensor* residual, const DLTensor& w, float eps,
                           const OpOptions& opt = {});
// rmsnorm.bwd: dx = rstd * (dy*w - xhat * mean(dy*w*xhat)) with xhat = x * rstd, and
// dw = sum over rows of dy * xhat in w's dtype, through per-chunk partial sums and a
// finalize in a fixed order: bitwise identical run to run. x is the normalised input (h).
// dx may be dy or x itself. T = 0 is a no-op (dw is not written).
Launch prepare_rmsnorm_bwd(Runtime& rt, const DLTensor& dx, const DLTensor& dw, const DLTensor& dy,
                           const DLTensor& x, const DLTensor& rstd, const DLTensor& w,
                           const OpOptions& opt = {});

}  // namespace cake::ops
