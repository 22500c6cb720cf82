// Elementwise stages for composed routes: add, cast, and cast with accumulate.
// Grid-stride loops over n elements in groups of kVec. A kVec > 1 program is only routed
// when n % kVec == 0 and every pointer is 16-byte aligned (the registry's window says so).
#pragma once
#include "elementwise_contract.h"
#include "smxx_types.cuh"

namespace cake::ew {

// out = a + b, rounded once to TOut. `out` may alias `a` (in-place add of a scratch).
template <typename TOut, typename TA, typename TB, int kVec>
__global__ void __launch_bounds__(kThreads) add(const ElementwiseArgs args) {
  TOut* const out = static_cast<TOut*>(args.out);
  const TA* const a = static_cast<const TA*>(args.a);
  const TB* const b = static_cast<const TB*>(args.b);
  const long long n = args.n;
  const long long groups = n / kVec;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    Vec<TA, kVec> va = reinterpret_cast<const Vec<TA, kVec>*>(a)[g];
    Vec<TB, kVec> vb = reinterpret_cast<const Vec<TB, kVec>*>(b)[g];
    Vec<TOut, kVec> vo;
#pragma unroll
    for (int i = 0; i < kVec; ++i) vo.v[i] = from_f32<TOut>(to_f32(va.v[i]) + to_f32(vb.v[i]));
    reinterpret_cast<Vec<TOut, kVec>*>(out)[g] = vo;
  }
}

// out = (TOut) in
template <typename TOut, typename TIn, int kVec>
__global__ void __launch_bounds__(kThreads) cast(const ElementwiseArgs args) {
  TOut* __restrict__ const out = static_cast<TOut*>(args.out);
  const TIn* __restrict__ const in = static_cast<const TIn*>(args.a);
  const long long n = args.n;
  const long long groups = n / kVec;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    Vec<TIn, kVec> vi = reinterpret_cast<const Vec<TIn, kVec>*>(in)[g];
    Vec<TOut, kVec> vo;
#pragma unroll
    for (int i = 0; i < kVec; ++i) vo.v[i] = from_f32<TOut>(to_f32(vi.v[i]));
    reinterpret_cast<Vec<TOut, kVec>*>(out)[g] = vo;
  }
}

// out += (TOut) in, rounded once: the fused form of [cast -> scratch, add].
template <typename TOut, typename TIn, int kVec>
__global__ void __launch_bounds__(kThreads) cast_accumulate(const ElementwiseArgs args) {
  TOut* __restrict__ const out = static_cast<TOut*>(args.out);
  const TIn* __restrict__ const in = static_cast<const TIn*>(args.a);
  const long long n = args.n;
  const long long groups = n / kVec;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    Vec<TIn, kVec> vi = reinterpret_cast<const Vec<TIn, kVec>*>(in)[g];
    Vec<TOut, kVec> vo = reinterpret_cast<const Vec<TOut, kVec>*>(out)[g];
#pragma unroll
    for (int i = 0; i < kVec; ++i) vo.v[i] = from_f32<TOut>(to_f32(vo.v[i]) + to_f32(vi.v[i]));
    reinterpret_cast<Vec<TOut, kVec>*>(out)[g] = vo;
  }
}

}  // namespace cake::ew
