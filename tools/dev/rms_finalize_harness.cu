// Standalone timing of the rmsnorm dw finalize (templates/smxx_rmsnorm.cuh) over partial sums
// shaped as the backward leaves them ([chunks, H] FP32), for several (threads, columns per
// block, loads in flight): no cake library. On the GPU machine, from the repo root:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I templates \
//        tools/dev/rms_finalize_harness.cu -o rms_fin && ./rms_fin
// Each variant's dw is checked against an FP64 sum on the host (FP32 budget) and two runs
// must give the same bits. Times: median of 50, L2 warm (the partials just written, as after
// the backward) and L2 flushed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "smxx_rmsnorm.cuh"

#include "cuda_check.hpp"

using cake::bf16;

struct Variant {
  const char* name;
  int threads, cols;
  void (*kern)(float*, const float*, long long, int);
};

template <int kThreads, int kCols, int kUnroll>
Variant make(const char* name) {
  return {name, kThreads, kCols, cake::rms::dw_finalize<float, kThreads, false, kCols, kUnroll>};
}

static float median_ms(const Variant& v, float* dw, const float* part, long long chunks, int h, int grid,
                       void* flush, size_t flush_bytes) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 51; ++i) {
    if (flush) CK(cudaMemsetAsync(flush, i, flush_bytes));
    CK(cudaEventRecord(a));
    v.kern<<<grid, v.threads>>>(dw, part, chunks, h);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Variant vs[] = {make<256, 8, 8>("t256 c8 u8 (family)"), make<256, 8, 16>("t256 c8 u16"),
                        make<256, 8, 32>("t256 c8 u32"),         make<512, 8, 16>("t512 c8 u16"),
                        make<1024, 8, 8>("t1024 c8 u8"),         make<256, 32, 16>("t256 c32 u16"),
                        make<512, 32, 16>("t512 c32 u16"),       make<256, 16, 16>("t256 c16 u16")};
  size_t flush_bytes = 256 << 20;
  void* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  int failures = 0;
  std::printf("%-22s %6s %7s %5s %10s %10s %s\n", "variant", "H", "chunks", "grid", "warm us", "flushed us", "check");
  for (auto [h, chunks] : {std::pair{1024, 1024LL}, {2048, 1024LL}, {4096, 1024LL}, {8192, 1024LL}, {1024, 256LL},
                           {4096, 256LL}, {8192, 2048LL}}) {
    std::mt19937 rng(h + chunks);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> hp(size_t(chunks) * h);
    for (auto& x : hp) x = u(rng);
    std::vector<double> ref(h, 0.0);
    for (long long k = 0; k < chunks; ++k)
      for (int j = 0; j < h; ++j) ref[j] += hp[size_t(k) * h + j];
    float *part, *dw;
    CK(cudaMalloc(&part, hp.size() * 4));
    CK(cudaMalloc(&dw, size_t(h) * 4));
    CK(cudaMemcpy(part, hp.data(), hp.size() * 4, cudaMemcpyHostToDevice));
    for (const Variant& v : vs) {
      const int grid = int(std::min<long long>((h + v.cols - 1) / v.cols, (long long)sms * 8));
      std::vector<float> r1(h), r2(h);
      for (auto* r : {&r1, &r2}) {
        CK(cudaMemset(dw, 0xff, size_t(h) * 4));
        v.kern<<<grid, v.threads>>>(dw, part, chunks, h);
        CK(cudaGetLastError());
        CK(cudaMemcpy(r->data(), dw, size_t(h) * 4, cudaMemcpyDeviceToHost));
      }
      double e2 = 0, r2s = 0, emax = 0, rmax = 0;
      for (int j = 0; j < h; ++j) {
        double e = std::fabs(double(r1[j]) - ref[j]);
        if (!(e == e)) e = INFINITY;
        e2 += e * e, r2s += ref[j] * ref[j], emax = std::max(emax, e), rmax = std::max(rmax, std::fabs(ref[j]));
      }
      const bool ok = std::sqrt(e2) <= 5e-5 * std::sqrt(r2s) && emax <= 1e-3 * rmax &&
                      std::memcmp(r1.data(), r2.data(), size_t(h) * 4) == 0;
      failures += !ok;
      const float warm = median_ms(v, dw, part, chunks, h, grid, nullptr, 0);
      const float cold = median_ms(v, dw, part, chunks, h, grid, flush, flush_bytes);
      std::printf("%-22s %6d %7lld %5d %10.2f %10.2f %s\n", v.name, h, chunks, grid, warm * 1e3, cold * 1e3,
                  ok ? "ok" : "FAIL");
    }
    CK(cudaFree(part));
    CK(cudaFree(dw));
  }
  std::printf("%s\n", failures ? "FAILED" : "ALL PASSED");
  return failures ? 1 : 0;
}
