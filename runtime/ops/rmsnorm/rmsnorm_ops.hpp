// The rmsnorm family: training forward (optional residual add) and backward. Typed wrappers
// over ops::prepare.
#pragma once
#include "ops.hpp"

namespace cake::ops {

// rmsnorm.fwd: h = x (+ residual, then written to h_out), rstd = 1/sqrt(mean(h^2) + eps),
// y = h * rstd * w. x, residual, y, h_out: bf16 [T, H], contiguous rows with a row stride
// >= H and a multiple of 8; H a multiple of 8; w: [H] bf16 or f32; rstd: f32 [T]. y and
// h_out may be x (or residual) itself; other overlaps are rejected. T = 0 is a no-op.
inline Launch prepare_rmsnorm_fwd(Runtime& rt, const DLTensor& y, const DLTensor& rstd, const DLTensor* h_out,
                                  const DLTensor& x, const DLTensor* residual, const DLTensor& w, float eps,
                                  OpOptions opt = {}) {
  opt.eps = eps;
  NamedTensors t = {{"y", &y}, {"rstd", &rstd}, {"x", &x}, {"w", &w}};
  if (residual) t.emplace_back("residual", residual);
  if (h_out) t.emplace_back("h_out", h_out);
  return prepare(rt, "rmsnorm.fwd", t, opt);
}
// rmsnorm.bwd: dx = rstd * (dy*w - xhat * mean(dy*w*xhat)) with xhat = x * rstd, and
// dw = sum over rows of dy * xhat in w's dtype, through per-chunk partial sums and a
// finalize in a fixed order: bitwise identical run to run. x is the normalised input (h).
// dx may be dy or x itself. T = 0 is a no-op (dw is not written).
inline Launch prepare_rmsnorm_bwd(Runtime& rt, const DLTensor& dx, const DLTensor& dw, const DLTensor& dy,
                                  const DLTensor& x, const DLTensor& rstd, const DLTensor& w,
                                  const OpOptions& opt = {}) {
  return prepare(rt, "rmsnorm.bwd", {{"dx", &dx}, {"dw", &dw}, {"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"w", &w}},
                 opt);
}

}  // namespace cake::ops
