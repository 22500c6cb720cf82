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

// Launch geometry per hidden size, one rule for kernels, codegen and binders (h = 0: the
// generic program, h read at run time). Measured on the H200 for the sizes that had their own
// programs (docs/decisions.md); other sizes follow the same rule.
//
// Forward: 16-byte accesses; the fewest threads (a power of two from 64) that hold the row
// in at most four vectors a lane: 1024 -> 64, 4096 -> 128, 5120..8192 -> 256, 16384 -> 512.
// Rows of at most 64 vectors take 256 threads (several rows per block).
CAKE_HOST_DEVICE constexpr int fwd_vec(int) { return 8; }
CAKE_HOST_DEVICE constexpr int fwd_threads(int h) {
  if (h == 0) return 1024;
  const int vectors = h / 8;
  if (vectors <= 64) return 256;
  int t = 64;
  while (t < 1024 && (vectors + t - 1) / t > 4) t *= 2;
  return t;
}
// Backward: 256 threads up to H 2048, 512 up to 8192 (and for the generic program), 1024
// above, so a row of up to 16384 stays in registers at 16 bf16 a lane.
CAKE_HOST_DEVICE constexpr int bwd_threads(int h) { return h == 0 ? 512 : h <= 2048 ? 256 : h <= 8192 ? 512 : 1024; }
// bf16 per access in the backward: 16-byte vectors leave lanes idle where a row has more
// vectors than the block and not a multiple of it (H 5120: 640 over 512 lanes); 8-byte ones
// keep them busy (1280 vectors: 3 slots a lane) at the same bytes in flight.
CAKE_HOST_DEVICE constexpr int bwd_vec(int h) {
  return h > 0 && h / 8 > bwd_threads(h) && (h / 8) % bwd_threads(h) != 0 ? 4 : 8;
}
// The specialised programs' domain: the row in registers with at most four vectors a lane
// (fwd up to 512 threads of 8, bwd 1024 of 4 or 8). Larger rows take the generic program.
constexpr int kSpecialisedMinH = 256, kFwdSpecialisedMaxH = 16384, kBwdSpecialisedMaxH = 16384;
// The largest H an op accepts.
constexpr long long kMaxH = 1LL << 20;

// dw_finalize: each block sums this many consecutive columns (one 32-byte sector of FP32), with
// this many threads.
constexpr int kFinalizeCols = 8;
constexpr int kFinalizeThreads = 256;

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
