// What the GPU benchmarks of cakec share: a CUDA-event timer that flushes L2 before each
// timed call and returns the median (contenders in turn call by call, or each alone for a
// sustained window), and a fast fill of a device tensor with random bf16.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "bench_stats.hpp"
#include "driver.hpp"
#include "driver_types.hpp"
#include "error.hpp"
#include "nvml_reader.hpp"

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
  // One call of f after flushing L2 (with a fill value that differs call to call): its ms.
  template <typename F>
  double timed_ms(F&& f, uint32_t flush_value) {
    CAKE_CU(cuMemsetD32Async(flush.get(), flush_value, flush.bytes() / 4, stream));
    CAKE_CU(cuEventRecord(a, stream));
    f();
    CAKE_CU(cuEventRecord(b, stream));
    CAKE_CU(cuEventSynchronize(b));
    float ms = 0;
    CAKE_CU(cuEventElapsedTime(&ms, a, b));
    return ms;
  }
  template <typename F>
  double median_ms(F&& f, int reps = 25) {
    f();  // warm-up
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(timed_ms(f, uint32_t(i)));
    return median_time(std::move(t));
  }
  // Medians of several contenders timed in turn, rep by rep: each sees the same clocks and
  // temperature (timed one after the other, the later ones run on a hotter, slower card).
  // The clock a call runs at is the one the calls before it left: under the card's power
  // cap it follows the draw of the last ~100 ms, so this compares work per clock at a
  // shared clock; sustained() gives each contender the clock of its own draw.
  // With `permute`, rep i runs the contenders in the i-th permutation of their order (cycling
  // through all of them), so each follows each other one about equally often: the clock a
  // call starts at is what the previous call's draw left, and in a fixed order one contender
  // always follows the same neighbour. With three contenders and 10 reps, the first runs
  // before the second in 5 reps and after it in 5, but before the third in 6 and after it in 4
  // (10 is not a multiple of the 6 permutations; 12 reps would balance both). `calls`, if given, receives every timed call in
  // the order they ran.
  std::vector<double> median_ms_interleaved(const std::vector<std::function<void()>>& fs, int reps,
                                            bool permute = true, std::vector<TimedCall>* calls = nullptr) {
    std::vector<std::vector<double>> t(fs.size());
    for (const auto& f : fs) f();  // warm-up
    std::vector<size_t> order(fs.size());
    for (size_t c = 0; c < order.size(); ++c) order[c] = c;
    uint32_t call = 0;
    for (int i = 0; i < reps; ++i) {
      for (size_t slot = 0; slot < order.size(); ++slot) {
        const size_t c = order[slot];
        t[c].push_back(timed_ms(fs[c], call++));
        if (calls) calls->push_back({i, int(slot), int(c), t[c].back()});
      }
      if (permute) std::next_permutation(order.begin(), order.end());  // back to the first after the last
    }
    std::vector<double> med;
    for (auto& v : t) med.push_back(median_time(std::move(v)));
    return med;
  }

  struct Sustained {
    // mhz, watts: means over the windows; joules: a call's energy (board counter), the L2
    // flush's share taken off. NaN where NVML cannot say (no counter, or windows too short).
    double ms, mhz, watts, joules;
  };
  // Each contender alone, calls back to back (L2 flushed before each, as above): warm_ms of
  // untimed calls, in which the clock leaves the previous contender's and settles at what
  // this one's own power draw allows, then window_ms of timed calls with the clock, power and
  // energy read meanwhile. Contenders in turn, `rounds` times; per contender the mean over
  // rounds of the mean time per call, and the mean clock, power and energy per call over its
  // windows. Each round also times a window of the flush alone: every contender's calls pay
  // one flush each, whose energy is taken off theirs.
  std::vector<Sustained> sustained(const std::vector<std::function<void()>>& fs, int warm_ms, int window_ms,
                                   int rounds, const Nvml* nvml) {
    std::vector<Sustained> out(fs.size(), Sustained{0, 0, 0, 0});
    double flush_joules = 0;
    for (int r = 0; r < rounds; ++r) {
      flush_joules += window([] {}, std::min(warm_ms, 200), window_ms, nvml).joules / rounds;
      for (size_t c = 0; c < fs.size(); ++c) {
        const Sustained w = window(fs[c], warm_ms, window_ms, nvml);
        out[c].ms += w.ms / rounds, out[c].mhz += w.mhz / rounds, out[c].watts += w.watts / rounds;
        out[c].joules += w.joules / rounds;
      }
    }
    // NVML's energy counter moves in steps of milliseconds: a window too short for it reads a
    // call's energy as zero, or below the flush's, which is no measurement.
    for (auto& o : out) o.joules = o.joules - flush_joules > 0 ? o.joules - flush_joules : NAN;
    return out;
  }

 private:
  // warm_ms of untimed calls of f, then window_ms of timed ones: their mean ms, the mean clock
  // and power, and the energy per call (flush included).
  Sustained window(const std::function<void()>& f, int warm_ms, int window_ms, const Nvml* nvml) {
    using clock = std::chrono::steady_clock;
    uint32_t i = 0;
    for (auto t0 = clock::now(); clock::now() - t0 < std::chrono::milliseconds(warm_ms);) timed_ms(f, i++);
    unsigned long long e0 = 0, e1 = 0;
    const bool energy = nvml && nvml->energy_mj(e0);  // the GPU is idle here: the last call was waited for
    ClockSampler sampler(nvml);
    double sum = 0;
    int calls = 0;
    for (auto t0 = clock::now(); calls == 0 || clock::now() - t0 < std::chrono::milliseconds(window_ms); ++calls)
      sum += timed_ms(f, i++);
    const ClockSampler::Means m = sampler.stop();
    const double joules = energy && nvml->energy_mj(e1) && e1 >= e0 ? double(e1 - e0) / 1000.0 / calls : NAN;
    return {sum / calls, m.mhz, m.watts, joules};
  }
};

// f's launches captured once into a CUDA graph on `stream`; the returned call replays it (one
// launch for all of them, as a training step's graph runs them). Throws where f does
// something a capture refuses.
inline std::function<void()> graph_of(const std::function<void()>& f, CUstream stream) {
  CUgraph graph;
  CAKE_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  try {
    f();
  } catch (...) {
    auto& api = cake::Driver::instance().api();
    if (api.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && graph) api.cuGraphDestroy(graph);
    throw;
  }
  CAKE_CU(cuStreamEndCapture(stream, &graph));
  CUgraphExec exec;
  const CUresult made = cake::Driver::instance().api().cuGraphInstantiateWithFlags(&exec, graph, 0);
  CAKE_CU(cuGraphDestroy(graph));
  if (made != CUDA_SUCCESS) cake::throw_driver_error("cuGraphInstantiateWithFlags", made);
  std::shared_ptr<CUgraphExec_st> held(exec, [](CUgraphExec e) { cake::Driver::instance().api().cuGraphExecDestroy(e); });
  return [held, stream] { CAKE_CU(cuGraphLaunch(held.get(), stream)); };
}

// Device 0's primary context made current (the context cuBLAS, through the runtime API, uses
// too); throws naming `bench` where there is no GPU.
inline CUdevice use_primary_context(const std::string& bench) {
  auto& drv = cake::Driver::instance();
  if (!drv.available() || drv.device_count() == 0)
    throw cake::Error("cakec bench " + bench + " needs a GPU: " +
                      (drv.available() ? std::string("no CUDA device") : drv.missing_reason()));
  CUdevice dev;
  CAKE_CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CAKE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CAKE_CU(cuCtxSetCurrent(ctx));
  return dev;
}

constexpr DLDataType kBf16{kDLBfloat, 16, 1}, kF32{kDLFloat, 32, 1};

// A contiguous DLTensor over a device buffer of device 0 (`shape` must outlive it).
inline DLTensor tensor(const cake::DeviceBuffer& b, DLDataType dt, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = b.ptr();
  t.device = {kDLCUDA, 0};
  t.ndim = int(shape.size());
  t.dtype = dt;
  t.shape = shape.data();
  return t;
}

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

// The first `count` values of a device buffer of bf16 (else f32) values, as floats (after the
// context's work is done).
inline std::vector<float> read_floats(const cake::DeviceBuffer& b, size_t count, bool bf16) {
  std::vector<float> v(count);
  CAKE_CU(cuCtxSynchronize());
  if (!bf16) {
    CAKE_CU(cuMemcpyDtoH(v.data(), b.get(), count * 4));
    return v;
  }
  std::vector<uint16_t> h(count);
  CAKE_CU(cuMemcpyDtoH(h.data(), b.get(), count * 2));
  for (size_t i = 0; i < count; ++i) v[i] = bf16_to_float(h[i]);
  return v;
}

// ||got - want|| / ||want|| (Frobenius; NaN where got has one).
inline double rel_frobenius(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d, den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Random normal bf16 data (never zeros): a block of 1M values drawn on the host, repeated
// over the tensor by device copies (drawing billions of values on the host takes minutes).
// Returns the block: element i of the tensor is block[i % block.size()].
inline std::vector<uint16_t> fill_random(CUdeviceptr p, size_t bf16_elems, uint32_t seed) {
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
  return h;
}

}  // namespace cakec
