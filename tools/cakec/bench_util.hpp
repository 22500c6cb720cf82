// What the GPU benchmarks of cakec share: a CUDA-event timer that flushes L2 before each
// timed call and returns the median, and a fast fill of a device tensor with random bf16.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "driver.hpp"
#include "driver_types.hpp"

namespace cakec {

struct Timer {
  CUstream stream;
  CUevent a, b;
  cake::DeviceBuffer flush{size_t(256) << 20};  // > 4x the 60 MB L2
  Timer() {
    CAKE_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CAKE_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
    CAKE_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  template <typename F>
  double median_ms(F&& f, int reps = 25) {
    f();  // warm-up
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      CAKE_CU(cuMemsetD32Async(flush.get(), uint32_t(i), flush.bytes() / 4, stream));
      CAKE_CU(cuEventRecord(a, stream));
      f();
      CAKE_CU(cuEventRecord(b, stream));
      CAKE_CU(cuEventSynchronize(b));
      float ms = 0;
      CAKE_CU(cuEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  // Medians of several contenders timed in turn, rep by rep: each sees the same clocks and
  // temperature (timed one after the other, the later ones run on a hotter, slower card).
  std::vector<double> median_ms_interleaved(const std::vector<std::function<void()>>& fs, int reps) {
    std::vector<std::vector<double>> t(fs.size());
    for (const auto& f : fs) f();  // warm-up
    for (int i = 0; i < reps; ++i)
      for (size_t c = 0; c < fs.size(); ++c) {
        CAKE_CU(cuMemsetD32Async(flush.get(), uint32_t(i * fs.size() + c), flush.bytes() / 4, stream));
        CAKE_CU(cuEventRecord(a, stream));
        fs[c]();
        CAKE_CU(cuEventRecord(b, stream));
        CAKE_CU(cuEventSynchronize(b));
        float ms = 0;
        CAKE_CU(cuEventElapsedTime(&ms, a, b));
        t[c].push_back(ms);
      }
    std::vector<double> med;
    for (auto& v : t) {
      std::sort(v.begin(), v.end());
      med.push_back(v[v.size() / 2]);
    }
    return med;
  }
};

inline uint16_t float_to_bf16(float f) {  // round to nearest even (no NaN inputs here)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random normal bf16 data (never zeros): a block of 1M values drawn on the host, repeated
// over the tensor by device copies (drawing billions of values on the host takes minutes).
inline void fill_random(CUdeviceptr p, size_t bf16_elems, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  const size_t block = std::min<size_t>(bf16_elems, size_t(1) << 20);
  std::vector<uint16_t> h(block);
  for (auto& v : h) v = float_to_bf16(d(rng));
  CAKE_CU(cuMemcpyHtoD(p, h.data(), h.size() * 2));
  for (size_t done = block; done < bf16_elems;) {
    size_t n = std::min(done, bf16_elems - done);  // doubling copies
    CAKE_CU(cuMemcpyDtoD(p + done * 2, p, n * 2));
    done += n;
  }
}

}  // namespace cakec
