// Every argument of every public op, rejected before anything happens: the checks run on
// the tensors' metadata alone, so these tests need no GPU (the pointers are never touched).
#include <gtest/gtest.h>

#include "cake_c.h"
#include "error.hpp"
#include "ops.hpp"

namespace cake {
namespace {

// Fake device tensors: metadata only, distinct non-overlapping addresses.
struct FakeTensor {
  FakeTensor(uintptr_t addr, DLDataType t, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : shape(std::move(s)), strides(std::move(st)) {
    dl.data = reinterpret_cast<void*>(addr);
    dl.device = {kDLCUDA, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = t;
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
  }
  std::vector<int64_t> shape, strides;
  DLTensor dl{};
};

constexpr DLDataType kBf16{kDLBfloat, 16, 1}, kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1};
constexpr uintptr_t kGiB = uintptr_t(1) << 30;

class OpsArgs : public ::testing::Test {
 protected:
  template <typename F>
  void rejects(F&& call, const std::string& arg, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error about '" << arg << "'";
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected ArgumentError about '" << arg << "', got: " << e.what();
    }
  }
  RuntimeOptions opts() {
    RuntimeOptions o;
    o.cache_dir = "";
    o.aot_dir = "";
    return o;
  }
};

TEST_F(OpsArgs, Add) {
  Runtime rt(opts());
  FakeTensor out(1 * kGiB, kF32, {1024}), a(2 * kGiB, kF32, {1024}), b(3 * kGiB, kF32, {1024});
  FakeTensor f64(4 * kGiB, kF64, {1024}), bf(5 * kGiB, kBf16, {1024}), short_b(6 * kGiB, kF32, {1000});
  FakeTensor strided(7 * kGiB, kF32, {512}, {2}), inside(1 * kGiB + 8, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, f64.dl, a.dl, b.dl); }, "out", "dtype f64 not supported");
  rejects([&] { ops::prepare_add(rt, out.dl, bf.dl, b.dl); }, "a", "differs from out's");
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, short_b.dl); }, "b", "1000 elements");
  rejects([&] { ops::prepare_add(rt, strided.dl, strided.dl, strided.dl); }, "out", "contiguous");
  rejects([&] { ops::prepare_add(rt, out.dl, inside.dl, b.dl); }, "out", "overlaps input 'a'");
  FakeTensor null_a(0, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, out.dl, null_a.dl, b.dl); }, "a", "null data pointer");
  FakeTensor cpu(8 * kGiB, kF32, {1024});
  cpu.dl.device = {kDLCPU, 0};
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, cpu.dl); }, "b", "CUDA device tensor");
  FakeTensor other_dev(9 * kGiB, kF32, {1024});
  other_dev.dl.device = {kDLCUDA, 1};
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, other_dev.dl); }, "b", "device 1");
  FakeTensor lanes(10 * kGiB, {kDLFloat, 32, 4}, {1024});
  rejects([&] { ops::prepare_add(rt, out.dl, lanes.dl, b.dl); }, "a", "lanes");
  FakeTensor neg(11 * kGiB, kF32, {-4});
  rejects([&] { ops::prepare_add(rt, neg.dl, a.dl, b.dl); }, "out", "negative extent");
  FakeTensor misaligned(12 * kGiB + 2, kF32, {1024});
  rejects([&] { ops::prepare_add(rt, misaligned.dl, a.dl, b.dl); }, "out", "aligned to its element size");
}

TEST_F(OpsArgs, Cast) {
  Runtime rt(opts());
  FakeTensor out(1 * kGiB, kBf16, {64}), in(2 * kGiB, kF32, {64}), same(3 * kGiB, kBf16, {64});
  FakeTensor i32(4 * kGiB, {kDLInt, 32, 1}, {64}), big(5 * kGiB, kF32, {65});
  rejects([&] { ops::prepare_cast(rt, out.dl, same.dl, false); }, "out", "different dtypes");
  rejects([&] { ops::prepare_cast(rt, out.dl, i32.dl, false); }, "in", "dtype i32 not supported");
  rejects([&] { ops::prepare_cast(rt, i32.dl, in.dl, false); }, "out", "dtype i32 not supported");
  rejects([&] { ops::prepare_cast(rt, out.dl, big.dl, true); }, "in", "65 elements");
  FakeTensor overlap(1 * kGiB + 64, kF32, {64});
  rejects([&] { ops::prepare_cast(rt, out.dl, overlap.dl, true); }, "out", "overlaps input 'in'");
}

TEST_F(OpsArgs, RmsNormForward) {
  Runtime rt(opts());
  const int64_t T = 16, H = 64;
  FakeTensor x(1 * kGiB, kBf16, {T, H}), y(2 * kGiB, kBf16, {T, H}), rstd(3 * kGiB, kF32, {T}),
      w(4 * kGiB, kBf16, {H}), res(5 * kGiB, kBf16, {T, H}), hout(6 * kGiB, kBf16, {T, H});
  auto fwd = [&](const DLTensor& y_, const DLTensor& r_, const DLTensor* h_, const DLTensor& x_, const DLTensor* res_,
                 const DLTensor& w_, float eps = 1e-6f) {
    ops::prepare_rmsnorm_fwd(rt, y_, r_, h_, x_, res_, w_, eps);
  };
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl, -1.0f); }, "eps", "> 0");
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl, INFINITY); }, "eps", "> 0");
  FakeTensor x1d(1 * kGiB, kBf16, {T * H});
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x1d.dl, nullptr, w.dl); }, "x", "2-D");
  FakeTensor x60(1 * kGiB, kBf16, {T, 60}), y60(2 * kGiB, kBf16, {T, 60});
  rejects([&] { fwd(y60.dl, rstd.dl, nullptr, x60.dl, nullptr, w.dl); }, "x", "multiple of 8");
  FakeTensor xf(1 * kGiB, kF32, {T, H});
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, xf.dl, nullptr, w.dl); }, "x", "dtype f32");
  FakeTensor ybad(2 * kGiB, kBf16, {T, 2 * H});
  rejects([&] { fwd(ybad.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl); }, "y", "differs from");
  FakeTensor xs(1 * kGiB, kBf16, {T, H}, {H + 4, 1});
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, xs.dl, nullptr, w.dl); }, "x", "multiple of 8");
  FakeTensor xc(1 * kGiB, kBf16, {T, H}, {1, T});
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, xc.dl, nullptr, w.dl); }, "x", "contiguous");
  FakeTensor r2(3 * kGiB, kF32, {T + 1});
  rejects([&] { fwd(y.dl, r2.dl, nullptr, x.dl, nullptr, w.dl); }, "rstd", "16 elements");
  FakeTensor rb(3 * kGiB, kBf16, {T});
  rejects([&] { fwd(y.dl, rb.dl, nullptr, x.dl, nullptr, w.dl); }, "rstd", "dtype bf16");
  FakeTensor w64(4 * kGiB, kF64, {H}), wshort(4 * kGiB, kBf16, {H / 2});
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x.dl, nullptr, w64.dl); }, "w", "dtype f64");
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x.dl, nullptr, wshort.dl); }, "w", "64 elements");
  rejects([&] { fwd(y.dl, rstd.dl, nullptr, x.dl, &res.dl, w.dl); }, "h_out", "come together");
  rejects([&] { fwd(y.dl, rstd.dl, &hout.dl, x.dl, nullptr, w.dl); }, "residual", "come together");
  FakeTensor resf(5 * kGiB, kF32, {T, H});
  rejects([&] { fwd(y.dl, rstd.dl, &hout.dl, x.dl, &resf.dl, w.dl); }, "residual", "dtype f32");
  FakeTensor hshort(6 * kGiB, kBf16, {T - 1, H});
  rejects([&] { fwd(y.dl, rstd.dl, &hshort.dl, x.dl, &res.dl, w.dl); }, "h_out", "differs from");
  FakeTensor yin(1 * kGiB + 2 * H, kBf16, {T, H});  // x shifted by one row
  rejects([&] { fwd(yin.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl); }, "y", "overlaps input 'x'");
  FakeTensor rin(4 * kGiB, kF32, {T});  // rstd on top of w
  rejects([&] { fwd(y.dl, rin.dl, nullptr, x.dl, nullptr, w.dl); }, "rstd", "overlaps input 'w'");
  rejects([&] { fwd(y.dl, rstd.dl, &y.dl, x.dl, &res.dl, w.dl); }, "y", "overlaps input 'h_out'");
}

TEST_F(OpsArgs, RmsNormBackward) {
  Runtime rt(opts());
  const int64_t T = 16, H = 64;
  FakeTensor dx(1 * kGiB, kBf16, {T, H}), dw(2 * kGiB, kBf16, {H}), dy(3 * kGiB, kBf16, {T, H}),
      x(4 * kGiB, kBf16, {T, H}), rstd(5 * kGiB, kF32, {T}), w(6 * kGiB, kBf16, {H});
  auto bwd = [&](const DLTensor& dx_, const DLTensor& dw_, const DLTensor& dy_, const DLTensor& x_,
                 const DLTensor& r_, const DLTensor& w_) { ops::prepare_rmsnorm_bwd(rt, dx_, dw_, dy_, x_, r_, w_); };
  FakeTensor dwf(2 * kGiB, kF32, {H});
  rejects([&] { bwd(dx.dl, dwf.dl, dy.dl, x.dl, rstd.dl, w.dl); }, "dw", "dtype f32");
  FakeTensor dyshort(3 * kGiB, kBf16, {T, H - 8});
  rejects([&] { bwd(dx.dl, dw.dl, dyshort.dl, x.dl, rstd.dl, w.dl); }, "dy", "differs from");
  FakeTensor dxf(1 * kGiB, kF32, {T, H});
  rejects([&] { bwd(dxf.dl, dw.dl, dy.dl, x.dl, rstd.dl, w.dl); }, "dx", "dtype f32");
  FakeTensor r2(5 * kGiB, kF32, {2 * T});
  rejects([&] { bwd(dx.dl, dw.dl, dy.dl, x.dl, r2.dl, w.dl); }, "rstd", "16 elements");
  FakeTensor wshort(6 * kGiB, kBf16, {8});
  rejects([&] { bwd(dx.dl, dw.dl, dy.dl, x.dl, rstd.dl, wshort.dl); }, "w", "64 elements");
  FakeTensor x3(4 * kGiB, kBf16, {2, T, H});
  rejects([&] { bwd(dx.dl, dw.dl, dy.dl, x3.dl, rstd.dl, w.dl); }, "x", "2-D");
  FakeTensor dwin(3 * kGiB, kBf16, {H});  // dw on top of dy
  rejects([&] { bwd(dx.dl, dwin.dl, dy.dl, x.dl, rstd.dl, w.dl); }, "dw", "overlaps input 'dy'");
  FakeTensor dxin(5 * kGiB, kBf16, {T, H});  // dx on top of rstd
  rejects([&] { bwd(dxin.dl, dw.dl, dy.dl, x.dl, rstd.dl, w.dl); }, "dx", "overlaps input 'rstd'");
}

TEST_F(OpsArgs, CAbiNullsAndOptions) {
  cake_runtime* rt = nullptr;
  EXPECT_EQ(cake_runtime_create(nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_runtime_create("{\"registry\": 3}", &rt), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("options_json"), std::string::npos);
  EXPECT_EQ(cake_runtime_create("[1]", &rt), CAKE_ERROR_ARGUMENT);
  ASSERT_EQ(cake_runtime_create("{\"cache_dir\": \"\", \"jit\": true}", &rt), CAKE_OK) << cake_last_error();
  FakeTensor t(1 * kGiB, kF32, {8});
  cake_launch* l = nullptr;
  EXPECT_EQ(cake_prepare_add(nullptr, &t.dl, &t.dl, &t.dl, 1, &l), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_prepare_add(rt, &t.dl, &t.dl, &t.dl, 1, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_prepare_cast(rt, &t.dl, nullptr, 0, 1, &l), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'in': null"), std::string::npos);
  EXPECT_EQ(cake_prepare_rmsnorm_fwd(rt, &t.dl, &t.dl, nullptr, nullptr, nullptr, &t.dl, 1e-6f, &l), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'x': null"), std::string::npos);
  EXPECT_EQ(cake_prepare_rmsnorm_bwd(rt, &t.dl, &t.dl, &t.dl, &t.dl, nullptr, &t.dl, &l), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_launch_run(nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_cast(rt, &t.dl, &t.dl, 1, nullptr), CAKE_ERROR_ARGUMENT);  // out overlaps in
  EXPECT_EQ(std::string(cake_launch_describe(nullptr)), "");
  cake_runtime_destroy(rt);
}

}  // namespace
}  // namespace cake
