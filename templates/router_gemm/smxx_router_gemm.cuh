// The router GEMM's own kernels: FP32 operands split into exact BF16 parts for the shared BF16
// GEMM kernels (templates/common/), and the parts' products summed into FP32 (contract:
// router_gemm_contract.h). Grid-stride loops; both are memory-bound passes over small tensors
// (the router's [T, E] logits gradient, its [E, H] weight).
#pragma once
#include "router_gemm_contract.h"
#include "smxx_types.cuh"

namespace cake::router {

// The three BF16 parts of v: hi is v truncated to BF16 (no rounding can overflow to inf),
// mid the remainder truncated, lo what is left, which has at most 8 significant bits and is
// exact in BF16: hi + mid + lo == v for every finite v above BF16's subnormal range. Not
// finite: hi = v (inf or NaN, so products propagate as in FP32), the rest zero.
__device__ __forceinline__ void split3(float v, bf16& hi, bf16& mid, bf16& lo) {
  if ((__float_as_uint(v) & 0x7f800000u) == 0x7f800000u) {
    hi = from_f32<bf16>(v), mid = bf16{0}, lo = bf16{0};
    return;
  }
  hi = bf16{static_cast<unsigned short>(__float_as_uint(v) >> 16)};
  const float r1 = v - to_f32(hi);  // exact: the low 16 bits of v's significand
  mid = bf16{static_cast<unsigned short>(__float_as_uint(r1) >> 16)};
  lo = from_f32<bf16>(r1 - to_f32(mid));  // exact, as is the subtraction
}

template <typename InT>
__global__ void __launch_bounds__(kThreads) split(const SplitArgs args) {
  const InT* __restrict__ const in = static_cast<const InT*>(args.in);
  bf16* __restrict__ const out = static_cast<bf16*>(args.out);
  const long long vecs_per_row = args.cols / kSplitVec;
  const long long vecs = args.rows * vecs_per_row;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  if (args.offs != nullptr) {
    const long long chunks = (args.rows + args.chunk - 1) / args.chunk;
    for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < chunks; g += stride) {
      const long long end = (g + 1) * args.chunk;
      args.offs[g] = static_cast<int>(end < args.rows ? end : args.rows);
    }
  }
  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < vecs; g += stride) {
    const long long r = g / vecs_per_row, c = (g - r * vecs_per_row) * kSplitVec;
    // 16-byte loads (the bases are 16-byte aligned): one of 8 bf16, or two of 4 floats.
    constexpr int kLoad = 16 / sizeof(InT);
    InT v[kSplitVec];
#pragma unroll
    for (int j = 0; j < kSplitVec / kLoad; ++j) {
      const Vec<InT, kLoad> l = *reinterpret_cast<const Vec<InT, kLoad>*>(in + r * args.cols + c + j * kLoad);
#pragma unroll
      for (int i = 0; i < kLoad; ++i) v[j * kLoad + i] = l.v[i];
    }
    Vec<bf16, kSplitVec> part[3];
#pragma unroll
    for (int i = 0; i < kSplitVec; ++i) {
      if constexpr (sizeof(InT) == 2) {
        part[0].v[i] = v[i], part[1].v[i] = bf16{0}, part[2].v[i] = bf16{0};
      } else {
        split3(v[i], part[0].v[i], part[1].v[i], part[2].v[i]);
      }
    }
    bf16* const row = out + r * args.ld_out + c;
    for (int p = 0; p < args.blocks; ++p) {
      const int q = args.pattern[p];  // selected, not indexed: the parts stay in registers
      *reinterpret_cast<Vec<bf16, kSplitVec>*>(row + p * args.block_stride) = q == 0 ? part[0] : q == 1 ? part[1] : part[2];
    }
  }
}

template <bool kAccumulate>
__global__ void __launch_bounds__(kThreads) sum(const SumArgs args) {
  const float* __restrict__ const parts = args.parts;
  float* __restrict__ const out = args.out;
  const long long vecs = args.n / kSumVec;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < vecs; g += stride) {
    Vec<float, kSumVec> s = reinterpret_cast<const Vec<float, kSumVec>*>(parts + (args.blocks - 1) * args.n)[g];
    for (int p = args.blocks - 2; p >= 0; --p) {
      const Vec<float, kSumVec> v = reinterpret_cast<const Vec<float, kSumVec>*>(parts + p * args.n)[g];
#pragma unroll
      for (int i = 0; i < kSumVec; ++i) s.v[i] += v.v[i];
    }
    if constexpr (kAccumulate) {
      const Vec<float, kSumVec> o = reinterpret_cast<const Vec<float, kSumVec>*>(out)[g];
#pragma unroll
      for (int i = 0; i < kSumVec; ++i) s.v[i] = o.v[i] + s.v[i];
    }
    reinterpret_cast<Vec<float, kSumVec>*>(out)[g] = s;
  }
}

}  // namespace cake::router
