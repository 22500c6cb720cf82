// Label gpu: what prepare finds out about each tensor's memory before anything runs. A
// DLTensor's device field is only a claim: host memory labelled CUDA, an extent past its
// allocation and another device's memory are ArgumentErrors naming the tensor; managed and
// mapped pinned host memory are served. The check is the generic prepare's, the same for
// every op: these tests reach it through elementwise.add, here and through the C ABI.
#include <gtest/gtest.h>

#include "cake_c.h"
#include "error.hpp"
#include "gpu_util.hpp"
#include "elementwise_ops.hpp"

namespace cake {
namespace {
using test::GpuTensor;

class MemoryCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAKE_SKIP_WITHOUT_GPU();
    ctx_.emplace();
    RuntimeOptions o;
    o.cache_dir = cache_.path().string();
    o.aot_dir = "";
    rt_ = std::make_unique<Runtime>(o);
  }
  std::optional<test::PrimaryContext> ctx_;
  test::TempDir cache_;
  std::unique_ptr<Runtime> rt_;
};

// A DLTensor over any address, labelled as memory of cuda:0.
struct Labelled {
  int64_t shape[3] = {0, 0, 0};
  DLTensor dl{};
  Labelled(void* data, DLDataType dtype, std::initializer_list<int64_t> dims) {
    int i = 0;
    for (int64_t d : dims) shape[i++] = d;
    dl.data = data;
    dl.device = {kDLCUDA, 0};
    dl.ndim = i;
    dl.dtype = dtype;
    dl.shape = shape;
  }
};
constexpr DLDataType kF32{kDLFloat, 32, 1};

TEST_F(MemoryCheckTest, PageableHostMemoryIsRefused) {
  const int64_t n = 4096;
  GpuTensor a(DType::f32, n), out(DType::f32, n);
  out.poison();
  std::vector<float> host(size_t(n), 1.0f);
  Labelled b(host.data(), kF32, {n});
  test::expect_argument_error([&] { ops::prepare_add(*rt_, out.dl(), a.dl(), b.dl); }, "b",
                              "host memory (or no allocation), not on cuda:0");
  test::expect_argument_error([&] { ops::add(*rt_, out.dl(), a.dl(), b.dl, nullptr); }, "b", "not on cuda:0");
  Labelled host_out(host.data(), kF32, {n});
  test::expect_argument_error([&] { ops::prepare_add(*rt_, host_out.dl, a.dl(), a.dl()); }, "out", "host memory");
  for (float v : out.download<float>()) ASSERT_TRUE(std::isnan(v));  // nothing was written
  EXPECT_EQ(rt_->load_stats().compiles.load(), 0);                // nor compiled
}

TEST_F(MemoryCheckTest, AnExtentPastItsAllocationIsRefused) {
  const int64_t n = 1 << 20;
  DeviceBuffer small(4096), big(size_t(n) * 4), next(size_t(n) * 4);  // neighbours, likely adjacent
  Labelled past(small.ptr(), kF32, {n}), b(big.ptr(), kF32, {n}), out(next.ptr(), kF32, {n});
  test::expect_argument_error([&] { ops::prepare_add(*rt_, out.dl, past.dl, b.dl); }, "a",
                              "extends past its allocation");
  // A view that starts inside and runs one element past the end.
  Labelled tail(big.ptr(), kF32, {n}), b2(next.ptr(), kF32, {n});
  tail.dl.byte_offset = 4;
  DeviceBuffer out2(size_t(n) * 4);
  Labelled o2(out2.ptr(), kF32, {n});
  test::expect_argument_error([&] { ops::prepare_add(*rt_, o2.dl, tail.dl, b2.dl); }, "a",
                              "extends past its allocation (by 4 bytes)");
}

TEST_F(MemoryCheckTest, ManagedAndMappedPinnedMemoryAreServed) {
  const int64_t n = 1000;
  const size_t bytes = size_t(n) * 4;
  CUdeviceptr managed = 0;
  void* pinned = nullptr;
  CAKE_CU(cuMemAllocManaged(&managed, bytes, CU_MEM_ATTACH_GLOBAL));
  CAKE_CU(cuMemAllocHost(&pinned, bytes));
  auto* m = reinterpret_cast<float*>(managed);
  auto* p = static_cast<float*>(pinned);
  for (int64_t i = 0; i < n; ++i) m[i] = float(i), p[i] = 0.5f;
  GpuTensor out(DType::f32, n);
  out.poison();
  Labelled a(m, kF32, {n}), b(p, kF32, {n});
  ops::prepare_add(*rt_, out.dl(), a.dl, b.dl).launch(nullptr);
  auto got = out.download<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], float(i) + 0.5f) << i;
  CAKE_CU(cuMemFree(managed));
  CAKE_CU(cuMemFreeHost(pinned));
}

// A reserved address range mapped only in its first part (cuMemAddressReserve + cuMemMap, as
// torch's expandable segments grow): a tensor inside the mapped part is served, one that runs
// into the unmapped part is refused.
TEST_F(MemoryCheckTest, AReservedRangeMappedInPartIsCheckedToItsLastByte) {
  const DriverApi& api = Driver::instance().api();
  if (!api.cuMemAddressReserve || !api.cuMemCreate || !api.cuMemMap || !api.cuMemSetAccess)
    GTEST_SKIP() << "the driver lacks the virtual memory management calls";
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CAKE_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr base = 0;
  CAKE_CU(cuMemAddressReserve(&base, 4 * gran, 0, 0, 0));
  CUmemGenericAllocationHandle h;
  CAKE_CU(cuMemCreate(&h, gran, &prop, 0));
  CAKE_CU(cuMemMap(base, gran, 0, h, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CAKE_CU(cuMemSetAccess(base, gran, &access, 1));
  const int64_t n = int64_t(gran / 4);
  GpuTensor b(DType::f32, 2 * n), out(DType::f32, 2 * n);
  Labelled inside(reinterpret_cast<void*>(base), kF32, {n}), across(reinterpret_cast<void*>(base), kF32, {2 * n});
  Labelled b1(b.dl().data, kF32, {n}), o1(out.dl().data, kF32, {n});
  EXPECT_NO_THROW(ops::prepare_add(*rt_, o1.dl, inside.dl, b1.dl));
  test::expect_argument_error([&] { ops::prepare_add(*rt_, out.dl(), across.dl, b.dl()); }, "a",
                              "extends past its allocation (its last byte:");
  CAKE_CU(cuMemUnmap(base, gran));
  CAKE_CU(cuMemRelease(h));
  CAKE_CU(cuMemAddressFree(base, 4 * gran));
}

// Stream-ordered allocations: one made before is checked as any device memory; one a stream
// capture makes (a graph's memory node) has no memory until the graph runs, and a one-call op
// in that capture is let through and computes the right values when the graph runs. (The
// first launch loads the program, so the capture itself loads nothing.)
TEST_F(MemoryCheckTest, StreamOrderedAllocationsAndAGraphsOwnMemory) {
  const int64_t n = 1 << 16;
  const size_t bytes = size_t(n) * 4;
  CUstream s;
  CAKE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr pooled = 0;
  CAKE_CU(cuMemAllocAsync(&pooled, bytes, s));
  CAKE_CU(cuMemsetD32Async(pooled, test::f32_bits(2.0f), size_t(n), s));
  CAKE_CU(cuStreamSynchronize(s));
  GpuTensor b(DType::f32, n), out(DType::f32, n);
  b.upload(std::vector<float>(size_t(n), 0.25f));
  Labelled a(reinterpret_cast<void*>(pooled), kF32, {n});
  out.poison();
  ops::prepare_add(*rt_, out.dl(), a.dl, b.dl()).launch(s);
  CAKE_CU(cuStreamSynchronize(s));
  for (float v : out.download<float>()) ASSERT_EQ(v, 2.25f);

  out.poison();
  CAKE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr in_graph = 0;
  CAKE_CU(cuMemAllocAsync(&in_graph, bytes, s));
  CAKE_CU(cuMemsetD32Async(in_graph, test::f32_bits(1.5f), size_t(n), s));
  Labelled g(reinterpret_cast<void*>(in_graph), kF32, {n});
  ops::add(*rt_, out.dl(), g.dl, b.dl(), s);
  CAKE_CU(cuMemFreeAsync(in_graph, s));
  CUgraph graph;
  CAKE_CU(cuStreamEndCapture(s, &graph));
  CUgraphExec exec;
  CAKE_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CAKE_CU(cuGraphLaunch(exec, s));
  CAKE_CU(cuStreamSynchronize(s));
  for (float v : out.download<float>()) ASSERT_EQ(v, 1.75f);
  CAKE_CU(cuGraphExecDestroy(exec));
  CAKE_CU(cuGraphDestroy(graph));
  CAKE_CU(cuMemFreeAsync(pooled, s));
  CAKE_CU(cuStreamSynchronize(s));
  CAKE_CU(cuStreamDestroy(s));
}

TEST_F(MemoryCheckTest, AnotherDevicesMemoryIsRefused) {
  if (Driver::instance().device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  CUdevice dev1;
  CAKE_CU(cuDeviceGet(&dev1, 1));
  CUcontext ctx1;
  CAKE_CU(cuDevicePrimaryCtxRetain(&ctx1, dev1));
  const int64_t n = 1024;
  CUdeviceptr on1 = 0;
  {
    ContextGuard g(ctx1);
    CAKE_CU(cuMemAlloc(&on1, size_t(n) * 4));
  }
  GpuTensor a(DType::f32, n), out(DType::f32, n);
  Labelled b(reinterpret_cast<void*>(on1), kF32, {n});  // labelled cuda:0, lives on cuda:1
  test::expect_argument_error([&] { ops::prepare_add(*rt_, out.dl(), a.dl(), b.dl); }, "b",
                              "memory of cuda:1, not on cuda:0");
  {
    ContextGuard g(ctx1);
    CAKE_CU(cuMemFree(on1));
  }
  CAKE_CU(cuDevicePrimaryCtxRelease(dev1));
}

TEST_F(MemoryCheckTest, TheCApiReportsTheArgument) {
  cake_runtime* crt = nullptr;
  ASSERT_EQ(cake_runtime_create(("{\"cache_dir\": \"" + cache_.path().string() + "\"}").c_str(), &crt), CAKE_OK)
      << cake_last_error();
  const int64_t n = 256;
  GpuTensor a(DType::f32, n), out(DType::f32, n);
  std::vector<float> host(static_cast<size_t>(n), 0.0f);
  Labelled b(host.data(), kF32, {n});
  cake_launch* l = nullptr;
  const char* names[] = {"out", "a", "b"};
  const DLTensor* tensors[] = {&out.dl(), &a.dl(), &b.dl};
  EXPECT_EQ(cake_prepare(crt, "elementwise.add", 3, names, tensors, nullptr, &l), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("host memory"), std::string::npos) << cake_last_error();
  EXPECT_EQ(l, nullptr);
  cake_runtime_destroy(crt);
}

}  // namespace
}  // namespace cake
