// Helpers for the GPU tests (label gpu): skip where there is no GPU, device buffers,
// DLTensors over them, bf16 on the host, NaN poison.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "driver.hpp"
#include "driver_types.hpp"
#include "error.hpp"
#include "runtime.hpp"
#include "tensor.hpp"
#include "test_util.hpp"

namespace cake::test {

#define CAKE_SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                       \
    auto& d_ = ::cake::Driver::instance();                                                   \
    if (!d_.available()) GTEST_SKIP() << "no GPU: " << d_.missing_reason();                  \
    if (d_.device_count() == 0) GTEST_SKIP() << "no GPU: the driver reports no device";     \
  } while (0)

inline uint16_t bf16_bits(float f) {  // round to nearest even, as cvt.rn.bf16.f32
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A device buffer in the primary context of device 0, with a DLTensor view of it.
class GpuTensor {
 public:
  GpuTensor(DType t, int64_t n, size_t byte_offset = 0) : dtype_(t), n_(n), offset_(byte_offset) {
    buf_ = DeviceBuffer(size_t(n) * size_t(dtype_size(t)) + byte_offset + 256);
    shape_[0] = n;
    dl_.data = buf_.ptr();
    dl_.device = {kDLCUDA, 0};
    dl_.ndim = 1;
    dl_.dtype = t == DType::bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    dl_.shape = shape_;
    dl_.strides = nullptr;
    dl_.byte_offset = byte_offset;
  }
  const DLTensor& dl() const { return dl_; }
  DLTensor& dl() { return dl_; }
  CUdeviceptr ptr() const { return buf_.get() + offset_; }
  size_t bytes() const { return size_t(n_) * size_t(dtype_size(dtype_)); }
  template <typename T>
  void upload(const std::vector<T>& host) {
    CAKE_CU(cuMemcpyHtoD(ptr(), host.data(), bytes()));
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(n_ < 0 ? 0 : n_));
    CAKE_CU(cuCtxSynchronize());
    CAKE_CU(cuMemcpyDtoH(host.data(), ptr(), bytes()));
    return host;
  }
  void poison() {  // all-ones bytes: NaN in f32 and bf16
    CAKE_CU(cuMemsetD8(ptr(), 0xff, bytes()));
  }

 private:
  DType dtype_;
  int64_t n_;
  size_t offset_;
  DeviceBuffer buf_;
  DLTensor dl_{};
  int64_t shape_[1];
};

// `call` must throw ArgumentError naming `arg`, with `text` in its message.
template <typename F>
void expect_argument_error(F&& call, const std::string& arg, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error about " << arg;
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_bits(v[i]);
  return out;
}

// Makes device 0's primary context current for a test's allocations.
class PrimaryContext {
 public:
  PrimaryContext() {
    CUdevice dev;
    CAKE_CU(cuDeviceGet(&dev, 0));
    CAKE_CU(cuDevicePrimaryCtxRetain(&ctx_, dev));
    CAKE_CU(cuCtxSetCurrent(ctx_));
  }
  ~PrimaryContext() {
    CUdevice dev;
    if (Driver::instance().api().cuDeviceGet(&dev, 0) == CUDA_SUCCESS)
      Driver::instance().api().cuDevicePrimaryCtxRelease(dev);
  }
  CUcontext get() const { return ctx_; }

 private:
  CUcontext ctx_ = nullptr;
};

// What `record` enqueues on a stream, captured once into a CUDA graph on a non-blocking stream
// of its own; replay() launches the graph and waits for it.
class CapturedGraph {
 public:
  template <typename F>
  explicit CapturedGraph(F&& record) {
    CAKE_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CAKE_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
    record(stream_);
    CAKE_CU(cuStreamEndCapture(stream_, &graph_));
    CAKE_CU(cuGraphInstantiateWithFlags(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    const auto& api = Driver::instance().api();
    if (exec_) api.cuGraphExecDestroy(exec_);
    if (graph_) api.cuGraphDestroy(graph_);
    if (stream_) api.cuStreamDestroy(stream_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void replay(int times = 1) const {
    for (int i = 0; i < times; ++i) CAKE_CU(cuGraphLaunch(exec_, stream_));
    CAKE_CU(cuStreamSynchronize(stream_));
  }

 private:
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// TARGETS.md's budget for FP32 outputs against an FP64 reference: relative Frobenius error
// <= 5e-5 and max error <= 1e-3 max |ref|; every element written (finite).
inline void expect_f32_close(const std::vector<float>& got, const std::vector<double>& ref, const char* what) {
  double num = 0, den = 0, maxerr = 0, maxref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "] not written (or computed from a poisoned value)";
    double d = double(got[i]) - ref[i];
    num += d * d, den += ref[i] * ref[i];
    maxerr = std::max(maxerr, std::fabs(d)), maxref = std::max(maxref, std::fabs(ref[i]));
  }
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), 5e-5) << what;
  EXPECT_LE(maxerr, 1e-3 * maxref) << what;
}

// An accumulate into f32 against the bits it promises, fp32(out0 + dw) at every element:
// reports the first three elements that differ (`what` names the call) and returns how many do.
inline size_t accumulate_mismatches(const std::vector<float>& got, const std::vector<float>& out0,
                                    const std::vector<float>& dw, const std::string& what) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (f32_bits(got[i]) != f32_bits(out0[i] + dw[i]) && bad++ < 3)
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << ", want " << out0[i] + dw[i];
  return bad;
}

// A contiguous device tensor of any rank, with its DLTensor.
struct Dev {
  Dev(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
    n = std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
    buf = DeviceBuffer(size_t(std::max<int64_t>(n, 1)) * size_t(dtype_size(t)));
    dl.data = buf.ptr();
    dl.device = {kDLCUDA, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = t == DType::bf16  ? DLDataType{kDLBfloat, 16, 1}
               : t == DType::i32 ? DLDataType{kDLInt, 32, 1}
                                 : DLDataType{kDLFloat, 32, 1};
    dl.shape = shape.data();
  }
  size_t bytes() const { return size_t(n) * size_t(dtype_size(dtype)); }
  template <typename T>
  void upload(const std::vector<T>& v) {
    ASSERT_EQ(v.size() * sizeof(T), bytes());
    if (n) CAKE_CU(cuMemcpyHtoD(buf.get(), v.data(), bytes()));
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> v(bytes() / sizeof(T));
    CAKE_CU(cuCtxSynchronize());
    if (n) CAKE_CU(cuMemcpyDtoH(v.data(), buf.get(), bytes()));
    return v;
  }
  void poison() {
    if (n) CAKE_CU(cuMemsetD8(buf.get(), 0xff, bytes()));
  }
  DType dtype;
  std::vector<int64_t> shape;
  int64_t n = 0;
  DeviceBuffer buf;
  DLTensor dl{};
};

// Splits [0, n) over the host's cores (FP64 references of GEMMs).
inline void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
  for (auto& th : pool) th.join();
}

inline std::vector<double> widen(const std::vector<uint16_t>& b) {
  std::vector<double> d(b.size());
  for (size_t i = 0; i < b.size(); ++i) d[i] = bf16_float(b[i]);
  return d;
}

// Budget for bf16 outputs (TARGETS.md), element by element; f32 ones: expect_f32_close.
inline void expect_bf16_close(const std::vector<uint16_t>& got, const std::vector<double>& ref, size_t count, const char* what) {
  int64_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    double g = bf16_float(got[i]), e = ref[i];
    if (!(std::fabs(g - e) <= 1e-2 + 1e-2 * std::fabs(e)) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "] = " << g << ", ref " << e;
  }
  EXPECT_EQ(bad, 0) << what << ": elements outside the bf16 budget";
}

// A test with device 0's primary context current and a fresh Runtime over a private cache
// folder and no aot/: every program the test needs is compiled by its own process.
template <typename Base = ::testing::Test>
class RuntimeTest : public Base {
 protected:
  void SetUp() override {
    CAKE_SKIP_WITHOUT_GPU();
    ctx_.emplace();
    RuntimeOptions o;
    o.cache_dir = cache_.path().string();
    o.aot_dir = "";
    o.stand_ins = false;  // the planned programs themselves, never a stand-in while one compiles
    rt_ = std::make_unique<Runtime>(o);
  }
  std::optional<PrimaryContext> ctx_;
  TempDir cache_;
  std::unique_ptr<Runtime> rt_;
};

}  // namespace cake::test
