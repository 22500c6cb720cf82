// Every argument of grouped_gemm.fwd, .dgrad and .wgrad, rejected before anything happens,
// through the C++ API and the C ABI.
#include "ops_args.hpp"
#include "grouped_gemm_ops.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::OpsArgs;
using test::kBf16;
using test::kF32;
using test::kF64;
using test::kGiB;

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
  rejects([&] { fwd(y.dl, x.dl, w.dl, o5.dl); }, "offs", "shape [5] differs from [E] = [4]");
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
  rejects([&] { dgrad(dx.dl, g.dl, w.dl, o3.dl); }, "offs", "shape [3] differs from [E] = [4]");
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
  test::CAbiArgs c;
  FakeTensor y(1 * kGiB, kBf16, {kM, kN}), x(2 * kGiB, kBf16, {kM, kK}), w(3 * kGiB, kBf16, {kE, kN, kK}),
      offs(4 * kGiB, kI32, {kE}), g(5 * kGiB, kBf16, {kM, kN}), dw(7 * kGiB, kF32, {kE, kN, kK});
  c.rejects("grouped_gemm.fwd", {{"y", nullptr}, {"x", &x.dl}, {"w", &w.dl}, {"offs", &offs.dl}}, nullptr,
            "argument 'y': null");
  c.rejects("grouped_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}, {"w", &w.dl}}, nullptr, "argument 'offs': missing");
  c.rejects("grouped_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}, {"w", &w.dl}, {"offs", &dw.dl}}, "",
            "argument 'offs'");
  c.rejects("grouped_gemm.fwd", {{"y", &y.dl}, {"x", &dw.dl}, {"w", &w.dl}, {"offs", &offs.dl}}, nullptr,
            "argument 'x'");
  c.rejects("grouped_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}, {"w", &w.dl}, {"offs", &offs.dl}},
            "{\"accumulate\": true}",
            "argument 'accumulate': grouped_gemm.fwd does not accumulate");
  c.rejects("grouped_gemm.wgrad", {{"dw", &y.dl}, {"g", &g.dl}, {"x", &x.dl}, {"offs", &offs.dl}},
            "{\"accumulate\": true, \"candidate\": \"x\"}",
            "argument 'dw'");
}

}  // namespace
}  // namespace cake
