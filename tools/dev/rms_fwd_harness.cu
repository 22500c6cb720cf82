// RMSNorm forward variants against the family's kernel, outside the runtime: which load/store
// pattern moves the most bytes at a given H. On the GPU machine, from the repo root:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I templates \
//        tools/dev/rms_fwd_harness.cu -o rms_fwd && ./rms_fwd
// The family kernel's two launches (grid-stride over resident blocks, one block per row group)
// are compared bitwise on the device; the RMS_VARIANTS kernels are timed only (their sums
// may be ordered differently). Times are medians of 25 CUDA-event timings with L2 flushed
// before each; TB/s counts x and y (and w, rstd) once. A 16-byte copy kernel and cudaMemcpy
// give the copy ceilings.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "smxx_rmsnorm.cuh"

#include "cuda_check.hpp"

using cake::bf16;
using namespace cake::rms;

// ---- cache-hinted 16-byte accesses
template <int kHint>
__device__ __forceinline__ uint4 ld16(const void* p) {
  uint4 v;
  if constexpr (kHint == 0)
    v = *static_cast<const uint4*>(p);
  else if constexpr (kHint == 1)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}
template <int kHint>
__device__ __forceinline__ void st16(void* p, uint4 v) {
  if constexpr (kHint == 0)
    *static_cast<uint4*>(p) = v;
  else
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// Sum of squares of 8 bf16 (in element order), and bf16(x * r * w) of 8: the family's math.
__device__ __forceinline__ float sum_sq8(const uint4& v, float ss) {
  const unsigned* u = reinterpret_cast<const unsigned*>(&v);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = bf_lo(u[k]), b = bf_hi(u[k]);
    ss = __fmaf_rn(a, a, ss);
    ss = __fmaf_rn(b, b, ss);
  }
  return ss;
}
__device__ __forceinline__ uint4 normalize8(const uint4& x, const uint4& w, float r) {
  const unsigned* u = reinterpret_cast<const unsigned*>(&x);
  const unsigned* q = reinterpret_cast<const unsigned*>(&w);
  uint4 o;
  unsigned* ov = reinterpret_cast<unsigned*>(&o);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    ov[k] = bf_pack(__fmul_rn(__fmul_rn(bf_lo(u[k]), r), bf_lo(q[k])),
                    __fmul_rn(__fmul_rn(bf_hi(u[k]), r), bf_hi(q[k])));
  return o;
}

// One row per block of kT threads (kH / 8 / kT vectors a thread), grid-stride over rows;
// kPrefetch: the next row's loads are issued before this row's reduction and stores.
template <int kH, int kT, bool kPrefetch, int kHint>
__global__ void __launch_bounds__(kT) fwd_v(bf16* y, float* rstd, const bf16* x, const bf16* w, long long rows,
                                            float eps) {
  constexpr int kN = kH / 8 / kT;
  static_assert(kN >= 1 && kH % (8 * kT) == 0, "whole vectors per thread");
  __shared__ __align__(16) float red[2][kT / 32 > 0 ? kT / 32 : 1];
  uint4 wv[kN], cur[kN], nxt[kN];
#pragma unroll
  for (int s = 0; s < kN; ++s) wv[s] = reinterpret_cast<const uint4*>(w)[threadIdx.x + s * kT];
  long long row = blockIdx.x;
  auto load = [&](uint4(&d)[kN], long long r) {
    const bf16* xr = x + r * kH;
#pragma unroll
    for (int s = 0; s < kN; ++s) d[s] = ld16<kHint>(xr + 8 * (threadIdx.x + s * kT));
  };
  if (row < rows) load(cur, row);
  int parity = 0;
  for (; row < rows; row += gridDim.x) {
    const long long nrow = row + gridDim.x;
    if (kPrefetch && nrow < rows) load(nxt, nrow);
    float ss = 0.f;
#pragma unroll
    for (int s = 0; s < kN; ++s) ss = sum_sq8(cur[s], ss);
    ss = row_sum<kT, kT>(ss, &red[0][0], parity);
    parity ^= 1;
    const float r = rstd_of(ss, kH, eps);
    if (threadIdx.x == 0) rstd[row] = r;
    bf16* yr = y + row * kH;
#pragma unroll
    for (int s = 0; s < kN; ++s) st16<kHint>(yr + 8 * (threadIdx.x + s * kT), normalize8(cur[s], wv[s], r));
    if constexpr (kPrefetch) {
#pragma unroll
      for (int s = 0; s < kN; ++s) cur[s] = nxt[s];
    } else if (nrow < rows) {
      load(cur, nrow);
    }
  }
}

// torch.compile's shape for large H: one row per block, the row read twice (the second time
// from L2), so a thread keeps only its partial sum between the passes. kHint 1: the second
// pass loads with ld.global.cs (evict first).
template <int kH, int kT, int kHint>
__global__ void __launch_bounds__(kT) fwd_2pass(bf16* y, float* rstd, const bf16* x, const bf16* w, long long rows,
                                                float eps) {
  constexpr int kN = kH / 8 / kT;
  static_assert(kN >= 1 && kH % (8 * kT) == 0, "whole vectors per thread");
  __shared__ __align__(16) float red[2][kT / 32 > 0 ? kT / 32 : 1];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const bf16* xr = x + row * kH;
  float ss = 0.f;
#pragma unroll
  for (int s = 0; s < kN; ++s) ss = sum_sq8(ld16<0>(xr + 8 * (threadIdx.x + s * kT)), ss);
  ss = row_sum<kT, kT>(ss, &red[0][0], 0);
  const float r = rstd_of(ss, kH, eps);
  if (threadIdx.x == 0) rstd[row] = r;
  bf16* yr = y + row * kH;
#pragma unroll
  for (int s = 0; s < kN; ++s) {
    const int v = threadIdx.x + s * kT;
    const uint4 xv = ld16<kHint == 1 ? 2 : 0>(xr + 8 * v);  // 2: ld.global.cs
    st16<0>(yr + 8 * v, normalize8(xv, reinterpret_cast<const uint4*>(w)[v], r));
  }
}

template <int kHint>
__global__ void copy16(uint4* dst, const uint4* src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    st16<kHint>(dst + i, ld16<kHint>(src + i));
}

static void* g_flush;
static const size_t kFlush = 256 << 20;
template <typename F>
static float median_ms(F f, int reps = 25) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps + 2; ++i) {
    CK(cudaMemsetAsync(g_flush, i, kFlush));
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static int g_sms;
static int failures;
static bf16 *g_x, *g_w, *g_y, *g_yref;
static float *g_r, *g_rref;

__global__ void count_diff(const unsigned* a, const unsigned* b, long long n, unsigned long long* out) {
  unsigned long long c = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    c += a[i] != b[i];
  if (c) atomicAdd(out, c);
}
static unsigned long long* g_diff;
// Bitwise comparison of y and rstd with the reference run, on the device.
static void check(const char* name, long long T, int H) {
  CK(cudaMemset(g_diff, 0, 8));
  count_diff<<<1024, 256>>>((const unsigned*)g_y, (const unsigned*)g_yref, T * H / 2, g_diff);
  count_diff<<<64, 256>>>((const unsigned*)g_r, (const unsigned*)g_rref, T, g_diff);
  unsigned long long d;
  CK(cudaMemcpy(&d, g_diff, 8, cudaMemcpyDeviceToHost));
  if (d) {
    std::printf("MISMATCH %s H=%d T=%lld: %llu words\n", name, H, T, d);
    ++failures;
  }
}

// The family kernel at block size kT: its persistent grid (resident blocks, as the runtime
// launched it up to now) and one block per row group, which must give the same bits.
template <int kH, int kT>
static void run_family(long long T, double bytes) {
  if constexpr (kT <= 1024) {
    const float eps = 1e-6f;
    auto fam = fwd<bf16, kH, 8, kT, false>;
    using L = Layout<kH, 8, kT, (kT >= 1024 ? 16 : 32), (kT >= 1024 ? 8 : 16)>;
    const long long groups = (T + L::kRows - 1) / L::kRows;
    const int pgrid = int(std::min<long long>(groups, (long long)g_sms * std::max(1, 2048 / kT)));
    auto launch = [&](int grid, bf16* y, float* r) {
      fam<<<grid, kT>>>(y, r, nullptr, g_x, nullptr, g_w, T, kH, kH, 0, kH, 0, eps);
    };
    CK(cudaMemset(g_yref, 0xff, T * kH * 2));
    launch(pgrid, g_yref, g_rref);
    CK(cudaDeviceSynchronize());
    const float mp = median_ms([&] { launch(pgrid, g_y, g_r); });
    CK(cudaMemset(g_y, 0xff, T * kH * 2));
    CK(cudaMemset(g_r, 0xff, T * 4));
    const float mr = median_ms([&] { launch(int(groups), g_y, g_r); });
    check("family rows", T, kH);
    std::printf("RMS H=%-5d T=%-6lld t%-5d kSlots %2d | persistent grid %6d %8.1f us %5.2f TB/s | rows grid %6lld %8.1f us %5.2f TB/s\n",
                kH, T, kT, L::kSlots, pgrid, mp * 1e3, bytes / mp / 1e9, groups, mr * 1e3, bytes / mr / 1e9);
    if constexpr (kT < kH / 8) run_family<kH, kT * 2>(T, bytes);
  }
}

template <int kH>
static void run_h(long long T) {
  const double bytes = 2.0 * T * kH * 2 + kH * 2 + T * 4;
  run_family<kH, 64>(T, bytes);
  if constexpr ((kH / 8) % 128 == 0) if (getenv("RMS_VARIANTS")) {  // the one-row-per-block variants (prefetch, cache hints)
    auto variant = [&](auto kern, int threads, const char* name) {
      const int grid = int(T);
      const float ms = median_ms([&] { kern<<<grid, threads>>>(g_y, g_r, g_x, g_w, T, 1e-6f); });
      std::printf("RMS H=%-5d T=%-6lld %-20s grid %6d %8.1f us %5.2f TB/s\n", kH, T, name, grid, ms * 1e3,
                  bytes / ms / 1e9);
    };
    constexpr int kT0 = kH / 8 >= 128 ? 128 : kH / 8;
    variant(fwd_v<kH, kT0, false, 0>, kT0, "t128 rows");
    variant(fwd_v<kH, kT0, true, 0>, kT0, "t128 pf rows");
    variant(fwd_v<kH, kT0, true, 1>, kT0, "t128 pf nc/cs rows");
    if constexpr ((kH / 8) % 512 == 0) {
      variant(fwd_2pass<kH, 256, 0>, 256, "2pass t256");
      variant(fwd_2pass<kH, 512, 0>, 512, "2pass t512");
      variant(fwd_2pass<kH, 512, 1>, 512, "2pass t512 cs");
      if constexpr (kH / 8 >= 1024) variant(fwd_2pass<kH, 1024, 0>, 1024, "2pass t1024");
    }
  }
}

int main() {
  CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaMalloc(&g_flush, kFlush));
  const long long maxT = 131072;
  const int maxH = 8192;
  CK(cudaMalloc(&g_x, maxT * maxH * 2));
  CK(cudaMalloc(&g_y, maxT * maxH * 2));
  CK(cudaMalloc(&g_yref, maxT * maxH * 2));
  CK(cudaMalloc(&g_w, maxH * 2));
  CK(cudaMalloc(&g_r, maxT * 4));
  CK(cudaMalloc(&g_rref, maxT * 4));
  {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<uint16_t> hx(size_t(maxT) * maxH), hw(maxH);
    for (auto& v : hx) {
      const float f = d(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = uint16_t(u >> 16);
    }
    for (auto& v : hw) {
      const float f = 1.f + 0.1f * d(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = uint16_t(u >> 16);
    }
    CK(cudaMemcpy(g_x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  }
  {
    const long long n = 1ll << 30;  // 1 GiB each way
    const double bytes = 2.0 * n;
    const float mc = median_ms([&] { CK(cudaMemcpyAsync(g_y, g_x, n, cudaMemcpyDeviceToDevice)); });
    std::printf("COPY cudaMemcpy 1 GiB            %8.1f us  %5.2f TB/s\n", mc * 1e3, bytes / mc / 1e9);
    for (int per_sm : {4, 8, 16}) {
      const int grid = g_sms * per_sm;
      const float m0 = median_ms([&] { copy16<0><<<grid, 256>>>((uint4*)g_y, (const uint4*)g_x, n / 16); });
      const float m1 = median_ms([&] { copy16<1><<<grid, 256>>>((uint4*)g_y, (const uint4*)g_x, n / 16); });
      std::printf("COPY copy16 %2d blocks/SM plain  %8.1f us  %5.2f TB/s | nc/cs %8.1f us  %5.2f TB/s\n", per_sm,
                  m0 * 1e3, bytes / m0 / 1e9, m1 * 1e3, bytes / m1 / 1e9);
    }
  }
  CK(cudaMalloc(&g_diff, 8));
  const char* only = getenv("RMS_T");
  for (long long T : {16384ll, 65536ll}) {
    if (only && std::atoll(only) != T) continue;
    run_h<1024>(T);
    run_h<1536>(T);
    run_h<2048>(T);
    run_h<4096>(T);
    run_h<5120>(T);
    run_h<6144>(T);
    run_h<8192>(T);
  }
  std::printf("%s: %d mismatches\n", failures ? "FAILED" : "ALL MATCH", failures);
  return failures ? 1 : 0;
}
