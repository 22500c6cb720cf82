// What every family's contract header (templates/<family>/<family>_contract.h) builds on.
// A contract header is plain C++ that NVRTC and the host compiler both take, so a kernel and
// the host code that launches it read one declaration of what they share: the argument
// struct the kernel takes, tile sizes, shared-memory bytes, counter and workspace layouts.
// No system headers: a cold NVRTC compile stays small.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define CAKE_HOST_DEVICE __host__ __device__
#else
#define CAKE_HOST_DEVICE
#endif

namespace cake {

// bfloat16 as it sits in memory (device code converts it: smxx_types.cuh).
struct bf16 {
  unsigned short bits;
};

}  // namespace cake

// A layout both compilers must agree on. Each checks the size it computes against the same
// number; the host compiler checks the field offsets too (NVRTC has no offsetof, and CUDA lays
// a struct out by the host's ABI). A test reads the compiled kernels' parameter sizes back
// from their cubins (tests/test_nvrtc.cpp).
#define CAKE_CONTRACT_SIZE(type, bytes) static_assert(sizeof(type) == (bytes), #type ": size")
#if defined(__CUDACC_RTC__)
#define CAKE_CONTRACT_FIELD(type, field, offset) static_assert(true, "")
#else
#define CAKE_CONTRACT_FIELD(type, field, offset) \
  static_assert(__builtin_offsetof(type, field) == (offset), #type "::" #field ": offset")
#endif
