// Label multigpu (skips with fewer than two GPUs): one process, one Runtime, the same op on
// tensors of GPU 0 and GPU 1, the first calls racing from two threads. Each device gets its
// own module (modules are per CUDA context), each launch runs on its tensors' device and
// matches a launch prepared alone on GPU 0, and a launch on the other device's stream is an
// error, not a crash.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "error.hpp"
#include "gpu_util.hpp"
#include "ops.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

constexpr int64_t T = 512, H = 4096;

// One device's tensors of an rmsnorm forward, made in that device's primary context.
struct DeviceSet {
  explicit DeviceSet(int ordinal) : ordinal(ordinal) {
    CUdevice dev;
    CAKE_CU(cuDeviceGet(&dev, ordinal));
    CAKE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    ContextGuard g(ctx);
    x = DeviceBuffer(size_t(T * H) * 2), y = DeviceBuffer(size_t(T * H) * 2), w = DeviceBuffer(size_t(H) * 2);
    rstd = DeviceBuffer(size_t(T) * 4);
    const auto hx = test::to_bf16(test::random_floats(size_t(T * H), 11));
    const auto hw = test::to_bf16(test::random_floats(size_t(H), 12, 0.5f));
    CAKE_CU(cuMemcpyHtoD(x.get(), hx.data(), hx.size() * 2));
    CAKE_CU(cuMemcpyHtoD(w.get(), hw.data(), hw.size() * 2));
    CAKE_CU(cuMemsetD8(y.get(), 0xff, y.bytes()));
    CAKE_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  }
  ~DeviceSet() {
    {
      ContextGuard g(ctx);
      x = DeviceBuffer(), y = DeviceBuffer(), w = DeviceBuffer(), rstd = DeviceBuffer();
      Driver::instance().api().cuStreamDestroy(stream);
    }
    CUdevice dev;
    if (Driver::instance().api().cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS)
      Driver::instance().api().cuDevicePrimaryCtxRelease(dev);
  }
  DLTensor tensor(const DeviceBuffer& b, int64_t* shape, int ndim, DLDataType t) {
    DLTensor d{};
    d.data = reinterpret_cast<void*>(b.get());
    d.device = {kDLCUDA, ordinal};
    d.ndim = ndim;
    d.dtype = t;
    d.shape = shape;
    return d;
  }
  ops::NamedTensors named() {
    dx = tensor(x, rows, 2, {kDLBfloat, 16, 1}), dy = tensor(y, rows, 2, {kDLBfloat, 16, 1});
    dw = tensor(w, cols, 1, {kDLBfloat, 16, 1}), dr = tensor(rstd, rows, 1, {kDLFloat, 32, 1});
    return {{"y", &dy}, {"rstd", &dr}, {"x", &dx}, {"w", &dw}};
  }
  std::vector<uint16_t> y_host() {
    ContextGuard g(ctx);
    CAKE_CU(cuCtxSynchronize());
    std::vector<uint16_t> v(size_t(T * H));
    CAKE_CU(cuMemcpyDtoH(v.data(), y.get(), v.size() * 2));
    return v;
  }
  int ordinal;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  DeviceBuffer x, y, w, rstd;
  int64_t rows[2] = {T, H}, cols[1] = {H};
  DLTensor dx{}, dy{}, dw{}, dr{};
};

TEST(MultiGpu, OneRuntimeTwoDevicesRacingFirstCalls) {
  CAKE_SKIP_WITHOUT_GPU();
  if (Driver::instance().device_count() < 2)
    GTEST_SKIP() << "needs two GPUs; the driver reports " << Driver::instance().device_count();
  test::TempDir cache;
  RuntimeOptions o;
  o.cache_dir = cache.path().string();
  Runtime rt(o);
  DeviceSet d0(0), d1(1);
  ops::OpOptions opt;
  opt.eps = 1e-6f;
  std::vector<std::optional<Launch>> launches(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      DeviceSet& d = i == 0 ? d0 : d1;
      try {
        launches[size_t(i)] = ops::prepare(rt, "rmsnorm.fwd", d.named(), opt);
        launches[size_t(i)]->launch(d.stream);
      } catch (const std::exception& e) {
        errors[size_t(i)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_NE(launches[0]->context(), launches[1]->context()) << "one module per device's context";
  EXPECT_EQ(d0.y_host(), d1.y_host()) << "the same inputs on both devices give the same bits";
  EXPECT_GE(rt.load_stats().module_loads.load(), 2);
  // GPU 1's launch on GPU 0's stream: the driver refuses it; cake reports it.
  EXPECT_THROW(launches[1]->launch(d0.stream), DriverError);
}

}  // namespace
}  // namespace cake
