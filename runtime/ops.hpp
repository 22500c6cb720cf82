// The public C++ ops API: prepare -> launch. prepare_* validates every argument (an
// ArgumentError naming it, before anything is launched or written), plans, loads the
// kernels and allocates the scratch the plan needs; Launch::launch(stream) then only
// enqueues. The one-call forms do both.
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include <string>

#include "launch.hpp"
#include "runtime.hpp"

namespace cake::ops {

struct OpOptions {
  bool deterministic = true;  // false admits non-deterministic routes
  // Empty: the planner's choice. Otherwise only the route candidate of this name (as
  // `cakec list-routes` shows it) is considered; if it cannot serve the call, the error
  // says why. Tests use it to run the portable programs on a Hopper part.
  std::string candidate;
  // > 0: kernels get at most this many SMs' worth of blocks (persistent and grid-stride
  // kernels), leaving the rest of the GPU to concurrent work (communication kernels, say).
  // Results do not depend on it: every route's bits are the same for any grid.
  int max_sms = 0;
};

// elementwise.add: out = a + b (same dtype: f32 or bf16), contiguous, same element count.
// out may be a itself (in place); any other overlap is rejected.
Launch prepare_add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b,
                   const OpOptions& opt = {});
// elementwise.cast: out = cast(in) between f32 and bf16; with accumulate, out += cast(in)
// (fused where a route allows, else composed through a scratch of out's dtype).
Launch prepare_cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate,
                    const OpOptions& opt = {});

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

// grouped_gemm: ragged BF16 grouped GEMM over E groups of rows given by `offs` ([E] int32
// on the device: cumulative group ends, group e = rows offs[e-1] .. offs[e]-1, offs[-1] = 0;
// read on the device only, so every launch can be captured in a CUDA graph). Rows past
// offs[E-1] are not touched. x [M, K], w [E, N, K], g [M, N], y [M, N], dx [M, K]: bf16;
// dw [E, N, K]: bf16 or f32. Every tensor fully contiguous with a 16-byte aligned base,
// N and K positive multiples of 8, E >= 1, all on one device; outputs overlap no input.
// fwd: y[rows of e] = x[rows of e] @ w[e]^T. M = 0 is a no-op.
Launch prepare_grouped_gemm_fwd(Runtime& rt, const DLTensor& y, const DLTensor& x, const DLTensor& w,
                                const DLTensor& offs, const OpOptions& opt = {});
// dgrad: dx[rows of e] = g[rows of e] @ w[e]. M = 0 is a no-op.
Launch prepare_grouped_gemm_dgrad(Runtime& rt, const DLTensor& dx, const DLTensor& g, const DLTensor& w,
                                  const DLTensor& offs, const OpOptions& opt = {});
// wgrad: dw[e] = g[rows of e]^T @ x[rows of e] (zeros for an empty group); with
// `accumulate`, dw[e] += that (an empty group leaves dw[e] unchanged): fused in the GEMM's
// epilogue for f32 dw (bitwise fp32(dw + dW)), composed through a scratch of dw's dtype and
// an elementwise add otherwise (the plan says which and why). With M = 0 every group is
// empty: dw is zero-filled, or left alone with `accumulate`.
Launch prepare_grouped_gemm_wgrad(Runtime& rt, const DLTensor& dw, const DLTensor& g, const DLTensor& x,
                                  const DLTensor& offs, bool accumulate, const OpOptions& opt = {});

void add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b, CUstream stream,
         const OpOptions& opt = {});
void cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate, CUstream stream,
          const OpOptions& opt = {});

}  // namespace cake::ops
