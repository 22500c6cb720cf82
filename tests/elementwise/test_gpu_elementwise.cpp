// Label gpu: the elementwise family on a real device through the whole runtime: planner,
// loader (JIT, disk cache, aot/), prepared launches, graph capture, two contexts, the C ABI.
// Outputs are poisoned with NaN before every run and compared bit for bit with the CPU.
#include <gtest/gtest.h>

#include "cake_c.h"
#include "error.hpp"
#include "gpu_util.hpp"
#include "elementwise_ops.hpp"
#include "prebuild.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using test::GpuTensor;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAKE_SKIP_WITHOUT_GPU();
    ctx_.emplace();
  }
  // A runtime with its own empty disk cache and no aot/: the first call must JIT.
  std::unique_ptr<Runtime> fresh_runtime(RuntimeOptions o = {}) {
    if (!o.cache_dir) o.cache_dir = cache_.path().string();
    if (!o.aot_dir) o.aot_dir = "";
    return std::make_unique<Runtime>(o);
  }
  std::optional<test::PrimaryContext> ctx_;
  test::TempDir cache_;
};

TEST_F(GpuTest, AddF32AllSizesAndAlignments) {
  auto rt = fresh_runtime();
  for (int64_t n : {1, 7, 4096, 1000003}) {
    for (size_t offset : {size_t(0), size_t(4)}) {  // offset 4: the vector program cannot serve
      auto ha = test::random_floats(size_t(n), 1 + n), hb = test::random_floats(size_t(n), 2 + n);
      GpuTensor a(DType::f32, n, offset), b(DType::f32, n), out(DType::f32, n);
      a.upload(ha);
      b.upload(hb);
      out.poison();
      auto l = ops::prepare_add(*rt, out.dl(), a.dl(), b.dl());
      ASSERT_NE(l.plan(), nullptr);
      EXPECT_EQ(l.plan()->route, (n % 4 == 0 && offset == 0) ? "add_f32_vec4" : "add_f32") << n;
      l.launch(nullptr);
      auto got = out.download<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(ha[size_t(i)] + hb[size_t(i)]))
            << "n=" << n << " i=" << i;
    }
  }
}

TEST_F(GpuTest, AddBf16InPlace) {
  auto rt = fresh_runtime();
  const int64_t n = 1 << 20;
  auto ha = test::to_bf16(test::random_floats(n, 3)), hb = test::to_bf16(test::random_floats(n, 4));
  GpuTensor a(DType::bf16, n), b(DType::bf16, n);
  a.upload(ha);
  b.upload(hb);
  auto l = ops::prepare_add(*rt, a.dl(), a.dl(), b.dl());  // a = a + b
  EXPECT_EQ(l.plan()->route, "add_bf16_vec8");
  l.launch(nullptr);
  auto got = a.download<uint16_t>();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[size_t(i)], test::bf16_bits(test::bf16_float(ha[size_t(i)]) + test::bf16_float(hb[size_t(i)]))) << i;
}

TEST_F(GpuTest, CastBothWays) {
  auto rt = fresh_runtime();
  for (int64_t n : {int64_t(5), int64_t(1) << 20}) {
    auto hf = test::random_floats(size_t(n), 5, 100.0f);
    GpuTensor f(DType::f32, n), h(DType::bf16, n), back(DType::f32, n);
    f.upload(hf);
    h.poison();
    back.poison();
    ops::cast(*rt, h.dl(), f.dl(), false, nullptr);
    ops::cast(*rt, back.dl(), h.dl(), false, nullptr);
    auto gh = h.download<uint16_t>();
    auto gb = back.download<float>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(gh[size_t(i)], test::bf16_bits(hf[size_t(i)])) << i;
      ASSERT_EQ(test::f32_bits(gb[size_t(i)]), test::f32_bits(test::bf16_float(gh[size_t(i)]))) << i;
    }
  }
}

// Fused accumulate (out += cast(in) in one pass) and the composed route (cast into scratch,
// then add) give the same bits: out + dW rounded once to f32.
TEST_F(GpuTest, AccumulateFusedAndComposedAgreeBitwise) {
  const int64_t n = 3 * 1024 * 1024 + 8;
  auto hout = test::random_floats(size_t(n), 6), hin = test::random_floats(size_t(n), 7);
  auto hin16 = test::to_bf16(hin);
  // A user registry puts the composed candidate on top for f32, so the same call composes.
  test::TempDir dir;
  auto user = dir.write("composed.json", R"({"routes": [{"op": "elementwise.cast", "candidates": [
    {"name": "force_composed", "accumulate": "composed", "scratch": {"dims": ["n"], "dtype_of": "out"},
     "window": {"dtypes": {"out": "f32", "in": "bf16"}},
     "stages": [{"program": "ew_cast_f32_bf16_v8", "bind": {"out": "scratch", "in": "in"}},
                {"program": "ew_add_f32_v4", "bind": {"out": "out", "a": "out", "b": "scratch"}}]}]}]})");
  RuntimeOptions composed_opt;
  composed_opt.registry_files = {user.string()};
  auto fused_rt = fresh_runtime(), composed_rt = fresh_runtime(composed_opt);
  std::vector<float> expect(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) expect[size_t(i)] = hout[size_t(i)] + test::bf16_float(hin16[size_t(i)]);
  for (Runtime* rt : {fused_rt.get(), composed_rt.get()}) {
    GpuTensor out(DType::f32, n), in(DType::bf16, n);
    out.upload(hout);
    in.upload(hin16);
    auto l = ops::prepare_cast(*rt, out.dl(), in.dl(), true);
    EXPECT_EQ(l.plan()->accumulate, rt == fused_rt.get() ? Accumulate::fused : Accumulate::composed);
    EXPECT_EQ(l.scratch_bytes(), rt == fused_rt.get() ? 0u : size_t(n) * 4);
    l.launch(nullptr);
    auto got = out.download<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(expect[size_t(i)])) << i;
  }
}

TEST_F(GpuTest, ComposedBf16AccumulateAndOneCallScratch) {
  auto rt = fresh_runtime();
  const int64_t n = 100003;
  auto hout = test::to_bf16(test::random_floats(size_t(n), 8));
  auto hin = test::random_floats(size_t(n), 9);
  GpuTensor out(DType::bf16, n), in(DType::f32, n);
  out.upload(hout);
  in.upload(hin);
  ops::cast(*rt, out.dl(), in.dl(), true, nullptr);  // one call: stream-ordered scratch
  auto got = out.download<uint16_t>();
  for (int64_t i = 0; i < n; ++i) {
    float s = test::bf16_float(test::bf16_bits(hin[size_t(i)]));
    ASSERT_EQ(got[size_t(i)], test::bf16_bits(test::bf16_float(hout[size_t(i)]) + s)) << i;
  }
}

TEST_F(GpuTest, FirstCallJitsThenMemoryThenDisk) {
  auto rt = fresh_runtime();
  const int64_t n = 4096;
  GpuTensor a(DType::f32, n), b(DType::f32, n), out(DType::f32, n);
  a.upload(test::random_floats(n, 10));
  b.upload(test::random_floats(n, 11));
  ops::prepare_add(*rt, out.dl(), a.dl(), b.dl()).launch(nullptr);
  const auto& s = rt->load_stats();
  EXPECT_EQ(s.compiles.load(), 1);
  EXPECT_EQ(s.module_loads.load(), 1);
  ops::prepare_add(*rt, out.dl(), a.dl(), b.dl()).launch(nullptr);
  EXPECT_EQ(s.compiles.load(), 1);
  EXPECT_EQ(s.module_loads.load(), 1);
  EXPECT_GE(s.memory_hits.load(), 1);
  auto second = fresh_runtime();  // same disk cache, empty memory
  ops::prepare_add(*second, out.dl(), a.dl(), b.dl()).launch(nullptr);
  EXPECT_EQ(second->load_stats().compiles.load(), 0);
  EXPECT_EQ(second->load_stats().disk_hits.load(), 1);
  CAKE_CU(cuCtxSynchronize());
}

// ops::prebuild_for on the device's own facts: the call's first prepare then compiles nothing.
TEST_F(GpuTest, PrebuildForLeavesNothingToCompileAtTheFirstCall) {
  auto rt = fresh_runtime();
  const int64_t n = 1 << 16;
  Problem add;
  add.op = "elementwise.add";
  add.dims = {{"n", n}};
  add.dtypes = {{"out", DType::f32}};
  PrebuildSummary sum = ops::prebuild_for(*rt, {add});
  EXPECT_EQ(sum.built, 1);
  EXPECT_EQ(sum.failed, 0);
  EXPECT_TRUE(sum.skipped.empty());
  auto ha = test::random_floats(n, 21), hb = test::random_floats(n, 22);
  GpuTensor a(DType::f32, n), b(DType::f32, n), out(DType::f32, n);
  a.upload(ha);
  b.upload(hb);
  out.poison();
  ops::prepare_add(*rt, out.dl(), a.dl(), b.dl()).launch(nullptr);
  EXPECT_EQ(rt->load_stats().compiles.load(), 1);  // the prebuild's, none at the call
  auto got = out.download<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(ha[size_t(i)] + hb[size_t(i)]));
}

TEST_F(GpuTest, AotCubinServesWithoutNvrtc) {
  test::TempDir aot;
  PrebuildOptions p;
  p.archs = {Driver::instance().device(0).arch};
  p.out = aot.path();
  p.filter = std::regex("^ew_cast_");
  auto sum = prebuild(*Registry::load_default(), Nvrtc::instance(), p);
  ASSERT_GT(sum.built, 0) << "NVRTC is needed to make the fixture";
  RuntimeOptions o;
  o.aot_dir = aot.path().string();
  o.cache_dir = "";  // no disk cache
  o.jit = false;
  NvrtcInfo none;
  none.missing_reason = "hidden by the test";
  o.nvrtc = none;
  o.compile = [](const RenderedProgram&, const Arch&, const std::vector<std::string>&) -> CompiledBinary {
    throw Error("the test forbids compiling");
  };
  Runtime rt(o);
  const int64_t n = 1 << 16;
  auto hf = test::random_floats(n, 12);
  GpuTensor f(DType::f32, n), h(DType::bf16, n);
  f.upload(hf);
  h.poison();
  auto l = ops::prepare_cast(rt, h.dl(), f.dl(), false);
  EXPECT_EQ(l.plan()->stages[0].served_by, ServedBy::aot);
  l.launch(nullptr);
  auto got = h.download<uint16_t>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], test::bf16_bits(hf[size_t(i)]));
  EXPECT_EQ(rt.load_stats().aot_loads.load(), 1);
  EXPECT_EQ(rt.load_stats().compiles.load(), 0);
  // An op whose programs are not prebuilt has no route, and says why.
  GpuTensor x(DType::f32, n), y(DType::f32, n);
  try {
    ops::prepare_add(rt, x.dl(), f.dl(), y.dl());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unavailable:jit_disabled"), std::string::npos) << e.what();
  }
}

TEST_F(GpuTest, PreparedLaunchReplaysInACapturedGraph) {
  auto rt = fresh_runtime();
  const int64_t n = 1 << 20;
  auto hout = test::random_floats(n, 13), hin = test::random_floats(n, 14);
  auto hin16 = test::to_bf16(hin);
  GpuTensor out(DType::f32, n), in(DType::bf16, n);
  out.upload(hout);
  in.upload(hin16);
  auto l = ops::prepare_cast(*rt, out.dl(), in.dl(), true);
  test::CapturedGraph graph([&](CUstream s) {
    l.launch(s);
    l.launch(s);
  });
  graph.replay(3);
  auto got = out.download<float>();
  for (int64_t i = 0; i < n; ++i) {
    float v = hout[size_t(i)];
    for (int k = 0; k < 6; ++k) v += test::bf16_float(hin16[size_t(i)]);
    ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(v)) << i;
  }
}

TEST_F(GpuTest, TwoContextsGetTheirOwnModules) {
  auto rt = fresh_runtime();
  const int64_t n = 8192;
  auto run_in_current = [&](uint64_t seed) {
    auto ha = test::random_floats(n, seed), hb = test::random_floats(n, seed + 1);
    GpuTensor a(DType::f32, n), b(DType::f32, n), out(DType::f32, n);
    a.upload(ha);
    b.upload(hb);
    out.poison();
    ops::add(*rt, out.dl(), a.dl(), b.dl(), nullptr);
    auto got = out.download<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(ha[size_t(i)] + hb[size_t(i)]));
  };
  run_in_current(20);  // primary context
  CUdevice dev;
  CAKE_CU(cuDeviceGet(&dev, 0));
  CUcontext second;
  CAKE_CU(cuCtxCreate(&second, nullptr, 0, dev));  // now current
  run_in_current(30);
  EXPECT_EQ(rt->load_stats().compiles.load(), 1);
  EXPECT_EQ(rt->load_stats().module_loads.load(), 2);  // one module per context
  rt.reset();  // its modules live in `second`: unload them before the context goes
  CAKE_CU(cuCtxSetCurrent(ctx_->get()));
  CAKE_CU(cuCtxDestroy(second));
}

TEST_F(GpuTest, RejectsBadArgumentsBeforeWritingAnything) {
  auto rt = fresh_runtime();
  const int64_t n = 1024;
  GpuTensor a(DType::f32, n), b(DType::f32, n), out(DType::f32, n), h(DType::bf16, n), small(DType::f32, n - 1);
  out.poison();
  auto expect_arg = [](auto&& call, const std::string& arg, const std::string& text) {
    test::expect_argument_error(call, arg, text);
  };
  expect_arg([&] { ops::prepare_add(*rt, out.dl(), a.dl(), h.dl()); }, "b", "differs from out's");
  expect_arg([&] { ops::prepare_add(*rt, out.dl(), a.dl(), small.dl()); }, "b", "elements");
  DLTensor host = a.dl();
  host.device = {kDLCPU, 0};
  expect_arg([&] { ops::prepare_add(*rt, out.dl(), host, b.dl()); }, "a", "CUDA device tensor");
  DLTensor null = a.dl();
  null.data = nullptr;
  null.byte_offset = 0;
  expect_arg([&] { ops::prepare_add(*rt, out.dl(), null, b.dl()); }, "a", "null data pointer");
  DLTensor strided = out.dl();
  int64_t shape2[2] = {32, 16}, strides2[2] = {32, 1};  // every other half-row: not contiguous
  strided.ndim = 2;
  strided.shape = shape2;
  strided.strides = strides2;
  DLTensor a2 = a.dl();
  int64_t shape_a[2] = {32, 16};
  a2.ndim = 2;
  a2.shape = shape_a;
  expect_arg([&] { ops::prepare_add(*rt, strided, a2, a2); }, "out", "contiguous");
  DLTensor shifted = out.dl();
  shifted.byte_offset = 8;  // overlaps out's second half
  int64_t half[1] = {n / 2};
  shifted.shape = half;
  DLTensor out_half = out.dl();
  out_half.shape = half;
  expect_arg([&] { ops::prepare_cast(*rt, out_half, shifted, true); }, "out", "overlaps input 'in'");
  DLTensor h_half = h.dl();
  h_half.shape = half;
  DLTensor h_view = h.dl();
  h_view.shape = half;
  h_view.byte_offset = 2;
  h_view.dtype = {kDLBfloat, 16, 1};
  expect_arg([&] { ops::prepare_add(*rt, h_half, h_view, h_half); }, "out", "overlaps input 'a'");
  expect_arg([&] { ops::prepare_cast(*rt, a.dl(), b.dl(), false); }, "out", "different dtypes");
  DLTensor f64 = a.dl();
  f64.dtype = {kDLFloat, 64, 1};
  expect_arg([&] { ops::prepare_cast(*rt, f64, h.dl(), false); }, "out", "not supported");
  auto got = out.download<float>();
  for (float v : got) ASSERT_TRUE(std::isnan(v));  // nothing was written
  EXPECT_EQ(rt->load_stats().compiles.load(), 0);  // nor compiled
}

TEST_F(GpuTest, ACrashingCompileFallsBackToTheNextCandidate) {
  ::setenv("CAKE_TEST_WORKER_FAULT", "crash:ew_add_f32_v4", 1);
  auto rt = fresh_runtime();
  const int64_t n = 1 << 16;
  auto ha = test::random_floats(n, 50), hb = test::random_floats(n, 51);
  GpuTensor a(DType::f32, n), b(DType::f32, n), out(DType::f32, n);
  a.upload(ha);
  b.upload(hb);
  out.poison();
  auto l = ops::prepare_add(*rt, out.dl(), a.dl(), b.dl());
  ::unsetenv("CAKE_TEST_WORKER_FAULT");
  ASSERT_NE(l.plan(), nullptr);
  EXPECT_EQ(l.plan()->route, "add_f32");
  ASSERT_FALSE(l.plan()->passed_over.empty());
  EXPECT_EQ(l.plan()->passed_over[0].reason, "unavailable:compile_failed");
  EXPECT_NE(l.plan()->passed_over[0].detail.find("SIGSEGV"), std::string::npos) << l.plan()->passed_over[0].detail;
  l.launch(nullptr);
  auto got = out.download<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(ha[size_t(i)] + hb[size_t(i)]));
}

TEST_F(GpuTest, EmptyProblemIsANoOp) {
  auto rt = fresh_runtime();
  GpuTensor a(DType::f32, 0), b(DType::f32, 0), out(DType::f32, 0);
  auto l = ops::prepare_add(*rt, out.dl(), a.dl(), b.dl());
  EXPECT_EQ(l.stage_count(), 0u);
  EXPECT_EQ(l.plan(), nullptr);
  l.launch(nullptr);
}

TEST_F(GpuTest, CApi) {
  cake_runtime* rt = nullptr;
  std::string opts = "{\"cache_dir\": \"" + cache_.path().string() + "\"}";
  ASSERT_EQ(cake_runtime_create(opts.c_str(), &rt), CAKE_OK) << cake_last_error();
  const int64_t n = 65536;
  auto hout = test::random_floats(n, 40), hin = test::random_floats(n, 41);
  auto hin16 = test::to_bf16(hin);
  GpuTensor out(DType::f32, n), in(DType::bf16, n);
  out.upload(hout);
  in.upload(hin16);
  cake_launch* l = nullptr;
  const char* names[] = {"out", "in"};
  const DLTensor* tensors[] = {&out.dl(), &in.dl()};
  ASSERT_EQ(cake_prepare(rt, "elementwise.cast", 2, names, tensors, "{\"accumulate\": true}", &l), CAKE_OK)
      << cake_last_error();
  EXPECT_NE(std::string(cake_launch_describe(l)).find("route cast_acc_bf16_to_f32_fused_vec8"), std::string::npos)
      << cake_launch_describe(l);
  ASSERT_EQ(cake_launch_run(l, nullptr), CAKE_OK);
  auto got = out.download<float>();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(test::f32_bits(got[size_t(i)]), test::f32_bits(hout[size_t(i)] + test::bf16_float(hin16[size_t(i)])));
  // Bound by address to other tensors of the layout: refusals name the argument and keep the
  // binding; then the launch adds into the new output and leaves the old one as it was.
  GpuTensor out2(DType::f32, n), in2(DType::bf16, n);
  out2.upload(hout);
  in2.upload(hin16);
  void* const moved[] = {reinterpret_cast<void*>(out2.dl().data), reinterpret_cast<void*>(in2.dl().data)};
  EXPECT_EQ(cake_launch_rebind_data(l, -1, moved, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'n'"), std::string::npos) << cake_last_error();
  EXPECT_EQ(cake_launch_rebind_data(l, 1, moved, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("had 2 tensors"), std::string::npos) << cake_last_error();
  EXPECT_EQ(cake_launch_rebind_data(l, 2, nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  ASSERT_EQ(cake_launch_rebind_data(l, 2, moved, nullptr), CAKE_OK) << cake_last_error();
  ASSERT_EQ(cake_launch_run(l, nullptr), CAKE_OK);
  EXPECT_EQ(out2.download<float>(), got);
  EXPECT_EQ(out.download<float>(), got);  // once, not twice
  cake_launch_free(l);
  const DLTensor* same[] = {&out.dl(), &out.dl()};
  EXPECT_EQ(cake_run(rt, "elementwise.cast", 2, names, same, nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'out'"), std::string::npos) << cake_last_error();
  const char* add_names[] = {"out", "a", "b"};
  const DLTensor* add_tensors[] = {nullptr, &out.dl(), &out.dl()};
  EXPECT_EQ(cake_run(rt, "elementwise.add", 3, add_names, add_tensors, nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'out': null"), std::string::npos);
  // One call through the C ABI, on the default stream: out = in + in.
  const char* run_names[] = {"out", "a", "b"};
  GpuTensor sum(DType::f32, n), half(DType::f32, n);
  half.upload(hout);
  const DLTensor* run_tensors[] = {&sum.dl(), &half.dl(), &half.dl()};
  ASSERT_EQ(cake_run(rt, "elementwise.add", 3, run_names, run_tensors, "{\"max_sms\": 2}", nullptr), CAKE_OK)
      << cake_last_error();
  auto twice = sum.download<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(twice[size_t(i)], hout[size_t(i)] + hout[size_t(i)]);
  cake_runtime_destroy(rt);
  cake_runtime* bad = nullptr;
  EXPECT_EQ(cake_runtime_create("{\"jit\": \"yes\"}", &bad), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("options_json"), std::string::npos);
  EXPECT_EQ(cake_runtime_create("not json", &bad), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
}

}  // namespace
}  // namespace cake
