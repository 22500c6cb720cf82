// Scalar types and conversions shared by every template. Device code only; no system
// headers, so a cold NVRTC compile stays small (sm_80+: uses cvt.*.bf16).
#pragma once
#include "contract_base.h"

namespace cake {

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 v) {
  return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));  // round to nearest even, NaN kept
  return bf16{r};
}

// kVec consecutive elements moved as one access (16 bytes for the vector programs).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

}  // namespace cake
