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
// only); null `offs` means E groups of uniform_group_rows(m, E) rows each, the last one
// shorter where E does not divide m (a dense GEMM: E = 1; a batch of contiguous heads: E = the
// batch; a wgrad split over its rows: E = the parts).
constexpr int kOpFwd = 0, kOpDgrad = 1, kOpWgrad = 2;
CAKE_HOST_DEVICE constexpr int uniform_group_rows(int m, int groups) { return (m + groups - 1) / groups; }

// The non-deterministic wgrad split (sm90 kReduceGroups: every group's tiles reduce-add into
// the output of group 0, in the order they finish): T's rows as `parts` null-offs groups, as
// many as fill the SMs with one wave of tiles, each of at least kMinReducePartRows rows (an
// FP32 tile's reduce-add into L2 against its share of the loads), and more where that leaves
// parts over kChainRows rows (below).
constexpr int kMinReducePartRows = 1024;

// FP32 wgrad sums a tile over at most kChainRows rows in one run of the tensor cores' FP32
// accumulation, whose error grows with the length of the run (about 1.2e-9 a row relative on
// random data, H200: 1.5e-4 at 131072 rows against the FP32 budget of 5e-5). A longer run is
// cut into segments whose sums are added in order with round-to-nearest FP32 adds, through
// the CTA's chain tile of workspace (programs with "chain"; Sm90Args::chain_rows,
// PortableArgs::chain_rows). The reduce split's parts (below) are at most this long; routes
// whose groups are short by construction (the router's chunks) take programs without it.
constexpr int kChainRows = 16384;

CAKE_HOST_DEVICE constexpr int reduce_parts(int ctas, int tiles, int rows) {
  const int by_waves = tiles > 0 ? ctas / tiles : 1, by_rows = rows / kMinReducePartRows;
  const int by_chain = rows / kChainRows + (rows % kChainRows != 0);  // parts of kChainRows at most
  int p = by_waves < by_rows ? by_waves : by_rows;
  p = p < by_chain ? by_chain : p;
  return p < 1 ? 1 : p;
}

// A CUtensorMap, passed by value inside the __grid_constant__ argument struct: the TMA
// instructions take its address in parameter space.
struct alignas(64) TmaDesc {
  unsigned long long words[16];
};
CAKE_CONTRACT_SIZE(TmaDesc, 128);

// sm90 programs: a producer warpgroup and two consumer warpgroups of 64 rows each.
constexpr int kSm90Threads = 384;

// Dynamic shared memory of an sm90 program: the stage ring of A and B tiles (128-byte rows;
// `b_parts` B tiles a stage), four 8 KB epilogue slices (two per consumer), 1024-byte
// alignment slack, then barriers, the tile ring and the wgrad group order in the last 1 KB.
CAKE_HOST_DEVICE constexpr int sm90_smem_bytes(int bm, int bn, int stages, int b_parts = 1) {
  return stages * (bm + b_parts * bn) * 128 + 4 * 8192 + 2048;
}

// The int32 counters an sm90 launch with the dynamic schedule owns (zero at launch, zero
// again when it ends): tiles handed out and CTAs done, then one flag per slot (split tile) of
// the tail split, which sums a tile's parts through FP32 tiles of workspace: wgrad one a
// slot, passed from part to part; fwd and dgrad one a part but the last (row_op_split).
// FP32 wgrad programs with "chain" have a second FP32 tile per SM after those: a CTA's chain
// tile, the running sum of its tile's segments (kChainRows).
constexpr int kScheduleCounters = 2, kMaxSplitSlots = 1022;
constexpr int kCounterInts = kScheduleCounters + kMaxSplitSlots;
constexpr int kMaxSplitParts = 4;

// The tail split: a launch of `work` tiles of one length on `ctas` SMs runs its last wave's
// (work mod ctas) tiles as parts over equal shares of their k blocks, whose sums are added in
// part order (deterministic stream-K). The kernel decides on the device (sm90_gemm.cuh,
// Scheduler); a host can tell from the dims what it will do when the tiles are known (uniform
// groups). `ctas` is the device's SM count, not the grid's, so a capped grid computes the same
// bits.
struct TailSplit {
  int parts = 1, tiles = 0;  // parts 1: no split
};

// The parts (at most `most`, kMaxSplitParts) that minimise the tail, ceil(p r / ctas) / p tile
// times, for the last r = work mod ctas tiles.
CAKE_HOST_DEVICE constexpr TailSplit split_last(int ctas, int work, int most) {
  const int r = work % ctas;
  if (r == 0) return {};
  most = most < kMaxSplitParts ? most : kMaxSplitParts;
  int best = 1;
  for (int p = 2; p <= most; ++p)
    if ((p * r + ctas - 1) / ctas * best < (best * r + ctas - 1) / ctas * p) best = p;
  if (best == 1) return {};
  return {best, r};
}

// A wgrad part's rows, at least, for tiles of bm x bn: passing the 128 KB sum of a 128 x 256
// tile on costs a part about as much as a tile's idle tail saves until parts are about 4096
// rows long (docs/decisions.md: shorter parts ran slower than no split on the H200); a
// smaller tile passes a smaller sum on, so its parts may be shorter, in proportion (128 x 128:
// 2048 rows; 1024 measured slower at T = 4097, its three passes in a chain costing more than
// the SMs they fill gain; docs/decisions.md).
constexpr int kMinSplitPartRows = 4096;
CAKE_HOST_DEVICE constexpr int min_split_part_rows(int bm, int bn) {
  return kMinSplitPartRows * (bm * bn / 64) / (128 * 256 / 64);
}

// Workspace bytes per SM of an sm90 program with the dynamic schedule: a split slot's FP32
// tile, and with `chain` (an FP32 wgrad program whose groups may be long) a chain tile besides.
CAKE_HOST_DEVICE constexpr int sm90_workspace_per_sm(int bm, int bn, bool chain) {
  return (chain ? 2 : 1) * bm * bn * 4;
}

// wgrad walks its groups largest first when it has at most this many (the order table's room
// in shared memory); it splits its tail only then.
constexpr int kMaxSortedGroups = 256;

// wgrad over groups of one size (`rows` each; tiles as long as their group): the last wave
// splits into parts of at least `min_rows` rows (min_split_part_rows of the tile).
CAKE_HOST_DEVICE constexpr TailSplit even_wgrad_split(int ctas, int work, int rows, int min_rows) {
  if (ctas <= 0 || ctas > kMaxSplitSlots || min_rows <= 0) return {};
  return split_last(ctas, work, rows / min_rows);
}

// fwd and dgrad: every tile runs over all of K (N), so the SMs run in step, and a launch of a
// few waves of tiles loses up to a tile's time of its few on the last part wave. Under
// kRowOpSplitWaves waves its last tiles split, into parts of at least kRowOpSplitBlocks k
// blocks of 64. More waves: the tail is a small share, and splitting every launch measured
// 0.5-1.3 % slower on the bench's rows (docs/decisions.md). The parts pass their sums side by
// side, each but the last through an FP32 tile of its own, so a split may use at most `ctas`
// tiles of workspace: tiles x (parts - 1) <= ctas (fewer parts otherwise).
constexpr int kRowOpSplitWaves = 8, kRowOpSplitBlocks = 16;
CAKE_HOST_DEVICE constexpr TailSplit row_op_split(int ctas, int total, int k_blocks) {
  if (ctas <= 0 || ctas > kMaxSplitSlots || total >= kRowOpSplitWaves * ctas) return {};
  for (int most = k_blocks / kRowOpSplitBlocks; most > 1; --most) {
    const TailSplit split = split_last(ctas, total, most);
    if (split.tiles * (split.parts - 1) <= ctas) return split;
  }
  return {};
}

// The sm90 kernel's argument. `sched` null: round-robin tiles (clusters of 2 need none);
// `split_ws` null: no tail split, else split_ctas x tile_m x tile_n floats, planned for
// `split_ctas` CTAs (the device's SMs, whatever the grid); `chain_rows` > 0 (FP32 wgrad, a
// multiple of 64): as many floats again follow, CTA i's chain tile at tile i, and a tile's
// rows are summed in segments of chain_rows (kChainRows). The row-grouped operands (fwd: A and
// out, dgrad: A and out, wgrad: A and B) are strided rows of their groups:
//   heads 0: 3-D maps {cols, m, 1} over rows that follow each other (a group's rows start at
//     its first row; row strides are the maps'); `out_ld` is out's row stride in elements, for
//     the masked stores of a row block that ends inside its group;
//   heads 1: uniform groups of m / groups rows as 3-D maps {cols, m / groups, groups}, each
//     group (a head) anywhere in memory (heads as strided views of [T, B, K]); a box past a
//     head's last row reads zeros and stores nothing, so no store is masked.
struct Sm90Args {
  TmaDesc a, b, out_map;
  void* out;  // OutT (bf16 or float)
  const int* offs;
  int* sched;
  int groups, m, n, k;
  float* split_ws;
  int split_ctas;
  int heads, out_ld;
  int chain_rows;
};
CAKE_CONTRACT_SIZE(Sm90Args, 448);
CAKE_CONTRACT_FIELD(Sm90Args, b, 128);
CAKE_CONTRACT_FIELD(Sm90Args, out_map, 256);
CAKE_CONTRACT_FIELD(Sm90Args, out, 384);
CAKE_CONTRACT_FIELD(Sm90Args, groups, 408);
CAKE_CONTRACT_FIELD(Sm90Args, k, 420);
CAKE_CONTRACT_FIELD(Sm90Args, split_ws, 424);
CAKE_CONTRACT_FIELD(Sm90Args, split_ctas, 432);
CAKE_CONTRACT_FIELD(Sm90Args, heads, 436);
CAKE_CONTRACT_FIELD(Sm90Args, out_ld, 440);
CAKE_CONTRACT_FIELD(Sm90Args, chain_rows, 444);

// Portable programs (sm_80+): bf16 A and B tiles of every stage in shared memory.
CAKE_HOST_DEVICE constexpr int portable_smem_bytes(int bm, int bn, int bk, int stages) {
  return stages * (bm + bn) * bk * 2;
}

// The portable kernel's argument: a, b bf16; out OutT. A row-grouped operand (fwd: a and out,
// dgrad: a and out, wgrad: a and b) has its row stride in `*_ld` elements; with `heads` its
// group g's row t is at g * `*_head` + t * `*_ld` (uniform groups, heads anywhere), else at
// (the group's first row + t) * `*_ld`. The other operands are contiguous.
// FP32 wgrad programs with "chain" sum long groups in segments of `chain_rows` (kChainRows;
// 0: one run) through `chain`, one FP32 tile per CTA of the grid, which the host keeps within
// the tiles the workspace holds.
struct PortableArgs {
  const void* a;
  const void* b;
  void* out;
  const int* offs;
  int groups, m, n, k;
  long long a_head, b_head, out_head;
  int a_ld, b_ld, out_ld, heads;
  float* chain;
  int chain_rows, pad;
};
CAKE_CONTRACT_SIZE(PortableArgs, 104);
CAKE_CONTRACT_FIELD(PortableArgs, offs, 24);
CAKE_CONTRACT_FIELD(PortableArgs, k, 44);
CAKE_CONTRACT_FIELD(PortableArgs, a_head, 48);
CAKE_CONTRACT_FIELD(PortableArgs, heads, 84);
CAKE_CONTRACT_FIELD(PortableArgs, chain, 88);
CAKE_CONTRACT_FIELD(PortableArgs, chain_rows, 96);

// Workspace bytes per SM of a portable FP32 wgrad program with "chain": the chain tiles of
// kPortableChainCtas CTAs (the tile's natural occupancy; the grid keeps to it).
constexpr int kPortableChainCtas = 2;
CAKE_HOST_DEVICE constexpr int portable_workspace_per_sm(int bm, int bn) { return kPortableChainCtas * bm * bn * 4; }

}  // namespace cake::gemm
