// RMSNorm's host/device contract: the kernels' argument structs, how a block's threads cover
// rows (the host sizes the grid by it) and the dw finalize's columns per block. Included by
// the template (smxx_rmsnorm.cuh), the codegen spec and the binder (runtime/ops/rmsnorm/).
#pragma once
#include "contract_base.h"

namespace cake::rms {

CAKE_HOST_DEVICE constexpr int pow2ceil(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// A row of h elements (h = 0: not known when compiled) is covered by this many threads of a
// block of `threads`, each moving `vec` elements per access: the next power of two above
// the row's accesses, at most the block.
CAKE_HOST_DEVICE constexpr int threads_per_row(int h, int vec, int threads) {
  return (h > 0 && h / vec < threads) ? pow2ceil(h / vec) : threads;
}
// So a block works on this many rows at once.
CAKE_HOST_DEVICE constexpr int rows_per_block(int h, int vec, int threads) {
  return threads / threads_per_row(h, vec, threads);
}

// dw_finalize: each block sums this many consecutive columns (one 32-byte sector of FP32).
constexpr int kFinalizeCols = 8;

// fwd: y = x_norm * w (h = x + residual first, written to h_out, with a residual). Row strides
// in elements; w is TW (bf16 or float).
struct FwdArgs {
  bf16* y;
  float* rstd;
  bf16* h_out;
  const bf16* x;
  const bf16* residual;
  const void* w;
  long long rows, x_stride, res_stride, y_stride, h_stride;
  int h;
  float eps;
};
CAKE_CONTRACT_SIZE(FwdArgs, 96);
CAKE_CONTRACT_FIELD(FwdArgs, rows, 48);
CAKE_CONTRACT_FIELD(FwdArgs, h, 88);
CAKE_CONTRACT_FIELD(FwdArgs, eps, 92);

// bwd: dx, and per chunk of rows a row of FP32 dw partial sums in `partial`.
struct BwdArgs {
  bf16* dx;
  float* partial;
  const bf16* dy;
  const bf16* hin;
  const float* rstd;
  const void* w;
  long long rows, dy_stride, h_stride, dx_stride;
  int h;
};
CAKE_CONTRACT_SIZE(BwdArgs, 88);
CAKE_CONTRACT_FIELD(BwdArgs, rows, 48);
CAKE_CONTRACT_FIELD(BwdArgs, h, 80);

// dw_finalize: dw (TW) = the sum of the `chunks` partial rows.
struct FinalizeArgs {
  void* dw;
  const float* partial;
  long long chunks;
  int h;
};
CAKE_CONTRACT_SIZE(FinalizeArgs, 32);
CAKE_CONTRACT_FIELD(FinalizeArgs, h, 24);

}  // namespace cake::rms
