// The router family's own kernels (smxx_router_gemm.cuh) and the host code that binds them
// (runtime/ops/router_gemm/) read this one declaration. The router's GEMMs are the shared BF16
// GEMM kernels (templates/common/gemm_contract.h); these kernels turn FP32 operands into the
// BF16 parts those GEMMs multiply, and sum the products of the parts.
#pragma once
#include "contract_base.h"

namespace cake::router {

// Threads per block of both kernels; each thread moves 8 (split) or 4 (sum) elements at a time.
constexpr int kThreads = 256;
constexpr int kSplitVec = 8;
constexpr int kSumVec = 4;
// The most blocks (parts laid side by side) one split writes.
constexpr int kMaxBlocks = 8;

// split: `in` [rows, cols] (float, or bf16: its one part is itself) into `blocks` BF16 blocks;
// element (r, c) of block p is at out[p * block_stride + r * ld_out + c] and holds part
// pattern[p] of in[r, c] (0 hi, 1 mid, 2 lo: an FP32 value is exactly hi + mid + lo).
// Blocks side by side in a row (block_stride = cols, ld_out = blocks x cols) lay the parts
// along a GEMM's reduction; blocks one after another (block_stride = rows x cols, ld_out =
// cols) stack them as separate operands. cols % kSplitVec == 0; pointers 16-byte aligned.
// With `offs`, the split also writes the group ends of `rows` cut into chunks of `chunk` rows
// (offs[g] = min((g + 1) chunk, rows)): the wgrad GEMM then sums each chunk apart.
struct SplitArgs {
  const void* in;
  void* out;
  long long rows;
  long long cols;
  long long ld_out;
  long long block_stride;
  int blocks;
  unsigned char pattern[kMaxBlocks];
  int chunk;
  int* offs;
};
CAKE_CONTRACT_SIZE(SplitArgs, 72);
CAKE_CONTRACT_FIELD(SplitArgs, block_stride, 40);
CAKE_CONTRACT_FIELD(SplitArgs, blocks, 48);
CAKE_CONTRACT_FIELD(SplitArgs, pattern, 52);
CAKE_CONTRACT_FIELD(SplitArgs, chunk, 60);
CAKE_CONTRACT_FIELD(SplitArgs, offs, 64);

// wgrad's reduction over T runs in chunks of this many rows, each summed into its own FP32
// product: the tensor cores' FP32 accumulation drifts with the length of a sum (on the H100,
// 1.2e-4 relative over 32768-row sums, against the FP32 budget's 5e-5), and a sum of at most
// kWgradChunk rows stays well inside the budget. The chunks' products are added in the sum.
constexpr int kWgradChunk = 4096;

// sum: out[i] = sum of parts[p * n + i] over the blocks, the last block first (the parts'
// products from the smallest up, chunk by chunk from the last), then, accumulating, out[i] +
// that sum, rounded once more.
// n % kSumVec == 0; pointers 16-byte aligned.
struct SumArgs {
  const float* parts;
  float* out;
  long long n;
  int blocks;
  int reserved;
};
CAKE_CONTRACT_SIZE(SumArgs, 32);
CAKE_CONTRACT_FIELD(SumArgs, n, 16);
CAKE_CONTRACT_FIELD(SumArgs, blocks, 24);

}  // namespace cake::router
