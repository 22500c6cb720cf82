// The dense_gemm family: the BF16 projection GEMM (fwd, dgrad, wgrad), alone or over a batch
// of heads. Typed wrappers over ops::prepare.
#pragma once
#include "ops.hpp"

namespace cake::ops {

// dense_gemm: x [T, K], w [N, K], dy [T, N], dx [T, K]: bf16; y [T, N] and dw [N, K]: bf16
// or f32. Batched (one launch over B heads): x [B, T, K], w [B, N, K], y and dy [B, T, N],
// dx [B, T, K], dw [B, N, K]. Every tensor fully contiguous with a 16-byte aligned base, N
// and K positive multiples of 8, all on one device; outputs overlap no input. Every route is
// deterministic (the same bits on every run, whatever max_sms).
// fwd: y = x w^T. T = 0 or B = 0 is a no-op.
inline Launch prepare_dense_gemm_fwd(Runtime& rt, const DLTensor& y, const DLTensor& x, const DLTensor& w,
                                     const OpOptions& opt = {}) {
  return prepare(rt, "dense_gemm.fwd", {{"y", &y}, {"x", &x}, {"w", &w}}, opt);
}
// dgrad: dx = dy w. T = 0 or B = 0 is a no-op.
inline Launch prepare_dense_gemm_dgrad(Runtime& rt, const DLTensor& dx, const DLTensor& dy, const DLTensor& w,
                                       const OpOptions& opt = {}) {
  return prepare(rt, "dense_gemm.dgrad", {{"dx", &dx}, {"dy", &dy}, {"w", &w}}, opt);
}
// wgrad: dw = dy^T x; with `accumulate`, dw += that: fused in the GEMM's epilogue for f32 dw
// (bitwise fp32(dw + dW)), composed through a scratch and an add stage for bf16 (dW rounded
// to bf16 first). T = 0: dw is zero-filled, or left alone with `accumulate`.
inline Launch prepare_dense_gemm_wgrad(Runtime& rt, const DLTensor& dw, const DLTensor& dy, const DLTensor& x,
                                       bool accumulate, OpOptions opt = {}) {
  opt.accumulate = accumulate;
  return prepare(rt, "dense_gemm.wgrad", {{"dw", &dw}, {"dy", &dy}, {"x", &x}}, opt);
}

}  // namespace cake::ops
