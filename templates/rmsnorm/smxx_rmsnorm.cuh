// RMSNorm forward and backward over bf16 rows, with a deterministic two-stage weight gradient.
//
// Layout. A block has kThreads threads (a power of two, 32..1024). One row is covered by a
// "row group" of kTPR = min(kThreads, pow2ceil(kH / kVec)) threads, so a block works on
// kRows = kThreads / kTPR rows at once (kH == 0, runtime h: always one row per block). Lane l
// of a row group owns the kVec-element vectors l, l + kTPR, l + 2 kTPR, ... of every row it
// touches, so each column always meets the same thread: the row and the weight stay in
// registers, and the backward keeps its dw column sums in registers (shared memory only to
// merge the row groups' sums at a chunk's end when kRows > 1). The first kSlots vectors of a
// lane are held in registers; when the row has more (kH == 0 with a long row, or a kH too
// large for the register cap) the rest is streamed twice.
//
// Launch: fwd: any grid (grid-stride), ceil(rows / kRows) blocks at most is useful. bwd: any
// grid (grid-stride over chunks), at most ceil(rows / kChunkRows) blocks; partial holds
// ceil(rows / kChunkRows) x h floats. dw_finalize: any grid, ceil(h / 8) blocks is natural.
// Blocks are kThreads wide; all shared memory is static (< 48 KB).
//
// Contract (the host checks it): x, residual, y, h_out, dy, hin, dx, w and partial 16-byte
// aligned (the SASS uses 128-bit accesses; float w and partial are typed as 32-byte vectors,
// which cudaMalloc'd buffers satisfy); h and every row stride multiples of kVec; with kH > 0
// the runtime h is ignored. In place is allowed (y or h_out == x or residual, dx == dy or
// hin, with equal strides): every element is read and written by one thread, reads first.
//
// Arithmetic: everything in FP32 with explicit _rn intrinsics, so the bits do not depend on
// --fmad or --use_fast_math. rstd = __frcp_rn(__fsqrt_rn(mean + eps)), i.e. a correctly
// rounded 1.0f / sqrtf (not the approximate rsqrtf; it is once per row, so free).
#pragma once
#include "rmsnorm_contract.h"
#include "smxx_types.cuh"

namespace cake::rms {

__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }

// Row-to-thread mapping shared by fwd and bwd. A thread keeps up to kFitElems bf16 of a row
// in registers; a longer row (kH == 0, or kH too large) keeps kStreamElems and streams the
// rest twice, since that path holds a second batch in flight and would otherwise spill.
template <int kH, int kVec, int kThreads, int kFitElems, int kStreamElems>
struct Layout {
  static_assert(kVec == 2 || kVec == 4 || kVec == 8, "kVec: bf16 per access, 8 = 16 bytes");
  static_assert(kThreads >= 32 && kThreads <= 1024 && (kThreads & (kThreads - 1)) == 0,
                "kThreads: a power of two in 32..1024");
  static_assert(kH >= 0 && kH % kVec == 0, "kH: 0 (runtime h) or a multiple of kVec");
  static constexpr int kNVec = kH / kVec;
  static constexpr int kTPR = threads_per_row(kH, kVec, kThreads);
  static constexpr int kRows = rows_per_block(kH, kVec, kThreads);
  static constexpr int kNeed = kH > 0 ? (kNVec + kTPR - 1) / kTPR : 0;
  static constexpr bool kFits = kH > 0 && kNeed <= cmax(1, kFitElems / kVec);
  static constexpr int kSlots = kFits ? kNeed : cmax(1, kStreamElems / kVec);
  static constexpr int kWarpsPerRow = kTPR > 32 ? kTPR / 32 : 1;
};

// ---- bf16 pairs: rows move as 32-bit words holding two bf16 (element 2k in the low half).
template <int kVec>
using BVec = Vec<unsigned, kVec / 2>;

__device__ __forceinline__ float bf_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
template <int kVec>
__device__ __forceinline__ float bf_get(const BVec<kVec>& p, int i) {
  return (i & 1) ? bf_hi(p.v[i >> 1]) : bf_lo(p.v[i >> 1]);
}
// Two RNE conversions in one instruction; same rounding as cake::from_f32<bf16>.
__device__ __forceinline__ unsigned bf_pack(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <int kVec>
__device__ __forceinline__ BVec<kVec> ldb(const bf16* row, int v) {
  return reinterpret_cast<const BVec<kVec>*>(row)[v];
}
template <int kVec>
__device__ __forceinline__ void stb(bf16* row, int v, const BVec<kVec>& p) {
  reinterpret_cast<BVec<kVec>*>(row)[v] = p;
}

// Weight vector in its stored dtype (bf16 stays packed: half the registers of float).
template <typename TW, int kVec>
struct WVec;
template <int kVec>
struct WVec<bf16, kVec> {
  BVec<kVec> p;
  __device__ __forceinline__ void load(const bf16* w, int v) { p = ldb<kVec>(w, v); }
  __device__ __forceinline__ float operator[](int i) const { return bf_get<kVec>(p, i); }
};
template <int kVec>
struct WVec<float, kVec> {
  Vec<float, kVec> p;
  __device__ __forceinline__ void load(const float* w, int v) {
    p = reinterpret_cast<const Vec<float, kVec>*>(w)[v];
  }
  __device__ __forceinline__ float operator[](int i) const { return p.v[i]; }
};

// ---- summation. The compensated form is Knuth's branch-free TwoSum: the exact rounding
// error of every addition is accumulated in c, and s + c is rounded once at the end.
__device__ __forceinline__ void two_sum_add(float& s, float& c, float x) {
  const float t = __fadd_rn(s, x);
  const float z = __fsub_rn(t, s);
  const float e = __fadd_rn(__fsub_rn(s, __fsub_rn(t, z)), __fsub_rn(x, z));
  s = t;
  c = __fadd_rn(c, e);
}
template <bool kComp>
__device__ __forceinline__ void acc_add(float& s, float& c, float x) {
  if constexpr (kComp) {
    two_sum_add(s, c, x);
  } else {
    s = __fadd_rn(s, x);
  }
}
// s += a * b. The compensated form adds the rounded product (its own error is 2^-24 relative
// and unbiased; carrying it too, Dot2-style, spilled at 1024 threads for no visible gain).
template <bool kComp>
__device__ __forceinline__ void acc_prod(float& s, float& c, float a, float b) {
  if constexpr (kComp) {
    two_sum_add(s, c, __fmul_rn(a, b));
  } else {
    s = __fmaf_rn(a, b, s);
  }
}
template <bool kComp>
__device__ __forceinline__ float acc_result(float s, float c) {
  if constexpr (kComp) return __fadd_rn(s, c);
  return s;
}

// Sum of v over a row group of kTPR threads; every thread of the group gets the same bits
// (xor butterfly: both partners add the same two values, and + commutes exactly; the warp
// partials are then read back in one fixed order). Must be called by all threads of the block
// (full-mask shuffles, and a barrier when a row spans warps). red: 2 * kThreads / 32 floats,
// double-buffered by parity so one barrier per row suffices.
template <int kTPR, int kThreads>
__device__ __forceinline__ float row_sum(float v, float* red, int parity) {
  constexpr int kLanes = kTPR < 32 ? kTPR : 32;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (kTPR > 32) {
    constexpr int kW = kTPR / 32;
    const int warp = threadIdx.x >> 5;
    float* buf = red + parity * (kThreads / 32);
    if ((threadIdx.x & 31) == 0) buf[warp] = v;
    __syncthreads();
    const float* g = buf + (warp / kW) * kW;  // this row group's warps, in order
    if constexpr (kW % 4 == 0) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kW; i += 4) {  // broadcast float4 reads: 4x fewer LDS
        const float4 q = *reinterpret_cast<const float4*>(g + i);
        s = (i == 0) ? q.x : s + q.x;
        s += q.y;
        s += q.z;
        s += q.w;
      }
      v = s;
    } else {
      float s = g[0];
#pragma unroll
      for (int i = 1; i < kW; ++i) s += g[i];
      v = s;
    }
  }
  return v;
}

// rstd from the row's sum of squares.
__device__ __forceinline__ float rstd_of(float ss, int H, float eps) {
  return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(H)), eps)));
}

// ---- backward element math, shared by the one-pass and the streamed path so both give the
// same bits: g = dy * w, xhat = h * rstd, part += g * xhat.
template <typename TW, int kVec>
__device__ __forceinline__ float dot_gx(const BVec<kVec>& dyv, const BVec<kVec>& hv,
                                        const WVec<TW, kVec>& wv, float r, float part) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float g = __fmul_rn(bf_get<kVec>(dyv, i), wv[i]);
    const float xh = __fmul_rn(bf_get<kVec>(hv, i), r);
    part = __fmaf_rn(g, xh, part);
  }
  return part;
}
// dx = rstd * (g - xhat * m) as bf16; dw column sums += dy * xhat.
template <bool kComp, typename TW, int kVec>
__device__ __forceinline__ BVec<kVec> dx_vec(const BVec<kVec>& dyv, const BVec<kVec>& hv,
                                             const WVec<TW, kVec>& wv, float r, float m,
                                             float (&s)[kVec], float (&c)[kVec]) {
  BVec<kVec> o;
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) {
    float d[2];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int i = 2 * k + q;
      const float dyf = bf_get<kVec>(dyv, i);
      const float g = __fmul_rn(dyf, wv[i]);
      const float xh = __fmul_rn(bf_get<kVec>(hv, i), r);
      d[q] = __fmul_rn(r, __fmaf_rn(-xh, m, g));
      acc_prod<kComp>(s[i], c[i], dyf, xh);
    }
    o.v[k] = bf_pack(d[0], d[1]);
  }
  return o;
}

// ============================================================================ forward
// Grid-stride over groups of kRows rows; any grid size works (rows * kRows threads is the
// natural one, fewer blocks just loop). Writes y, rstd, and h_out when kResidual.
template <typename TW, int kH, int kVec, int kThreads, bool kResidual>
__global__ void __launch_bounds__(kThreads)
    fwd(const FwdArgs args) {
  bf16* const y = args.y;
  float* const rstd = args.rstd;
  bf16* const h_out = args.h_out;
  const bf16* const x = args.x;
  const bf16* const residual = args.residual;
  const TW* const w = static_cast<const TW*>(args.w);
  const long long rows = args.rows, x_stride = args.x_stride, res_stride = args.res_stride,
                  y_stride = args.y_stride, h_stride = args.h_stride;
  const int h = args.h;
  const float eps = args.eps;
  // 1024 threads get 64 registers each, 512 get 128.
  using L = Layout<kH, kVec, kThreads, (kThreads >= 1024 ? 16 : 32), (kThreads >= 1024 ? 8 : 16)>;
  constexpr int kTPR = L::kTPR, kRows = L::kRows, kSlots = L::kSlots;
  using BV = BVec<kVec>;
  __shared__ __align__(16) float red[L::kWarpsPerRow > 1 ? 2 * (kThreads / 32) : 1];

  const int H = kH > 0 ? kH : h;
  const int nvec = H / kVec;
  const int lane = kRows > 1 ? static_cast<int>(threadIdx.x) % kTPR : static_cast<int>(threadIdx.x);
  const int grp = kRows > 1 ? static_cast<int>(threadIdx.x) / kTPR : 0;
  constexpr int kBatch = kSlots * kTPR;  // vectors of a row per register batch

  WVec<TW, kVec> wv[kSlots];  // this lane's columns never change: load w once
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int v = lane + s * kTPR;
    if (v < nvec) wv[s].load(w, v);
  }

  int parity = 0;
  for (long long base = static_cast<long long>(blockIdx.x) * kRows; base < rows;
       base += static_cast<long long>(gridDim.x) * kRows) {
    const long long row = base + grp;
    const bool live = row < rows;
    const bf16* xr = x + row * x_stride;
    const bf16* rr = nullptr;
    bf16* hr = nullptr;
    if constexpr (kResidual) {
      rr = residual + row * res_stride;
      hr = h_out + row * h_stride;
    }
    bf16* yr = y + row * y_stride;
    float ss = 0.f;

    // Pass 1 over one batch: all loads first (stores to h_out may alias x, so the compiler
    // could not hoist later loads above them), then h = bf16(x + res), h_out, sum of squares.
    auto load_batch = [&](BV(&hv)[kSlots], int v0) {
      BV rv[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int v = v0 + lane + s * kTPR;
        if (live && v < nvec) {
          hv[s] = ldb<kVec>(xr, v);
          if constexpr (kResidual) rv[s] = ldb<kVec>(rr, v);
        }
      }
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int v = v0 + lane + s * kTPR;
        if (live && v < nvec) {
          if constexpr (kResidual) {
#pragma unroll
            for (int k = 0; k < kVec / 2; ++k) {
              const unsigned a = hv[s].v[k], b = rv[s].v[k];
              hv[s].v[k] = bf_pack(__fadd_rn(bf_lo(a), bf_lo(b)), __fadd_rn(bf_hi(a), bf_hi(b)));
            }
            stb<kVec>(hr, v, hv[s]);
          }
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            const float f = bf_get<kVec>(hv[s], i);
            ss = __fmaf_rn(f, f, ss);
          }
        }
      }
    };
    auto store_batch = [&](const BV(&hv)[kSlots], const WVec<TW, kVec>(&ww)[kSlots], int v0,
                           float r) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int v = v0 + lane + s * kTPR;
        if (live && v < nvec) {
          BV o;
#pragma unroll
          for (int k = 0; k < kVec / 2; ++k) {
            const float a = __fmul_rn(__fmul_rn(bf_get<kVec>(hv[s], 2 * k), r), ww[s][2 * k]);
            const float b =
                __fmul_rn(__fmul_rn(bf_get<kVec>(hv[s], 2 * k + 1), r), ww[s][2 * k + 1]);
            o.v[k] = bf_pack(a, b);
          }
          stb<kVec>(yr, v, o);
        }
      }
    };

    BV hv[kSlots];
    load_batch(hv, 0);
    if constexpr (!L::kFits) {
      for (int v0 = kBatch; v0 < nvec; v0 += kBatch) {  // the part of a long row not kept
        BV t[kSlots];
        load_batch(t, v0);
      }
    }
    ss = row_sum<kTPR, kThreads>(ss, red, parity);
    parity ^= 1;
    const float r = rstd_of(ss, H, eps);
    if (live && lane == 0) rstd[row] = r;

    store_batch(hv, wv, 0, r);
    if constexpr (!L::kFits) {
      // Second read of the streamed part: from h_out when it exists (one stream, and the
      // exact bf16 h just written by this thread), else from x.
      const bf16* src;
      if constexpr (kResidual) {
        src = hr;
      } else {
        src = xr;
      }
      for (int v0 = kBatch; v0 < nvec; v0 += kBatch) {
        BV t[kSlots];
        WVec<TW, kVec> tw[kSlots];
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          const int v = v0 + lane + s * kTPR;
          if (live && v < nvec) {
            t[s] = ldb<kVec>(src, v);
            tw[s].load(w, v);
          }
        }
        store_batch(t, tw, v0, r);
      }
    }
  }
}

// ============================================================================ backward
// Rows are cut into chunks of kChunkRows; block b handles chunks b, b + gridDim.x, ... and
// writes partial[chunk][0..h) (FP32 column sums of dy * xhat over the chunk's rows) for each.
// A chunk's sums depend only on the chunk (not on the grid): each column is summed by one
// thread per row group over its rows in ascending order; with kRows > 1 row groups (small
// kH) the group sums are then added in group order 0, 1, 2, ... So dw's bits depend on
// (kChunkRows, kCompensated, kRows), never on the grid or the SM count.
template <typename TW, int kH, int kVec, int kThreads, int kChunkRows, bool kCompensated>
__global__ void __launch_bounds__(kThreads)
    bwd(const BwdArgs args) {
  bf16* const dx = args.dx;
  float* const partial = args.partial;
  const bf16* const dy = args.dy;
  const bf16* const hin = args.hin;
  const float* const rstd = args.rstd;
  const TW* const w = static_cast<const TW*>(args.w);
  const long long rows = args.rows, dy_stride = args.dy_stride, h_stride = args.h_stride, dx_stride = args.dx_stride;
  const int h = args.h;
  // Registers per thread ~ 4-5 x elements (current + prefetched row, w, sums): cap at 16,
  // 8 on the runtime-h path from 512 threads (128 registers; float w + compensated spilled).
  // With 1024 threads (64 registers, H 8200-16384) the next row is not prefetched: a row step
  // of the block already has 1024 * 16 * 4 = 64 KB of loads in flight; 16 elements then fit
  // 64 registers but for the compensated sums at 16 a lane (H 16384: ~0.2 KB spilled).
  using L = Layout<kH, kVec, kThreads, 16, (kThreads >= 512 ? 8 : 16)>;
  constexpr bool kPrefetch = kThreads < 1024;
  static_assert(kChunkRows >= 1, "kChunkRows >= 1");
  constexpr int kTPR = L::kTPR, kRows = L::kRows, kSlots = L::kSlots;
  static_assert(kRows == 1 || kSlots == 1, "several rows per block only when a row fits");
  using BV = BVec<kVec>;
  using WV = WVec<TW, kVec>;
  constexpr int kAcc = kCompensated ? 2 : 1;
  // Group merge buffer: [kVec][kMergeGroups][kTPR] per sum (s then c), so a warp's stores
  // and loads hit 32 consecutive words. At most 16 KB unless one group alone needs more.
  constexpr int kGroupFloats = kTPR * kVec;
  constexpr int kMergeGroups =
      kRows > 1 ? cmax(1, cmin(kRows - 1, 4096 / (kGroupFloats * kAcc))) : 0;
  __shared__ __align__(16) float red[L::kWarpsPerRow > 1 ? 2 * (kThreads / 32) : 1];
  __shared__ float merge[cmax(1, kMergeGroups * kGroupFloats * kAcc)];
  __shared__ float row_m[L::kFits ? 1 : kChunkRows];  // streamed path: per-row mean, rstd
  __shared__ float row_r[L::kFits ? 1 : kChunkRows];

  const int H = kH > 0 ? kH : h;
  const int nvec = H / kVec;
  // m = sum * (1/H): an IEEE divide in the row loop would be a subroutine call (slow path)
  // with every register of the row live across it. Exact when H is a power of two. With a
  // runtime h, 1/h sits in shared memory: at 1024 threads (64 registers) it would spill.
  __shared__ float inv_h_rt;
  if constexpr (kH == 0) {
    if (threadIdx.x == 0) inv_h_rt = __frcp_rn(static_cast<float>(H));
    __syncthreads();
  }
  auto inv_h = [&]() -> float {
    if constexpr (kH > 0) {
      return 1.0f / kH;
    } else {
      return inv_h_rt;
    }
  };
  const int lane = kRows > 1 ? static_cast<int>(threadIdx.x) % kTPR : static_cast<int>(threadIdx.x);
  const int grp = kRows > 1 ? static_cast<int>(threadIdx.x) / kTPR : 0;
  const long long nchunks = (rows + kChunkRows - 1) / kChunkRows;
  constexpr int kBatch = kSlots * kTPR;
  int parity = 0;

  auto write_partial = [&](long long chunk, int v0, const float(&s)[kSlots][kVec],
                           const float(&c)[kSlots][kVec]) {
    float* prow = partial + chunk * static_cast<long long>(H);
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      const int v = v0 + lane + q * kTPR;
      if (v < nvec) {
        Vec<float, kVec> o;
#pragma unroll
        for (int i = 0; i < kVec; ++i) o.v[i] = acc_result<kCompensated>(s[q][i], c[q][i]);
        reinterpret_cast<Vec<float, kVec>*>(prow)[v] = o;
      }
    }
  };

  if (L::kFits || nvec <= kBatch) {
    // ---- one pass: the row group's columns live in registers across the whole chunk.
    WV wv[kSlots];
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      const int v = lane + q * kTPR;
      if (v < nvec) wv[q].load(w, v);
    }
    for (long long chunk = blockIdx.x; chunk < nchunks; chunk += gridDim.x) {
      const long long r0 = chunk * kChunkRows;
      const int nr = static_cast<int>(rows - r0 < kChunkRows ? rows - r0 : kChunkRows);
      float s[kSlots][kVec], c[kSlots][kVec];
#pragma unroll
      for (int q = 0; q < kSlots; ++q)
#pragma unroll
        for (int i = 0; i < kVec; ++i) s[q][i] = c[q][i] = 0.f;

      auto load_row = [&](BV(&a)[kSlots], BV(&b)[kSlots], float& r, int li) {
        const long long row = r0 + li;
        const bf16* dyr = dy + row * dy_stride;
        const bf16* hr = hin + row * h_stride;
#pragma unroll
        for (int q = 0; q < kSlots; ++q) {
          const int v = lane + q * kTPR;
          if (v < nvec) {
            a[q] = ldb<kVec>(dyr, v);
            b[q] = ldb<kVec>(hr, v);
          }
        }
        r = rstd[row];
      };

      BV cy[kSlots], ch[kSlots];
      float cr = 0.f;
      if (grp < nr) load_row(cy, ch, cr, grp);
#pragma unroll 1
      for (int li = grp; li - grp < nr; li += kRows) {  // trip count uniform in the block
        const bool live = li < nr;
        BV ny[kSlots], nh[kSlots];
        float nrs = 0.f;
        if constexpr (kPrefetch)
          if (li + kRows < nr) load_row(ny, nh, nrs, li + kRows);  // next row in flight
        float part = 0.f;
        if (live) {
#pragma unroll
          for (int q = 0; q < kSlots; ++q)
            if (lane + q * kTPR < nvec) part = dot_gx<TW, kVec>(cy[q], ch[q], wv[q], cr, part);
        }
        const float m = __fmul_rn(row_sum<kTPR, kThreads>(part, red, parity), inv_h());
        parity ^= 1;
        if (live) {
          bf16* dxr = dx + (r0 + li) * dx_stride;
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int v = lane + q * kTPR;
            if (v < nvec)
              stb<kVec>(dxr, v, dx_vec<kCompensated, TW, kVec>(cy[q], ch[q], wv[q], cr, m, s[q], c[q]));
          }
        }
        if constexpr (kPrefetch) {
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            cy[q] = ny[q];
            ch[q] = nh[q];
          }
          cr = nrs;
        } else if (li + kRows < nr) {
          load_row(cy, ch, cr, li + kRows);
        }
      }

      if constexpr (kRows > 1) {
        // Add the row groups' sums into group 0 in group order, kMergeGroups at a time.
        constexpr int kPlane = kVec * kMergeGroups * kTPR;
        for (int g0 = 1; g0 < kRows; g0 += kMergeGroups) {
          const int j = grp - g0;
          if (j >= 0 && j < kMergeGroups) {
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
              merge[(i * kMergeGroups + j) * kTPR + lane] = s[0][i];
              if constexpr (kCompensated) merge[kPlane + (i * kMergeGroups + j) * kTPR + lane] = c[0][i];
            }
          }
          __syncthreads();
          if (grp == 0) {
            for (int jj = 0; jj < kMergeGroups && g0 + jj < kRows; ++jj) {
#pragma unroll
              for (int i = 0; i < kVec; ++i) {
                acc_add<kCompensated>(s[0][i], c[0][i], merge[(i * kMergeGroups + jj) * kTPR + lane]);
                if constexpr (kCompensated)
                  c[0][i] = __fadd_rn(c[0][i], merge[kPlane + (i * kMergeGroups + jj) * kTPR + lane]);
              }
            }
          }
          __syncthreads();
        }
        if (grp == 0) write_partial(chunk, 0, s, c);
      } else {
        write_partial(chunk, 0, s, c);
      }
    }
  } else {
    // ---- streamed (row longer than the register batch; one row per block here).
    // Pass A: each row's mean(g * xhat) into shared memory. Pass B: per column tile of
    // kBatch vectors, the chunk's rows in order: dx, and dw sums in registers.
    for (long long chunk = blockIdx.x; chunk < nchunks; chunk += gridDim.x) {
      const long long r0 = chunk * kChunkRows;
      const int nr = static_cast<int>(rows - r0 < kChunkRows ? rows - r0 : kChunkRows);
      for (int li = 0; li < nr; ++li) {
        const long long row = r0 + li;
        const bf16* dyr = dy + row * dy_stride;
        const bf16* hr = hin + row * h_stride;
        const float r = rstd[row];
        float part = 0.f;
        for (int v0 = 0; v0 < nvec; v0 += kBatch) {
          BV a[kSlots], b[kSlots];
          WV ww[kSlots];
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int v = v0 + lane + q * kTPR;
            if (v < nvec) {
              a[q] = ldb<kVec>(dyr, v);
              b[q] = ldb<kVec>(hr, v);
              ww[q].load(w, v);
            }
          }
#pragma unroll
          for (int q = 0; q < kSlots; ++q)
            if (v0 + lane + q * kTPR < nvec) part = dot_gx<TW, kVec>(a[q], b[q], ww[q], r, part);
        }
        const float m = __fmul_rn(row_sum<kTPR, kThreads>(part, red, parity), inv_h());
        parity ^= 1;
        if (threadIdx.x == 0) {
          row_m[li] = m;
          row_r[li] = r;
        }
      }
      __syncthreads();  // row_m, row_r visible

      for (int v0 = 0; v0 < nvec; v0 += kBatch) {
        WV wv[kSlots];
        float s[kSlots][kVec], c[kSlots][kVec];
#pragma unroll
        for (int q = 0; q < kSlots; ++q) {
          const int v = v0 + lane + q * kTPR;
          if (v < nvec) wv[q].load(w, v);
#pragma unroll
          for (int i = 0; i < kVec; ++i) s[q][i] = c[q][i] = 0.f;
        }
        auto load_tile = [&](BV(&a)[kSlots], BV(&b)[kSlots], int li) {
          const long long row = r0 + li;
          const bf16* dyr = dy + row * dy_stride;
          const bf16* hr = hin + row * h_stride;
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int v = v0 + lane + q * kTPR;
            if (v < nvec) {
              a[q] = ldb<kVec>(dyr, v);
              b[q] = ldb<kVec>(hr, v);
            }
          }
        };
        BV cy[kSlots], ch[kSlots];
        load_tile(cy, ch, 0);
#pragma unroll 1
        for (int li = 0; li < nr; ++li) {
          BV ny[kSlots], nh[kSlots];
          if constexpr (kPrefetch)
            if (li + 1 < nr) load_tile(ny, nh, li + 1);  // next row in flight
          const float r = row_r[li], m = row_m[li];
          bf16* dxr = dx + (r0 + li) * dx_stride;
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int v = v0 + lane + q * kTPR;
            if (v < nvec)
              stb<kVec>(dxr, v, dx_vec<kCompensated, TW, kVec>(cy[q], ch[q], wv[q], r, m, s[q], c[q]));
          }
          if constexpr (kPrefetch) {
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
              cy[q] = ny[q];
              ch[q] = nh[q];
            }
          } else if (li + 1 < nr) {
            load_tile(cy, ch, li + 1);
          }
        }
        write_partial(chunk, v0, s, c);
      }
      __syncthreads();  // row_m, row_r reused by the next chunk
    }
  }
}

// ============================================================================ dw finalize
// dw[j] = the sum of partial[k][j] over the chunks k, in an order fixed by `chunks`, kThreads
// and kCols alone (never by the grid): a block owns kCols consecutive columns (grid-stride over
// column groups, ceil(h / kCols) blocks is the natural grid); its kThreads / kCols slices each
// add a contiguous run of chunks in increasing k, kUnroll loads in flight, and one thread per
// column then adds the slice sums in slice order. Many slices keep the loads busy when h is
// small (few column groups); 8 columns of FP32 are one 32-byte sector of a partial row.
// kUnroll changes the speed only, never the order.
template <typename TW, int kThreads, bool kCompensated, int kCols = kFinalizeCols, int kUnroll = 8>
__global__ void __launch_bounds__(kThreads)
    dw_finalize(const FinalizeArgs args) {
  TW* const dw = static_cast<TW*>(args.dw);
  const float* const partial = args.partial;
  const long long chunks = args.chunks;
  const int h = args.h;
  constexpr int kSlices = kThreads / kCols;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(kThreads % kCols == 0 && kUnroll >= 1, "whole slices");
  __shared__ float slice_s[kSlices][kCols], slice_c[kSlices][kCols];
  const int col = static_cast<int>(threadIdx.x) % kCols, slice = static_cast<int>(threadIdx.x) / kCols;
  const long long per = (chunks + kSlices - 1) / kSlices;
  const long long k0 = slice * per, k1 = k0 + per < chunks ? k0 + per : chunks;
  const long long groups = (static_cast<long long>(h) + kCols - 1) / kCols;
  for (long long cg = blockIdx.x; cg < groups; cg += gridDim.x) {
    const long long j = cg * kCols + col;
    float s = 0.f, c = 0.f;
    if (j < h) {
      long long k = k0;
      for (; k + kUnroll <= k1; k += kUnroll) {
        float v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = partial[(k + u) * h + j];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc_add<kCompensated>(s, c, v[u]);
      }
      for (; k < k1; ++k) acc_add<kCompensated>(s, c, partial[k * h + j]);
    }
    slice_s[slice][col] = s;
    slice_c[slice][col] = c;
    __syncthreads();
    if (slice == 0 && j < h) {
      float ts = 0.f, tc = 0.f;
      for (int q = 0; q < kSlices; ++q) {
        acc_add<kCompensated>(ts, tc, slice_s[q][col]);
        if constexpr (kCompensated) tc = __fadd_rn(tc, slice_c[q][col]);
      }
      dw[j] = from_f32<TW>(acc_result<kCompensated>(ts, tc));
    }
    __syncthreads();  // slice_s, slice_c are reused by the next column group
  }
}

}  // namespace cake::rms
