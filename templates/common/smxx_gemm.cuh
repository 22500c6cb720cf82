// Portable grouped GEMM (sm_80+; MoE experts, or one group: a dense GEMM): mma.sync m16n8k16
// bf16 -> fp32, ldmatrix, and a kStages-deep cp.async shared-memory pipeline. The fallback for
// parts without wgmma.
//
// Semantics (torch._grouped_mm with device offsets). Everything row-major; the row-grouped
// operands (X, G, Y, dX) with the row strides of PortableArgs, per head with `heads`.
// offs[E] holds the cumulative group ends; group e is rows offs[e-1] .. offs[e]-1 (offs[-1] = 0);
// null offs: E groups of uniform_group_rows(M, E) rows each (gemm_contract.h).
//   kOp 0 fwd:   a = X [M, K], b = W [E, N, K], out = Y  [M, N]:     Y_e  = X_e W_e^T
//   kOp 1 dgrad: a = G [M, N], b = W [E, N, K], out = dX [M, K]:     dX_e = G_e W_e
//   kOp 2 wgrad: a = G [M, N], b = X [M, K],    out = dW [E, N, K]:  dW_e = G_e^T X_e
// Rows past offs[E-1] are neither read for an output nor written. wgrad of an empty group
// writes zeros, or with kAccumulate leaves out[e] untouched (its tiles are not even issued).
//
// Generic form. Every op is C[i][j] = sum_r A(i, r) B(j, r) over a kBM x kBN tile of C. An
// operand is either reduction-contiguous (RC: fwd X and W, dgrad G) or outer-contiguous (OC:
// dgrad W, used as [N = reduction][K], and both wgrad operands, reduced along M). RC tiles
// sit in shared memory as [outer][kBK] and feed mma through ldmatrix; OC tiles as [kBK][outer]
// and feed it through ldmatrix.trans, so no operand is ever transposed by scalar code.
//
// Shared memory, per stage: A tile then B tile, kStages stages (portable_smem_bytes). Rows are
// 16-byte chunks XOR-swizzled (swz below), so the 8 row addresses of every ldmatrix phase and
// the 8 chunks of every cp.async phase hit 8 distinct 16-byte bank groups: conflict-free.
//
// Pipeline. cp.async.cg 16-byte copies; a copy past any bound (tile rows past the group end,
// reduction past K / N / the group end, columns past N / K) is issued with src-size 0, so
// shared memory gets zeros and nothing out of range is read: rows of the next group or of the
// next expert never leak into a reduction. kStages - 1 k-tiles are in flight while one is
// multiplied; one __syncthreads per k-tile.
//
// Scheduling. Persistent: gridDim.x CTAs (any number; SMs x occupancy is the natural choice)
// walk tiles blockIdx.x, blockIdx.x + gridDim.x, ...; each CTA decodes a tile index into
// (group, m block, n block) by walking offs forward (a CTA's tiles only increase, so its group
// cursor only moves forward), so the grid never depends on group sizes and nothing syncs with
// the host. Within a group, m blocks go in bands of kBand so that CTAs running together share
// operand tiles in L2.
//
// Determinism. Each output element is reduced by one thread in one fixed order (k-tiles in
// order, mma k-steps in order), whatever the grid: no split-K, no atomics. kAccumulate adds the
// finished fp32 accumulator to the old value with one fp32 add, rounded once to OutT.
//
// FP32 wgrad (a reduction over all of a group's rows) with args.chain_rows sums a tile in
// segments of that many rows (gemm_contract.h kChainRows: the mma's own accumulation drifts
// over longer runs, 1.5e-4 relative at 131072 rows against the FP32 budget of 5e-5). At a
// segment's end each thread adds its accumulators into its CTA's chain tile (the first one
// stores), in order and with round-to-nearest adds, and restarts them from zero; the last
// segment's accumulators add the chain tile's sum before the epilogue. Each thread reads and
// writes only its own elements of the tile, so no barrier is needed and the bits do not
// depend on the grid.
//
// Contract (the host checks it): K % 8 == 0, N % 8 == 0, a, b, out 16-byte aligned, M, N, K,
// E >= 1, offs non-decreasing with offs[E-1] <= M (out-of-range offsets are clamped, never
// followed). Block: kWarpsM * kWarpsN * 32 threads; dynamic shared memory:
// portable_smem_bytes (gemm_contract.h; above 48 KB the host raises the function's limit);
// grid: SMs x occupancy (any grid is correct, the bits do not depend on it; with a chain, at
// most as many CTAs as its workspace has chain tiles).
//
// Tiles. kBM, kBN multiples of 64, kBK 32 or 64, warp tile (kBM / kWarpsM) x (kBN / kWarpsN)
// a multiple of 16 x 16. Recommended: 128 x 128 x 32, 4 stages, 2 x 2 warps (64 x 64 warp
// tiles, 128 threads, ~235 registers, 255 for FP32 wgrad, 64 KB: 2 CTAs per SM on A100 and
// H100/H200). On an H200 (E=8, M=65536, N=4096, K=2048): fwd 416, dgrad 427, wgrad (fp32,
// accumulate, measured before its kChainRows segments) 341 TFLOP/s; 128 x 128 x 64 with 3
// stages (96 KB, 2 CTAs only where an SM has >= 192 KB): 404 / 406 / 366. 2 x 4 warps (64 x
// 32 warp tiles) reads shared memory ~1.4x more per mma and ran at ~340; 128 x 256 at one CTA
// per SM ~300-320.
#pragma once
#include "gemm_contract.h"
#include "smxx_types.cuh"

namespace cake::gemm {

namespace detail {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// src-size 0 (pred false): 16 zero bytes, nothing read.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(pred ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kN>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kN) : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk `chunk` of smem row `row`, rows of kCPR chunks. 64-byte rows
// (kCPR 4): two rows per 128-byte line, chunk ^= line % 4. Rows of 128 bytes or more: chunk
// ^= row % 8. Either way 8 consecutive rows at one logical chunk, or 8 consecutive chunks of
// one row, land in 8 distinct bank groups.
template <int kCPR>
__device__ __forceinline__ unsigned swz(int row, int chunk) {
  static_assert(kCPR == 4 || kCPR % 8 == 0, "smem rows of 64 bytes or a multiple of 128");
  if constexpr (kCPR == 4) {
    return static_cast<unsigned>(row * 4 + (chunk ^ ((row >> 1) & 3))) * 16u;
  } else {
    return static_cast<unsigned>(row * kCPR + (chunk ^ (row & 7))) * 16u;
  }
}

// Global -> shared copies of one operand's k-tiles. RC tile: [kOuter][kBK], OC tile:
// [kBK][kOuter]. Thread t owns chunks t, t + kThreads, ...: chunk i sits kRowStep smem rows
// (and kRowStep global rows, either kind) below chunk 0 with the same swizzle key, so one source
// pointer, one destination offset and one reduction counter serve all of them. Its pointer
// advances by one k-tile per load, so loads must be issued for k-tiles 0, 1, 2, ... in order.
template <bool kOC, int kOuter, int kBK, int kThreads>
struct TileLoader {
  static constexpr int kCPR = kOC ? kOuter / 8 : kBK / 8;
  static constexpr int kChunks = kOuter * kBK / 8;
  static constexpr int kIters = kChunks / kThreads;
  static constexpr int kRowStep = kThreads / kCPR;
  static_assert(kChunks % kThreads == 0 && kThreads % kCPR == 0 && kRowStep % 8 == 0,
                "tile chunks must divide evenly over the threads, whole rows of 8 at a time");
  static constexpr unsigned kStageBytes = kOuter * kBK * 2;

  const bf16* src;  // chunk 0's next k-tile
  int ld;           // global row pitch (elements)
  int red_left;     // reduction indices left, counted from chunk 0's first one this k-tile
  unsigned dst;     // chunk 0's byte offset in a stage
  bool ok[kIters];  // outer index in range

  // base[outer * ld + red] (RC) or base[red * ld + outer] (OC); outer in [outer0, outer_end),
  // reduction in [red0, red_end).
  __device__ __forceinline__ void init(const bf16* base, int ld_, int outer0, int outer_end,
                                       int red0, int red_end, int tid) {
    ld = ld_;
    const int row = tid / kCPR, cc = tid % kCPR;
    dst = swz<kCPR>(row, cc);
    if constexpr (kOC) {
      red_left = red_end - red0 - row;
      src = base + static_cast<long long>(red0 + row) * ld + outer0 + cc * 8;
#pragma unroll
      for (int i = 0; i < kIters; ++i) ok[i] = outer0 + cc * 8 < outer_end;
    } else {
      red_left = red_end - red0 - cc * 8;
      src = base + static_cast<long long>(outer0 + row) * ld + red0 + cc * 8;
#pragma unroll
      for (int i = 0; i < kIters; ++i) ok[i] = outer0 + row + i * kRowStep < outer_end;
    }
  }
  // The next k-tile into the stage at smem address `stage`. `safe`: a valid address handed to
  // the zero-fill copies.
  __device__ __forceinline__ void load(unsigned stage, const bf16* safe) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool in_red = kOC ? i * kRowStep < red_left : red_left > 0;
      const bool p = ok[i] && in_red;
      cp_async16(stage + dst + i * kRowStep * kCPR * 16,
                 p ? src + static_cast<long long>(i * kRowStep) * ld : safe, p);
    }
    src += kOC ? static_cast<long long>(kBK) * ld : kBK;
    red_left -= kBK;
  }
};

// CTAs per SM to fit in the register file (64K registers): the fp32 accumulators plus about 64
// registers of fragments and addressing per thread. 128 x 128 tiles on 8 warps get 2 (<= 128
// registers); without the hint ptxas takes ~165 and one CTA per SM, ~20% slower on an H200.
__host__ __device__ constexpr int min_blocks(int threads, int acc_regs) {
  return 65536 / (threads * (acc_regs + 64)) > 1 ? 65536 / (threads * (acc_regs + 64)) : 1;
}

__host__ __device__ constexpr long long cdiv(long long a, long long b) { return (a + b - 1) / b; }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Two adjacent outputs (p 4- or 8-byte aligned): store, or one fp32 add to the old value.
template <typename OutT, bool kAccumulate>
__device__ __forceinline__ void store2(OutT* p, float x, float y);
template <>
__device__ __forceinline__ void store2<float, false>(float* p, float x, float y) {
  *reinterpret_cast<Vec<float, 2>*>(p) = Vec<float, 2>{{x, y}};
}
template <>
__device__ __forceinline__ void store2<float, true>(float* p, float x, float y) {
  Vec<float, 2> o = *reinterpret_cast<const Vec<float, 2>*>(p);
  o.v[0] = __fadd_rn(o.v[0], x);
  o.v[1] = __fadd_rn(o.v[1], y);
  *reinterpret_cast<Vec<float, 2>*>(p) = o;
}
template <>
__device__ __forceinline__ void store2<bf16, false>(bf16* p, float x, float y) {
  *reinterpret_cast<unsigned*>(p) = pack_bf16x2(x, y);
}
template <>
__device__ __forceinline__ void store2<bf16, true>(bf16* p, float x, float y) {
  const unsigned o = *reinterpret_cast<const unsigned*>(p);
  *reinterpret_cast<unsigned*>(p) = pack_bf16x2(__fadd_rn(__uint_as_float(o << 16), x),
                                                __fadd_rn(__uint_as_float(o & 0xffff0000u), y));
}

}  // namespace detail

template <int kOp, typename OutT, bool kAccumulate, int kBM, int kBN, int kBK, int kStages,
          int kWarpsM, int kWarpsN>
__global__ void __launch_bounds__(kWarpsM * kWarpsN * 32,
                                  detail::min_blocks(kWarpsM * kWarpsN * 32,
                                                     kBM * kBN / (kWarpsM * kWarpsN * 32)))
    portable_gemm(const PortableArgs args) {
  using namespace detail;
  const bf16* __restrict__ const a = static_cast<const bf16*>(args.a);
  const bf16* __restrict__ const b = static_cast<const bf16*>(args.b);
  OutT* __restrict__ const out = static_cast<OutT*>(args.out);
  const int* __restrict__ const offs = args.offs;
  const int num_groups = args.groups, m = args.m, n = args.n, k = args.k;
  static_assert(kOp == kOpFwd || kOp == kOpDgrad || kOp == kOpWgrad, "kOp");
  static_assert(kBK == 32 || kBK == 64, "kBK: 32 or 64");
  static_assert(kStages >= 2, "kStages >= 2");
  static_assert(kBM % 64 == 0 && kBN % 64 == 0, "kBM, kBN: multiples of 64");
  constexpr int kThreads = kWarpsM * kWarpsN * 32;
  constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // warp tile
  static_assert(kWM % 16 == 0 && kWN % 16 == 0, "warp tile: multiples of 16 x 16");
  constexpr int kMI = kWM / 16, kNI = kWN / 8;  // mma tiles per warp
  constexpr bool kAOC = kOp == kOpWgrad, kBOC = kOp != kOpFwd;
  using LA = TileLoader<kAOC, kBM, kBK, kThreads>;
  using LB = TileLoader<kBOC, kBN, kBK, kThreads>;
  constexpr int kBand = 8;  // m blocks per raster band

  extern __shared__ __align__(128) unsigned char cake_gemm_smem[];
  const unsigned smem_a = smem_u32(cake_gemm_smem);
  const unsigned smem_b = smem_a + kStages * LA::kStageBytes;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;

  // Per-thread ldmatrix byte offsets within a stage, per (mma tile, k-step of 16).
  // RC: lanes 0-15 rows 0-15 at chunk 0, lanes 16-31 the same rows at chunk 1 (x4 = the
  // a0..a3 / two-n8 b0,b1 fragments). OC (.trans): lane group q = lane / 8 picks the k half
  // and the outer half of the 16 x 16 block.
  const int q = lane >> 3, r8 = lane & 7;
  unsigned a_off[kMI][kBK / 16], b_off[kNI / 2][kBK / 16];
#pragma unroll
  for (int s = 0; s < kBK / 16; ++s) {
#pragma unroll
    for (int i = 0; i < kMI; ++i) {
      if constexpr (kAOC) {
        a_off[i][s] = swz<LA::kCPR>(s * 16 + (q >> 1) * 8 + r8, (wm0 + i * 16) / 8 + (q & 1));
      } else {
        a_off[i][s] = swz<LA::kCPR>(wm0 + i * 16 + (lane & 15), s * 2 + (lane >> 4));
      }
    }
#pragma unroll
    for (int j = 0; j < kNI / 2; ++j) {
      if constexpr (kBOC) {
        b_off[j][s] = swz<LB::kCPR>(s * 16 + (q & 1) * 8 + r8, (wn0 + j * 16) / 8 + (q >> 1));
      } else {
        b_off[j][s] = swz<LB::kCPR>(wn0 + j * 16 + (q >> 1) * 8 + r8, s * 2 + (q & 1));
      }
    }
  }

  // FP32 wgrad: the CTA's chain tile and its segments' length in k tiles (0: one run).
  constexpr bool kChained = kOp == kOpWgrad && sizeof(OutT) == 4;
  static_assert(!kChained || kChainRows % kBK == 0, "segments of whole k tiles");
  float4* const chain = kChained && args.chain != nullptr
                            ? reinterpret_cast<float4*>(args.chain + static_cast<long long>(blockIdx.x) * (kBM * kBN))
                            : nullptr;
  const int seg_kt = chain != nullptr && args.chain_rows > 0 ? args.chain_rows / kBK : 0;

  const int out_cols = kOp == kOpFwd ? n : k;
  const int nbn = static_cast<int>(cdiv(out_cols, kBN));
  const int nbm_w = static_cast<int>(cdiv(n, kBM));  // wgrad: m blocks over N
  // Tile indices are int: a tile holds kBM * kBN >= 4096 outputs, so any output that fits in
  // memory has far fewer than 2^31 tiles (the per-group padding adds at most E * nbn).
  auto tiles_of = [&](int rows) -> int {
    if constexpr (kOp == kOpWgrad) {
      return (kAccumulate && rows == 0) ? 0 : nbm_w * nbn;
    } else {
      return static_cast<int>(cdiv(rows, kBM)) * nbn;
    }
  };

  int e = -1, g0 = 0, g1 = 0;  // group cursor: rows [g0, g1)
  int t_begin = 0, t_end = 0;
  for (int tile = blockIdx.x;; tile += gridDim.x) {
    while (tile >= t_end && e < num_groups) {
      if (++e >= num_groups) break;
      g0 = g1;
      g1 = offs == nullptr ? imin((e + 1) * uniform_group_rows(m, num_groups), m) : imin(imax(offs[e], g0), m);
      t_begin = t_end;
      t_end += tiles_of(g1 - g0);
    }
    if (e >= num_groups) break;

    // tile -> (m block, n block) of group e, banded raster.
    const int rows = g1 - g0;
    const int nbm = kOp == kOpWgrad ? nbm_w : static_cast<int>(cdiv(rows, kBM));
    const int local = tile - t_begin;
    const int band_tiles = kBand * nbn;
    const int band = local / band_tiles;
    const int within = local - band * band_tiles;
    const int band_rows = imin(kBand, nbm - band * kBand);
    const int mb = band * kBand + within % band_rows;
    const int nb = within / band_rows;

    LA la;
    LB lb;
    int red_len;
    const long long w_off = static_cast<long long>(e) * n * k;
    // Row-grouped operands (PortableArgs): a head's rows from its own base, or the group's rows
    // [g0, g1) of all rows.
    const bool heads = args.heads != 0;
    const int r0 = heads ? 0 : g0, r1 = heads ? rows : g1;
    const bf16* const a_rows = heads ? a + e * args.a_head : a;
    if constexpr (kOp == kOpFwd) {
      la.init(a_rows, args.a_ld, r0 + mb * kBM, r1, 0, k, tid);
      lb.init(b + w_off, k, nb * kBN, n, 0, k, tid);
      red_len = k;
    } else if constexpr (kOp == kOpDgrad) {
      la.init(a_rows, args.a_ld, r0 + mb * kBM, r1, 0, n, tid);
      lb.init(b + w_off, k, nb * kBN, k, 0, n, tid);
      red_len = n;
    } else {
      la.init(a_rows, args.a_ld, mb * kBM, n, r0, r1, tid);
      lb.init(heads ? b + e * args.b_head : b, args.b_ld, nb * kBN, k, r0, r1, tid);
      red_len = rows;
    }
    const int ktiles = static_cast<int>(cdiv(red_len, kBK));

    float acc[kMI][kNI][4];
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ktiles) {
        la.load(smem_a + s * LA::kStageBytes, a);
        lb.load(smem_b + s * LB::kStageBytes, b);
      }
      cp_async_commit();
    }

    int rs = 0;  // stage read now; the one written is rs - 1 (mod kStages)
    auto k_tile = [&](int kt) {
      cp_async_wait<kStages - 2>();  // k-tile kt has landed (this thread's copies) ...
      __syncthreads();               // ... everyone's, and stage ws is no longer read
      const int ws = rs == 0 ? kStages - 1 : rs - 1;
      if (kt + kStages - 1 < ktiles) {
        la.load(smem_a + ws * LA::kStageBytes, a);
        lb.load(smem_b + ws * LB::kStageBytes, b);
      }
      cp_async_commit();

      const unsigned sa = smem_a + rs * LA::kStageBytes;
      const unsigned sb = smem_b + rs * LB::kStageBytes;
#pragma unroll
      for (int s = 0; s < kBK / 16; ++s) {
        unsigned af[kMI][4], bfr[kNI][2];
#pragma unroll
        for (int i = 0; i < kMI; ++i) {
          if constexpr (kAOC) {
            ldsm_x4_t(af[i], sa + a_off[i][s]);
          } else {
            ldsm_x4(af[i], sa + a_off[i][s]);
          }
        }
#pragma unroll
        for (int j = 0; j < kNI / 2; ++j) {
          unsigned t[4];
          if constexpr (kBOC) {
            ldsm_x4_t(t, sb + b_off[j][s]);
          } else {
            ldsm_x4(t, sb + b_off[j][s]);
          }
          bfr[2 * j][0] = t[0];
          bfr[2 * j][1] = t[1];
          bfr[2 * j + 1][0] = t[2];
          bfr[2 * j + 1][1] = t[3];
        }
#pragma unroll
        for (int i = 0; i < kMI; ++i)
#pragma unroll
          for (int j = 0; j < kNI; ++j) mma_bf16(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
      }
      rs = rs == kStages - 1 ? 0 : rs + 1;
    };
    if constexpr (kChained) {
      // Runs of seg_kt k tiles (a chain's segments; one run without a chain), the accumulators
      // flushed into the chain tile between them. The pipeline runs on across a flush.
      const int run_kt = seg_kt > 0 ? seg_kt : ktiles;
#pragma unroll 1
      for (int kt0 = 0; kt0 < ktiles; kt0 += run_kt) {
        const int kt1 = imin(kt0 + run_kt, ktiles);
#pragma unroll 1
        for (int kt = kt0; kt < kt1; ++kt) k_tile(kt);
        if (kt1 == ktiles) break;
#pragma unroll
        for (int i = 0; i < kMI; ++i)
#pragma unroll
          for (int j = 0; j < kNI; ++j) {
            float4* const p = chain + (i * kNI + j) * kThreads + tid;
            float4 v = make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
            if (kt0 != 0) {
              const float4 r = __ldcg(p);
              v = make_float4(r.x + v.x, r.y + v.y, r.z + v.z, r.w + v.w);
            }
            __stcg(p, v);
            acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
          }
      }
    } else {
#pragma unroll 1
      for (int kt = 0; kt < ktiles; ++kt) k_tile(kt);
    }
    cp_async_wait<0>();  // only empty groups remain; keeps the next tile's accounting clean
    if constexpr (kChained) {
      if (seg_kt > 0 && ktiles > seg_kt) {  // the chain's sum, then the last segment's
#pragma unroll
        for (int i = 0; i < kMI; ++i)
#pragma unroll
          for (int j = 0; j < kNI; ++j) {
            const float4 r = __ldcg(chain + (i * kNI + j) * kThreads + tid);
            acc[i][j][0] = r.x + acc[i][j][0], acc[i][j][1] = r.y + acc[i][j][1];
            acc[i][j][2] = r.z + acc[i][j][2], acc[i][j][3] = r.w + acc[i][j][3];
          }
      }
    }

    // Epilogue straight from the fragments: c0,c1 at (g, 2t..2t+1), c2,c3 at (g + 8, ..).
    // cols_valid is a multiple of 8, so a pair is all in or all out.
    const int ld_out = kOp == kOpWgrad ? k : args.out_ld;
    const int cols_valid = out_cols - nb * kBN;
    const int rows_valid = (kOp == kOpWgrad ? n : rows) - mb * kBM;
    const long long out_row0 = (kOp == kOpWgrad ? static_cast<long long>(e) * n : r0) + mb * kBM;
    OutT* obase = out + (kOp != kOpWgrad && heads ? e * args.out_head : 0) + out_row0 * ld_out +
                  static_cast<long long>(nb) * kBN;
    const int g = lane >> 2, t2 = (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < kMI; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm0 + i * 16 + g + h * 8;
        if (row < rows_valid) {
          OutT* orow = obase + static_cast<long long>(row) * ld_out;
#pragma unroll
          for (int j = 0; j < kNI; ++j) {
            const int col = wn0 + j * 8 + t2;
            if (col < cols_valid) store2<OutT, kAccumulate>(orow + col, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          }
        }
      }
    }
    __syncthreads();  // the next tile's prologue overwrites stages still read by slow warps
  }
}

}  // namespace cake::gemm
