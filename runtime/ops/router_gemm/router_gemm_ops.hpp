// The router_gemm family: the MoE router's gate GEMM in FP32 through exact BF16 parts on the
// tensor cores (codegen/router_gemm/spec.cpp says how each op is laid out). Typed wrappers
// over ops::prepare.
#pragma once
#include "ops.hpp"

namespace cake::ops {

// router_gemm: x [T, H] bf16, w [E, H] bf16 or f32 (the master weight), logits and dlogits
// [T, E] f32, dx [T, H] bf16 or f32, dw [E, H] f32. Every tensor fully contiguous with a
// 16-byte aligned base, E and H positive multiples of 8, all on one device; outputs overlap no
// input. Results meet TARGETS.md's FP32 budget; every route is deterministic.
// fwd: logits = x w^T. T = 0 is a no-op.
inline Launch prepare_router_gemm_fwd(Runtime& rt, const DLTensor& logits, const DLTensor& x, const DLTensor& w,
                                      const OpOptions& opt = {}) {
  return prepare(rt, "router_gemm.fwd", {{"logits", &logits}, {"x", &x}, {"w", &w}}, opt);
}
// dgrad: dx = dlogits w. T = 0 is a no-op.
inline Launch prepare_router_gemm_dgrad(Runtime& rt, const DLTensor& dx, const DLTensor& dlogits, const DLTensor& w,
                                        const OpOptions& opt = {}) {
  return prepare(rt, "router_gemm.dgrad", {{"dx", &dx}, {"dlogits", &dlogits}, {"w", &w}}, opt);
}
// wgrad: dw = dlogits^T x; with `accumulate`, dw += that (the sum of the parts' products,
// rounded to f32, added to dw and rounded once more). T = 0: dw is zero-filled, or left alone
// with `accumulate`.
inline Launch prepare_router_gemm_wgrad(Runtime& rt, const DLTensor& dw, const DLTensor& dlogits, const DLTensor& x,
                                        bool accumulate, OpOptions opt = {}) {
  opt.accumulate = accumulate;
  return prepare(rt, "router_gemm.wgrad", {{"dw", &dw}, {"dlogits", &dlogits}, {"x", &x}}, opt);
}

}  // namespace cake::ops
