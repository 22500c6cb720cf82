// Every argument of every public op, rejected before anything happens: the checks run on
// the tensors' metadata alone, so these tests need no GPU (the pointers are never touched).
#include <gtest/gtest.h>

#include "cake_c.h"
#include "error.hpp"
#include "elementwise_ops.hpp"
#include "grouped_gemm_ops.hpp"
#include "rmsnorm_ops.hpp"

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

TEST_F(OpsArgs, MaxSmsMustNotBeNegative) {
  Runtime rt(opts());
  ops::OpOptions o;
  o.max_sms = -1;
  FakeTensor out(1 * kGiB, kF32, {1024}), a(2 * kGiB, kF32, {1024}), b(3 * kGiB, kF32, {1024});
  FakeTensor x(4 * kGiB, kBf16, {64, 256}), y(5 * kGiB, kBf16, {64, 256}), rstd(6 * kGiB, kF32, {64}),
      w(7 * kGiB, kBf16, {256}), dw(8 * kGiB, kBf16, {256});
  FakeTensor gx(9 * kGiB, kBf16, {64, 128}), gw(10 * kGiB, kBf16, {2, 256, 128}), gy(11 * kGiB, kBf16, {64, 256}),
      offs(12 * kGiB, DLDataType{kDLInt, 32, 1}, {2}), gdw(13 * kGiB, kF32, {2, 256, 128});
  rejects([&] { ops::prepare_add(rt, out.dl, a.dl, b.dl, o); }, "max_sms", ">= 0");
  rejects([&] { ops::prepare_cast(rt, out.dl, a.dl, false, o); }, "max_sms", ">= 0");
  rejects([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl, 1e-6f, o); }, "max_sms",
          ">= 0");
  rejects([&] { ops::prepare_rmsnorm_bwd(rt, y.dl, dw.dl, x.dl, x.dl, rstd.dl, w.dl, o); }, "max_sms", ">= 0");
  rejects([&] { ops::prepare_grouped_gemm_fwd(rt, gy.dl, gx.dl, gw.dl, offs.dl, o); }, "max_sms", ">= 0");
  rejects([&] { ops::prepare_grouped_gemm_dgrad(rt, gx.dl, gy.dl, gw.dl, offs.dl, o); }, "max_sms", ">= 0");
  rejects([&] { ops::prepare_grouped_gemm_wgrad(rt, gdw.dl, gy.dl, gx.dl, offs.dl, true, o); }, "max_sms", ">= 0");
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

// grouped_gemm: x [M, K], w [E, N, K], g [M, N], y [M, N], dx [M, K], dw [E, N, K], offs [E].
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr int64_t kM = 64, kN = 32, kK = 48, kE = 4;

TEST_F(OpsArgs, GroupedGemmForward) {
  Runtime rt(opts());
  FakeTensor y(1 * kGiB, kBf16, {kM, kN}), x(2 * kGiB, kBf16, {kM, kK}), w(3 * kGiB, kBf16, {kE, kN, kK}),
      offs(4 * kGiB, kI32, {kE});
  auto fwd = [&](const DLTensor& y_, const DLTensor& x_, const DLTensor& w_, const DLTensor& o_) {
    ops::prepare_grouped_gemm_fwd(rt, y_, x_, w_, o_);
  };
  FakeTensor x3(2 * kGiB, kBf16, {1, kM, kK});
  rejects([&] { fwd(y.dl, x3.dl, w.dl, offs.dl); }, "x", "2-D [M, K]");
  FakeTensor w2(3 * kGiB, kBf16, {kN, kK});
  rejects([&] { fwd(y.dl, x.dl, w2.dl, offs.dl); }, "w", "3-D [E, N, K]");
  FakeTensor x12(2 * kGiB, kBf16, {kM, 12}), w12(3 * kGiB, kBf16, {kE, kN, 12}), y12(1 * kGiB, kBf16, {kM, 12});
  rejects([&] { fwd(y.dl, x12.dl, w12.dl, offs.dl); }, "x", "K = 12 must be a positive multiple of 8");
  FakeTensor wn(3 * kGiB, kBf16, {kE, 20, kK});
  rejects([&] { fwd(y.dl, x.dl, wn.dl, offs.dl); }, "w", "N = 20 must be a positive multiple of 8");
  FakeTensor x0(2 * kGiB, kBf16, {kM, 0}), w0(3 * kGiB, kBf16, {kE, kN, 0});
  rejects([&] { fwd(y.dl, x0.dl, w0.dl, offs.dl); }, "x", "K = 0");
  FakeTensor we(3 * kGiB, kBf16, {0, kN, kK}), o0(4 * kGiB, kI32, {0});
  rejects([&] { fwd(y.dl, x.dl, we.dl, o0.dl); }, "w", "E = 0");
  FakeTensor xf(2 * kGiB, kF32, {kM, kK});
  rejects([&] { fwd(y.dl, xf.dl, w.dl, offs.dl); }, "x", "dtype f32");
  FakeTensor wf(3 * kGiB, kF32, {kE, kN, kK});
  rejects([&] { fwd(y.dl, x.dl, wf.dl, offs.dl); }, "w", "dtype f32");
  FakeTensor yf(1 * kGiB, kF32, {kM, kN});
  rejects([&] { fwd(yf.dl, x.dl, w.dl, offs.dl); }, "y", "dtype f32");
  FakeTensor wk(3 * kGiB, kBf16, {kE, kN, kK + 8});
  rejects([&] { fwd(y.dl, x.dl, wk.dl, offs.dl); }, "w", "differs from [E, N, K]");
  FakeTensor yshort(1 * kGiB, kBf16, {kM - 1, kN});
  rejects([&] { fwd(yshort.dl, x.dl, w.dl, offs.dl); }, "y", "differs from [M, N] = [64, 32]");
  FakeTensor xs(2 * kGiB, kBf16, {kM, kK}, {kK + 8, 1});  // padded rows: not fully contiguous
  rejects([&] { fwd(y.dl, xs.dl, w.dl, offs.dl); }, "x", "contiguous");
  FakeTensor wx(3 * kGiB, kBf16, {kE, kN, kK}, {0, kK, 1});  // expanded over experts
  rejects([&] { fwd(y.dl, x.dl, wx.dl, offs.dl); }, "w", "contiguous");
  FakeTensor yt(1 * kGiB, kBf16, {kM, kN}, {1, kM});  // transposed
  rejects([&] { fwd(yt.dl, x.dl, w.dl, offs.dl); }, "y", "contiguous");
  FakeTensor xa(2 * kGiB + 8, kBf16, {kM, kK});
  rejects([&] { fwd(y.dl, xa.dl, w.dl, offs.dl); }, "x", "16-byte aligned");
  FakeTensor ya(1 * kGiB + 4, kBf16, {kM, kN});
  rejects([&] { fwd(ya.dl, x.dl, w.dl, offs.dl); }, "y", "16-byte aligned");
  FakeTensor wa(3 * kGiB + 2, kBf16, {kE, kN, kK});
  rejects([&] { fwd(y.dl, x.dl, wa.dl, offs.dl); }, "w", "16-byte aligned");
  FakeTensor o64(4 * kGiB, {kDLInt, 64, 1}, {kE});
  rejects([&] { fwd(y.dl, x.dl, w.dl, o64.dl); }, "offs", "dtype i64");
  FakeTensor o5(4 * kGiB, kI32, {kE + 1});
  rejects([&] { fwd(y.dl, x.dl, w.dl, o5.dl); }, "offs", "5 entries, E = 4");
  FakeTensor o2d(4 * kGiB, kI32, {kE, 1});
  rejects([&] { fwd(y.dl, x.dl, w.dl, o2d.dl); }, "offs", "1-D [E]");
  FakeTensor os(4 * kGiB, kI32, {kE}, {2});
  rejects([&] { fwd(y.dl, x.dl, w.dl, os.dl); }, "offs", "contiguous");
  FakeTensor ocpu(4 * kGiB, kI32, {kE});
  ocpu.dl.device = {kDLCPU, 0};
  rejects([&] { fwd(y.dl, x.dl, w.dl, ocpu.dl); }, "offs", "CUDA device tensor");
  FakeTensor wdev(3 * kGiB, kBf16, {kE, kN, kK});
  wdev.dl.device = {kDLCUDA, 1};
  rejects([&] { fwd(y.dl, x.dl, wdev.dl, offs.dl); }, "w", "device 1");
  FakeTensor xnull(0, kBf16, {kM, kK});
  rejects([&] { fwd(y.dl, xnull.dl, w.dl, offs.dl); }, "x", "null data pointer");
  // The output on top of any input, or exactly an input (no in-place form): rejected.
  FakeTensor yx(2 * kGiB + 64, kBf16, {kM, kN});
  rejects([&] { fwd(yx.dl, x.dl, w.dl, offs.dl); }, "y", "overlaps input 'x'");
  FakeTensor yw(3 * kGiB, kBf16, {kM, kN});
  rejects([&] { fwd(yw.dl, x.dl, w.dl, offs.dl); }, "y", "overlaps input 'w'");
  FakeTensor yo(4 * kGiB - 16, kBf16, {kM, kN});
  rejects([&] { fwd(yo.dl, x.dl, w.dl, offs.dl); }, "y", "overlaps input 'offs'");
  FakeTensor xbig(2 * kGiB, kBf16, {int64_t(1) << 31, kK});
  FakeTensor ybig(1 * kGiB, kBf16, {int64_t(1) << 31, kN});
  rejects([&] { fwd(ybig.dl, xbig.dl, w.dl, offs.dl); }, "x", "larger than cake supports");
}

TEST_F(OpsArgs, GroupedGemmDgrad) {
  Runtime rt(opts());
  FakeTensor dx(1 * kGiB, kBf16, {kM, kK}), g(2 * kGiB, kBf16, {kM, kN}), w(3 * kGiB, kBf16, {kE, kN, kK}),
      offs(4 * kGiB, kI32, {kE});
  auto dgrad = [&](const DLTensor& dx_, const DLTensor& g_, const DLTensor& w_, const DLTensor& o_) {
    ops::prepare_grouped_gemm_dgrad(rt, dx_, g_, w_, o_);
  };
  FakeTensor g1(2 * kGiB, kBf16, {kM * kN});
  rejects([&] { dgrad(dx.dl, g1.dl, w.dl, offs.dl); }, "g", "2-D [M, N]");
  FakeTensor g12(2 * kGiB, kBf16, {kM, 12});
  rejects([&] { dgrad(dx.dl, g12.dl, w.dl, offs.dl); }, "g", "N = 12");
  FakeTensor wk(3 * kGiB, kBf16, {kE, kN, 4});
  rejects([&] { dgrad(dx.dl, g.dl, wk.dl, offs.dl); }, "w", "K = 4");
  FakeTensor wn(3 * kGiB, kBf16, {kE, kN + 8, kK});
  rejects([&] { dgrad(dx.dl, g.dl, wn.dl, offs.dl); }, "w", "differs from [E, N, K]");
  FakeTensor dxs(1 * kGiB, kBf16, {kM, kK + 8});
  rejects([&] { dgrad(dxs.dl, g.dl, w.dl, offs.dl); }, "dx", "differs from [M, K]");
  FakeTensor dxf(1 * kGiB, kF32, {kM, kK});
  rejects([&] { dgrad(dxf.dl, g.dl, w.dl, offs.dl); }, "dx", "dtype f32");
  FakeTensor gf(2 * kGiB, kF32, {kM, kN});
  rejects([&] { dgrad(dx.dl, gf.dl, w.dl, offs.dl); }, "g", "dtype f32");
  FakeTensor ga(2 * kGiB + 8, kBf16, {kM, kN});
  rejects([&] { dgrad(dx.dl, ga.dl, w.dl, offs.dl); }, "g", "16-byte aligned");
  FakeTensor dxa(1 * kGiB + 8, kBf16, {kM, kK});
  rejects([&] { dgrad(dxa.dl, g.dl, w.dl, offs.dl); }, "dx", "16-byte aligned");
  FakeTensor gs(2 * kGiB, kBf16, {kM, kN}, {2 * kN, 1});
  rejects([&] { dgrad(dx.dl, gs.dl, w.dl, offs.dl); }, "g", "contiguous");
  FakeTensor o3(4 * kGiB, kI32, {kE - 1});
  rejects([&] { dgrad(dx.dl, g.dl, w.dl, o3.dl); }, "offs", "3 entries, E = 4");
  FakeTensor of(4 * kGiB, kF32, {kE});
  rejects([&] { dgrad(dx.dl, g.dl, w.dl, of.dl); }, "offs", "dtype f32");
  rejects([&] { dgrad(g.dl, g.dl, w.dl, offs.dl); }, "dx", "differs from [M, K]");
  FakeTensor dxg(2 * kGiB, kBf16, {kM, kK});  // dx exactly on g: no in-place dgrad
  rejects([&] { dgrad(dxg.dl, g.dl, w.dl, offs.dl); }, "dx", "overlaps input 'g'");
  FakeTensor dxw(3 * kGiB + 128, kBf16, {kM, kK});
  rejects([&] { dgrad(dxw.dl, g.dl, w.dl, offs.dl); }, "dx", "overlaps input 'w'");
  FakeTensor dxo(4 * kGiB, kBf16, {kM, kK});
  rejects([&] { dgrad(dxo.dl, g.dl, w.dl, offs.dl); }, "dx", "overlaps input 'offs'");
  FakeTensor wdev(3 * kGiB, kBf16, {kE, kN, kK});
  wdev.dl.device = {kDLCUDA, 2};
  rejects([&] { dgrad(dx.dl, g.dl, wdev.dl, offs.dl); }, "w", "device 2");
}

TEST_F(OpsArgs, GroupedGemmWgrad) {
  Runtime rt(opts());
  FakeTensor dw(1 * kGiB, kF32, {kE, kN, kK}), g(2 * kGiB, kBf16, {kM, kN}), x(3 * kGiB, kBf16, {kM, kK}),
      offs(4 * kGiB, kI32, {kE});
  for (bool acc : {false, true}) {
    SCOPED_TRACE(acc ? "accumulate" : "overwrite");
    auto wgrad = [&](const DLTensor& dw_, const DLTensor& g_, const DLTensor& x_, const DLTensor& o_) {
      ops::prepare_grouped_gemm_wgrad(rt, dw_, g_, x_, o_, acc);
    };
    FakeTensor g3(2 * kGiB, kBf16, {1, kM, kN});
    rejects([&] { wgrad(dw.dl, g3.dl, x.dl, offs.dl); }, "g", "2-D [M, N]");
    FakeTensor x1(3 * kGiB, kBf16, {kM * kK});
    rejects([&] { wgrad(dw.dl, g.dl, x1.dl, offs.dl); }, "x", "2-D [M, K]");
    FakeTensor o2(4 * kGiB, kI32, {kE, 2});
    rejects([&] { wgrad(dw.dl, g.dl, x.dl, o2.dl); }, "offs", "1-D [E]");
    FakeTensor o0(4 * kGiB, kI32, {0});
    rejects([&] { wgrad(dw.dl, g.dl, x.dl, o0.dl); }, "offs", "E = 0");
    FakeTensor g20(2 * kGiB, kBf16, {kM, 20});
    rejects([&] { wgrad(dw.dl, g20.dl, x.dl, offs.dl); }, "g", "N = 20");
    FakeTensor x44(3 * kGiB, kBf16, {kM, 44});
    rejects([&] { wgrad(dw.dl, g.dl, x44.dl, offs.dl); }, "x", "K = 44");
    FakeTensor xm(3 * kGiB, kBf16, {kM + 1, kK});
    rejects([&] { wgrad(dw.dl, g.dl, xm.dl, offs.dl); }, "x", "differs from [M, K] = [64, 48]");
    FakeTensor dws(1 * kGiB, kF32, {kE, kN, kK + 8});
    rejects([&] { wgrad(dws.dl, g.dl, x.dl, offs.dl); }, "dw", "differs from [E, N, K] = [4, 32, 48]");
    FakeTensor dwe(1 * kGiB, kF32, {kE + 1, kN, kK});
    rejects([&] { wgrad(dwe.dl, g.dl, x.dl, offs.dl); }, "dw", "differs from [E, N, K]");
    FakeTensor dw64(1 * kGiB, kF64, {kE, kN, kK});
    rejects([&] { wgrad(dw64.dl, g.dl, x.dl, offs.dl); }, "dw", "dtype f64 not supported here (bf16, f32)");
    FakeTensor xf(3 * kGiB, kF32, {kM, kK});
    rejects([&] { wgrad(dw.dl, g.dl, xf.dl, offs.dl); }, "x", "dtype f32");
    // An expanded dw (every expert the same memory) would be read and written through
    // several aliases while accumulating; a self-overlapping one likewise.
    FakeTensor dwx(1 * kGiB, kF32, {kE, kN, kK}, {0, kK, 1});
    rejects([&] { wgrad(dwx.dl, g.dl, x.dl, offs.dl); }, "dw", "contiguous");
    FakeTensor dwo(1 * kGiB, kF32, {kE, kN, kK}, {8, kK, 1});
    rejects([&] { wgrad(dwo.dl, g.dl, x.dl, offs.dl); }, "dw", "contiguous");
    FakeTensor dwa(1 * kGiB + 4, kF32, {kE, kN, kK});
    rejects([&] { wgrad(dwa.dl, g.dl, x.dl, offs.dl); }, "dw", "16-byte aligned");
    FakeTensor xa(3 * kGiB + 2, kBf16, {kM, kK});
    rejects([&] { wgrad(dw.dl, g.dl, xa.dl, offs.dl); }, "x", "16-byte aligned");
    FakeTensor dwg(2 * kGiB + 32, kF32, {kE, kN, kK});
    rejects([&] { wgrad(dwg.dl, g.dl, x.dl, offs.dl); }, "dw", "overlaps input 'g'");
    FakeTensor dwx2(3 * kGiB - 16, kF32, {kE, kN, kK});
    rejects([&] { wgrad(dwx2.dl, g.dl, x.dl, offs.dl); }, "dw", "overlaps input 'x'");
    FakeTensor dwoffs(4 * kGiB - 64, kBf16, {kE, kN, kK});
    rejects([&] { wgrad(dwoffs.dl, g.dl, x.dl, offs.dl); }, "dw", "overlaps input 'offs'");
    FakeTensor odev(4 * kGiB, kI32, {kE});
    odev.dl.device = {kDLCUDA, 3};
    rejects([&] { wgrad(dw.dl, g.dl, x.dl, odev.dl); }, "offs", "device 3");
    FakeTensor gnull(0, kBf16, {kM, kN});
    rejects([&] { wgrad(dw.dl, gnull.dl, x.dl, offs.dl); }, "g", "null data pointer");
  }
}

TEST_F(OpsArgs, GroupedGemmCAbi) {
  cake_runtime* rt = nullptr;
  ASSERT_EQ(cake_runtime_create("{\"cache_dir\": \"\"}", &rt), CAKE_OK) << cake_last_error();
  FakeTensor y(1 * kGiB, kBf16, {kM, kN}), x(2 * kGiB, kBf16, {kM, kK}), w(3 * kGiB, kBf16, {kE, kN, kK}),
      offs(4 * kGiB, kI32, {kE}), g(5 * kGiB, kBf16, {kM, kN}), dx(6 * kGiB, kBf16, {kM, kK}),
      dw(7 * kGiB, kF32, {kE, kN, kK});
  cake_launch* l = nullptr;
  auto expect = [&](cake_status st, const std::string& text) {
    EXPECT_EQ(st, CAKE_ERROR_ARGUMENT) << cake_last_error();
    EXPECT_NE(std::string(cake_last_error()).find(text), std::string::npos) << cake_last_error();
    EXPECT_EQ(l, nullptr);
  };
  expect(cake_prepare_grouped_gemm_fwd(nullptr, &y.dl, &x.dl, &w.dl, &offs.dl, 1, nullptr, &l), "'rt': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, nullptr, &x.dl, &w.dl, &offs.dl, 1, nullptr, &l), "'y': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, nullptr, &w.dl, &offs.dl, 1, nullptr, &l), "'x': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, &x.dl, nullptr, &offs.dl, 1, nullptr, &l), "'w': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, &x.dl, &w.dl, nullptr, 1, nullptr, &l), "'offs': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, &x.dl, &w.dl, &offs.dl, 1, nullptr, nullptr), "'launch': null");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, &x.dl, &w.dl, &dw.dl, 1, "", &l), "argument 'offs'");
  expect(cake_prepare_grouped_gemm_fwd(rt, &y.dl, &dw.dl, &w.dl, &offs.dl, 1, nullptr, &l), "argument 'x'");
  expect(cake_prepare_grouped_gemm_dgrad(rt, nullptr, &g.dl, &w.dl, &offs.dl, 1, nullptr, &l), "'dx': null");
  expect(cake_prepare_grouped_gemm_dgrad(rt, &dx.dl, nullptr, &w.dl, &offs.dl, 1, nullptr, &l), "'g': null");
  expect(cake_prepare_grouped_gemm_dgrad(rt, &dx.dl, &g.dl, nullptr, &offs.dl, 1, nullptr, &l), "'w': null");
  expect(cake_prepare_grouped_gemm_dgrad(rt, &dx.dl, &g.dl, &w.dl, nullptr, 1, nullptr, &l), "'offs': null");
  expect(cake_prepare_grouped_gemm_dgrad(rt, &dx.dl, &g.dl, &w.dl, &offs.dl, 1, nullptr, nullptr), "'launch': null");
  expect(cake_prepare_grouped_gemm_dgrad(rt, &dx.dl, &g.dl, &w.dl, &y.dl, 1, nullptr, &l), "argument 'offs'");
  expect(cake_prepare_grouped_gemm_wgrad(rt, nullptr, &g.dl, &x.dl, &offs.dl, 1, 1, nullptr, &l), "'dw': null");
  expect(cake_prepare_grouped_gemm_wgrad(rt, &dw.dl, nullptr, &x.dl, &offs.dl, 1, 1, nullptr, &l), "'g': null");
  expect(cake_prepare_grouped_gemm_wgrad(rt, &dw.dl, &g.dl, nullptr, &offs.dl, 1, 1, nullptr, &l), "'x': null");
  expect(cake_prepare_grouped_gemm_wgrad(rt, &dw.dl, &g.dl, &x.dl, nullptr, 1, 1, nullptr, &l), "'offs': null");
  expect(cake_prepare_grouped_gemm_wgrad(rt, &dw.dl, &g.dl, &x.dl, &offs.dl, 0, 1, nullptr, nullptr), "'launch': null");
  expect(cake_prepare_grouped_gemm_wgrad(rt, &y.dl, &g.dl, &x.dl, &offs.dl, 1, 1, "x", &l), "argument 'dw'");
  cake_runtime_destroy(rt);
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
