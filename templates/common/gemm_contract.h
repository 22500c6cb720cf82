// The BF16 GEMM kernels' host/device contract: the argument structs, the op encoding, the
// sm90 programs' shared memory, counters and tail-split workspace. The kernels
// (sm90_gemm.cuh, smxx_gemm.cuh) compute a GEMM over groups of rows; the families that
// serve GEMMs include this from their codegen spec (launch geometry in the registry) and
// their binder (through runtime/ops/gemm_kernels.hpp).
#pragma once
#include "contract_base.h"

namespace cake::gemm {

// The templates' kOp: Y = X W^T, dX = G W, dW = G^T X.
// Groups: `offs` [E] holds the cumulative group ends (device memory, read by the kernels
// only); null `offs` means E groups of m / E rows each (a dense GEMM: E = 1; a batch of
// contiguous heads: E = the batch).
constexpr int kOpFwd = 0, kOpDgrad = 1, kOpWgrad = 2;

// A CUtensorMap, passed by value inside the __grid_constant__ argument struct: the TMA
// instructions take its address in parameter space.
struct alignas(64) TmaDesc {
  unsigned long long words[16];
};
CAKE_CONTRACT_SIZE(TmaDesc, 128);

// sm90 programs: a producer warpgroup and two consumer warpgroups of 64 rows each.
constexpr int kSm90Threads = 384;

// Dynamic shared memory of an sm90 program: the stage ring of A and B tiles (128-byte rows),
// four 8 KB epilogue slices (two per consumer), 1024-byte alignment slack, then barriers,
// the tile ring and the wgrad group order in the last 1 KB.
CAKE_HOST_DEVICE constexpr int sm90_smem_bytes(int bm, int bn, int stages) {
  return stages * (bm + bn) * 128 + 4 * 8192 + 2048;
}

// The int32 counters an sm90 launch with the dynamic schedule owns (zero at launch, zero
// again when it ends): tiles handed out and CTAs done, then one flag per slot of the tail
// split, which sums the parts of a split tile through one FP32 tile of workspace per slot.
constexpr int kScheduleCounters = 2, kMaxSplitSlots = 1022;
constexpr int kCounterInts = kScheduleCounters + kMaxSplitSlots;
constexpr int kMaxSplitParts = 4;

// The sm90 kernel's argument. `sched` null: round-robin tiles (clusters of 2 need none);
// `split_ws` null: no tail split, else split_ctas x tile_m x tile_n floats, planned for
// `split_ctas` CTAs (the device's SMs, whatever the grid).
struct Sm90Args {
  TmaDesc a, b, out_map;
  void* out;  // OutT (bf16 or float)
  const int* offs;
  int* sched;
  int groups, m, n, k;
  float* split_ws;
  int split_ctas;
};
CAKE_CONTRACT_SIZE(Sm90Args, 448);
CAKE_CONTRACT_FIELD(Sm90Args, b, 128);
CAKE_CONTRACT_FIELD(Sm90Args, out_map, 256);
CAKE_CONTRACT_FIELD(Sm90Args, out, 384);
CAKE_CONTRACT_FIELD(Sm90Args, groups, 408);
CAKE_CONTRACT_FIELD(Sm90Args, k, 420);
CAKE_CONTRACT_FIELD(Sm90Args, split_ws, 424);
CAKE_CONTRACT_FIELD(Sm90Args, split_ctas, 432);

// Portable programs (sm_80+): bf16 A and B tiles of every stage in shared memory.
CAKE_HOST_DEVICE constexpr int portable_smem_bytes(int bm, int bn, int bk, int stages) {
  return stages * (bm + bn) * bk * 2;
}

// The portable kernel's argument: a, b bf16; out OutT.
struct PortableArgs {
  const void* a;
  const void* b;
  void* out;
  const int* offs;
  int groups, m, n, k;
};
CAKE_CONTRACT_SIZE(PortableArgs, 48);
CAKE_CONTRACT_FIELD(PortableArgs, offs, 24);
CAKE_CONTRACT_FIELD(PortableArgs, k, 44);

}  // namespace cake::gemm
