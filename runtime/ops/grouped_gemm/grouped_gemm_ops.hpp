// The grouped_gemm family: ragged BF16 grouped GEMM over MoE experts. Typed wrappers over
// ops::prepare.
#pragma once
#include "ops.hpp"

namespace cake::ops {

// grouped_gemm: ragged BF16 grouped GEMM over E groups of rows given by `offs` ([E] int32
// on the device: cumulative group ends, group e = rows offs[e-1] .. offs[e]-1, offs[-1] = 0;
// read on the device only, so every launch can be captured in a CUDA graph). Rows past
// offs[E-1] are not touched. x [M, K], w [E, N, K], g [M, N], y [M, N], dx [M, K]: bf16;
// dw [E, N, K]: bf16 or f32. Every tensor fully contiguous with a 16-byte aligned base,
// N and K positive multiples of 8, E >= 1, all on one device; outputs overlap no input.
// fwd: y[rows of e] = x[rows of e] @ w[e]^T. M = 0 is a no-op.
inline Launch prepare_grouped_gemm_fwd(Runtime& rt, const DLTensor& y, const DLTensor& x, const DLTensor& w,
                                       const DLTensor& offs, const OpOptions& opt = {}) {
  return prepare(rt, "grouped_gemm.fwd", {{"y", &y}, {"x", &x}, {"w", &w}, {"offs", &offs}}, opt);
}
// dgrad: dx[rows of e] = g[rows of e] @ w[e]. M = 0 is a no-op.
inline Launch prepare_grouped_gemm_dgrad(Runtime& rt, const DLTensor& dx, const DLTensor& g, const DLTensor& w,
                                         const DLTensor& offs, const OpOptions& opt = {}) {
  return prepare(rt, "grouped_gemm.dgrad", {{"dx", &dx}, {"g", &g}, {"w", &w}, {"offs", &offs}}, opt);
}
// wgrad: dw[e] = g[rows of e]^T @ x[rows of e] (zeros for an empty group); with
// `accumulate`, dw[e] += that (an empty group leaves dw[e] unchanged): fused in the GEMM's
// epilogue for f32 dw (bitwise fp32(dw + dW)), composed through a scratch of dw's dtype and
// an add stage otherwise (the plan says which and why). With M = 0 every group is
// empty: dw is zero-filled, or left alone with `accumulate`.
inline Launch prepare_grouped_gemm_wgrad(Runtime& rt, const DLTensor& dw, const DLTensor& g, const DLTensor& x,
                                         const DLTensor& offs, bool accumulate, OpOptions opt = {}) {
  opt.accumulate = accumulate;
  return prepare(rt, "grouped_gemm.wgrad", {{"dw", &dw}, {"g", &g}, {"x", &x}, {"offs", &offs}}, opt);
}

}  // namespace cake::ops
