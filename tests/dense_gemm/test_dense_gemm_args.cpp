// Every argument of dense_gemm.fwd, .dgrad and .wgrad, plain and batched, rejected before
// anything happens, through the C++ API and the C ABI.
#include "ops_args.hpp"
#include "dense_gemm_ops.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::OpsArgs;
using test::kBf16;
using test::kF32;
using test::kF64;
using test::kGiB;

// dense_gemm: x [T, K], w [N, K], dy [T, N], y [T, N], dx [T, K], dw [N, K]; batched [B, ...].
constexpr int64_t kT = 100, kN = 32, kK = 48, kB = 3;

TEST_F(OpsArgs, DenseGemmForward) {
  Runtime rt(opts());
  FakeTensor y(1 * kGiB, kBf16, {kT, kN}), x(2 * kGiB, kBf16, {kT, kK}), w(3 * kGiB, kBf16, {kN, kK});
  auto fwd = [&](const DLTensor& y_, const DLTensor& x_, const DLTensor& w_) {
    ops::prepare_dense_gemm_fwd(rt, y_, x_, w_);
  };
  FakeTensor x4(2 * kGiB, kBf16, {1, 1, kT, kK}), x1(2 * kGiB, kBf16, {kK});
  rejects([&] { fwd(y.dl, x4.dl, w.dl); }, "x", "must be 2-D [T, K] or 3-D [B, T, K] (a batch of heads), got 4-D");
  rejects([&] { fwd(y.dl, x1.dl, w.dl); }, "x", "got 1-D");
  FakeTensor w3(3 * kGiB, kBf16, {1, kN, kK});
  rejects([&] { fwd(y.dl, x.dl, w3.dl); }, "w", "must be 2-D [N, K], got 3-D");
  FakeTensor x12(2 * kGiB, kBf16, {kT, 12}), w12(3 * kGiB, kBf16, {kN, 12});
  rejects([&] { fwd(y.dl, x12.dl, w12.dl); }, "x", "K = 12 must be a positive multiple of 8");
  FakeTensor wn(3 * kGiB, kBf16, {20, kK});
  rejects([&] { fwd(y.dl, x.dl, wn.dl); }, "w", "N = 20 must be a positive multiple of 8");
  FakeTensor wn0(3 * kGiB, kBf16, {0, kK});
  rejects([&] { fwd(y.dl, x.dl, wn0.dl); }, "w", "N = 0");
  FakeTensor wk(3 * kGiB, kBf16, {kN, kK + 8});
  rejects([&] { fwd(y.dl, x.dl, wk.dl); }, "w", "shape [32, 56] differs from [N, K] = [32, 48]");
  FakeTensor yt(1 * kGiB, kBf16, {kT + 1, kN});
  rejects([&] { fwd(yt.dl, x.dl, w.dl); }, "y", "differs from [T, N] = [100, 32]");
  FakeTensor xf(2 * kGiB, kF32, {kT, kK}), y64(1 * kGiB, kF64, {kT, kN});
  rejects([&] { fwd(y.dl, xf.dl, w.dl); }, "x", "dtype f32");
  rejects([&] { fwd(y64.dl, x.dl, w.dl); }, "y", "dtype f64 not supported here (bf16, f32)");
  // A weight stored [K, N] comes as its transposed view (strides 1, N) and is checked as the
  // [K, N] tensor it is; other strides are refused.
  FakeTensor wkn(3 * kGiB, kBf16, {kN, kK + 8}, {1, kN});
  rejects([&] { fwd(y.dl, x.dl, wkn.dl); }, "w", "shape [56, 32] differs from [K, N] = [48, 32]");
  FakeTensor wkna(3 * kGiB + 2, kBf16, {kN, kK}, {1, kN});
  rejects([&] { fwd(y.dl, x.dl, wkna.dl); }, "w", "16-byte aligned");
  FakeTensor wpad(3 * kGiB, kBf16, {kN, kK}, {1, kN + 8});
  rejects([&] { fwd(y.dl, x.dl, wpad.dl); }, "w", "contiguous");
  FakeTensor xs(2 * kGiB, kBf16, {kT, kK}, {1, kT});
  rejects([&] { fwd(y.dl, xs.dl, w.dl); }, "x", "each row must be contiguous");
  FakeTensor xa(2 * kGiB + 8, kBf16, {kT, kK}), ya(1 * kGiB + 2, kBf16, {kT, kN});
  rejects([&] { fwd(y.dl, xa.dl, w.dl); }, "x", "16-byte aligned");
  rejects([&] { fwd(ya.dl, x.dl, w.dl); }, "y", "16-byte aligned");
  FakeTensor wdev(3 * kGiB, kBf16, {kN, kK});
  wdev.dl.device = {kDLCUDA, 1};
  rejects([&] { fwd(y.dl, x.dl, wdev.dl); }, "w", "device 1");
  FakeTensor xnull(0, kBf16, {kT, kK});
  rejects([&] { fwd(y.dl, xnull.dl, w.dl); }, "x", "null data pointer");
  FakeTensor yx(2 * kGiB + 64, kBf16, {kT, kN}), yw(3 * kGiB - 64, kBf16, {kT, kN});
  rejects([&] { fwd(yx.dl, x.dl, w.dl); }, "y", "overlaps input 'x'");
  rejects([&] { fwd(yw.dl, x.dl, w.dl); }, "y", "overlaps input 'w'");
  FakeTensor xbig(2 * kGiB, kBf16, {int64_t(1) << 31, kK}), ybig(1 * kGiB, kBf16, {int64_t(1) << 31, kN});
  rejects([&] { fwd(ybig.dl, xbig.dl, w.dl); }, "x", "T = 2147483648 is larger than cake supports");
}

TEST_F(OpsArgs, DenseGemmBatched) {
  Runtime rt(opts());
  FakeTensor y(1 * kGiB, kBf16, {kB, kT, kN}), x(2 * kGiB, kBf16, {kB, kT, kK}), w(3 * kGiB, kBf16, {kB, kN, kK});
  auto fwd = [&](const DLTensor& y_, const DLTensor& x_, const DLTensor& w_) {
    ops::prepare_dense_gemm_fwd(rt, y_, x_, w_);
  };
  FakeTensor w2d(3 * kGiB, kBf16, {kN, kK});
  rejects([&] { fwd(y.dl, x.dl, w2d.dl); }, "w", "must be 3-D [B, N, K], got 2-D");
  FakeTensor wb(3 * kGiB, kBf16, {kB + 1, kN, kK});
  rejects([&] { fwd(y.dl, x.dl, wb.dl); }, "w", "differs from [B, N, K] = [3, 32, 48]");
  FakeTensor y2(1 * kGiB, kBf16, {kB * kT, kN});
  rejects([&] { fwd(y2.dl, x.dl, w.dl); }, "y", "must be 3-D [B, T, N], got 2-D");
  // The token operands may be strided views: heads of a [T, B, K] tensor (x_tbk.transpose(0,
  // 1)), padded rows; each row contiguous, strides of 16 bytes, no element twice.
  FakeTensor xtb(2 * kGiB, kBf16, {kB, kT, kK}, {kK, kB * kK, 1}), ytb(1 * kGiB, kBf16, {kB, kT, kN}, {kN, kB * kN, 1});
  accepts([&] { fwd(y.dl, xtb.dl, w.dl); }, "x [T, B, K]");
  accepts([&] { fwd(ytb.dl, xtb.dl, w.dl); }, "x, y [T, B, .]");
  FakeTensor xpad(2 * kGiB, kBf16, {kB, kT, kK}, {kT * (kK + 16), kK + 16, 1});
  accepts([&] { fwd(y.dl, xpad.dl, w.dl); }, "x padded rows");
  FakeTensor xcol(2 * kGiB, kBf16, {kB, kT, kK}, {kK, kB * kK * 2, 2});
  rejects([&] { fwd(y.dl, xcol.dl, w.dl); }, "x", "each row must be contiguous");
  FakeTensor xodd(2 * kGiB, kBf16, {kB, kT, kK}, {kK + 4, kB * (kK + 4), 1});
  rejects([&] { fwd(y.dl, xodd.dl, w.dl); }, "x", "multiples of 8 elements (16 bytes");
  FakeTensor yf4(1 * kGiB, kF32, {kB, kT, kN}, {kN + 4, kB * (kN + 4), 1});
  accepts([&] { fwd(yf4.dl, xtb.dl, w.dl); }, "f32 y with rows 16 bytes apart");
  FakeTensor yf2(1 * kGiB, kF32, {kB, kT, kN}, {kN + 2, kB * (kN + 2), 1});
  rejects([&] { fwd(yf2.dl, xtb.dl, w.dl); }, "y", "multiples of 4 elements (16 bytes");
  // Rows that overlap each other, heads that overlap rows, heads on one another.
  FakeTensor yrows(1 * kGiB, kBf16, {kB, kT, kN}, {kT * kN, kN - 8, 1}), yheads(1 * kGiB, kBf16, {kB, kT, kN}, {kN, kN, 1}),
      yzero(1 * kGiB, kBf16, {kB, kT, kN}, {0, kN, 1});
  rejects([&] { fwd(yrows.dl, xtb.dl, w.dl); }, "y", "reach some elements twice");
  rejects([&] { fwd(yheads.dl, xtb.dl, w.dl); }, "y", "reach some elements twice");
  rejects([&] { fwd(yzero.dl, xtb.dl, w.dl); }, "y", "reach some elements twice");
  FakeTensor xhuge(2 * kGiB, kBf16, {kB, kT, kK}, {int64_t(1) << 40, kK, 1});
  rejects([&] { fwd(y.dl, xhuge.dl, w.dl); }, "x", "larger than cake supports");
  // Strided rows of one [T, K] tensor too; the weight stays contiguous.
  FakeTensor x2(2 * kGiB, kBf16, {kT, kK}, {kK + 8, 1}), y2s(1 * kGiB, kBf16, {kT, kN}, {2 * kN, 1}),
      w2(3 * kGiB, kBf16, {kN, kK});
  accepts([&] { fwd(y2s.dl, x2.dl, w2.dl); }, "2-D strided rows");
  FakeTensor wtb(3 * kGiB, kBf16, {kB, kN, kK}, {kK, kB * kK, 1});
  rejects([&] { fwd(y.dl, x.dl, wtb.dl); }, "w", "contiguous");
  FakeTensor xbig(2 * kGiB, kBf16, {4, int64_t(1) << 29, kK}), ybig(500 * kGiB, kBf16, {4, int64_t(1) << 29, kN}),
      wbig(3 * kGiB, kBf16, {4, kN, kK});
  rejects([&] { fwd(ybig.dl, xbig.dl, wbig.dl); }, "x", "B x T = 4 x 536870912 rows is larger than cake supports");
  auto dgrad = [&](const DLTensor& dx_, const DLTensor& dy_, const DLTensor& w_) {
    ops::prepare_dense_gemm_dgrad(rt, dx_, dy_, w_);
  };
  FakeTensor dx(4 * kGiB, kBf16, {kB, kT, kK}), dy(5 * kGiB, kBf16, {kB, kT, kN});
  FakeTensor dxs(4 * kGiB, kBf16, {kB, kT, kK + 8});
  rejects([&] { dgrad(dxs.dl, dy.dl, w.dl); }, "dx", "differs from [B, T, K] = [3, 100, 48]");
  FakeTensor dy4(5 * kGiB, kBf16, {1, kB, kT, kN});
  rejects([&] { dgrad(dx.dl, dy4.dl, w.dl); }, "dy", "must be 2-D [T, N] or 3-D [B, T, N] (a batch of heads), got 4-D");
  auto wgrad = [&](const DLTensor& dw_, const DLTensor& dy_, const DLTensor& x_, bool acc) {
    ops::prepare_dense_gemm_wgrad(rt, dw_, dy_, x_, acc);
  };
  FakeTensor dw(6 * kGiB, kF32, {kB, kN, kK}), dw2(6 * kGiB, kF32, {kN, kK});
  rejects([&] { wgrad(dw2.dl, dy.dl, x.dl, true); }, "dw", "must be 3-D [B, N, K], got 2-D");
  FakeTensor xt(2 * kGiB, kBf16, {kB, kT + 1, kK});
  rejects([&] { wgrad(dw.dl, dy.dl, xt.dl, false); }, "x", "differs from [B, T, K] = [3, 100, 48]");
  FakeTensor dytb(5 * kGiB, kBf16, {kB, kT, kN}, {kN, kB * kN, 1}), dxtb(4 * kGiB, kBf16, {kB, kT, kK}, {kK, kB * kK, 1});
  accepts([&] { wgrad(dw.dl, dytb.dl, xtb.dl, true); }, "wgrad of [T, B, .] heads");
  accepts([&] { dgrad(dxtb.dl, dytb.dl, w.dl); }, "dgrad of [T, B, .] heads");
  FakeTensor dxo(4 * kGiB, kBf16, {kB, kT, kK}, {kK, kK, 1});
  rejects([&] { dgrad(dxo.dl, dytb.dl, w.dl); }, "dx", "reach some elements twice");
  FakeTensor dwtb(6 * kGiB, kF32, {kB, kN, kK}, {kK, kB * kK, 1});
  rejects([&] { wgrad(dwtb.dl, dytb.dl, xtb.dl, true); }, "dw", "contiguous");
}

TEST_F(OpsArgs, DenseGemmDgradAndWgrad) {
  Runtime rt(opts());
  FakeTensor dx(1 * kGiB, kBf16, {kT, kK}), dy(2 * kGiB, kBf16, {kT, kN}), w(3 * kGiB, kBf16, {kN, kK}),
      x(4 * kGiB, kBf16, {kT, kK});
  auto dgrad = [&](const DLTensor& dx_, const DLTensor& dy_, const DLTensor& w_) {
    ops::prepare_dense_gemm_dgrad(rt, dx_, dy_, w_);
  };
  FakeTensor dy20(2 * kGiB, kBf16, {kT, 20});
  rejects([&] { dgrad(dx.dl, dy20.dl, w.dl); }, "dy", "N = 20 must be a positive multiple of 8");
  FakeTensor wn(3 * kGiB, kBf16, {kN + 8, kK});
  rejects([&] { dgrad(dx.dl, dy.dl, wn.dl); }, "w", "differs from [N, K] = [32, 48]");
  FakeTensor dxf(1 * kGiB, kF32, {kT, kK});
  rejects([&] { dgrad(dxf.dl, dy.dl, w.dl); }, "dx", "dtype f32");
  FakeTensor dxw(3 * kGiB + 16, kBf16, {kT, kK});
  rejects([&] { dgrad(dxw.dl, dy.dl, w.dl); }, "dx", "overlaps input 'w'");

  auto wgrad = [&](const DLTensor& dw_, const DLTensor& dy_, const DLTensor& x_, bool acc) {
    ops::prepare_dense_gemm_wgrad(rt, dw_, dy_, x_, acc);
  };
  for (bool acc : {false, true}) {
    SCOPED_TRACE(acc ? "accumulate" : "overwrite");
    FakeTensor dw(5 * kGiB, kF32, {kN, kK});
    FakeTensor xt(4 * kGiB, kBf16, {kT + 1, kK});
    rejects([&] { wgrad(dw.dl, dy.dl, xt.dl, acc); }, "x", "differs from [T, K] = [100, 48]");
    FakeTensor x44(4 * kGiB, kBf16, {kT, 44});
    rejects([&] { wgrad(dw.dl, dy.dl, x44.dl, acc); }, "x", "K = 44");
    FakeTensor dw64(5 * kGiB, kF64, {kN, kK});
    rejects([&] { wgrad(dw64.dl, dy.dl, x.dl, acc); }, "dw", "dtype f64 not supported here (bf16, f32)");
    FakeTensor dwk(5 * kGiB, kF32, {kN, kK + 8});
    rejects([&] { wgrad(dwk.dl, dy.dl, x.dl, acc); }, "dw", "differs from [N, K] = [32, 48]");
    FakeTensor dwkn(5 * kGiB, kF32, {kN, kK}, {1, kN}), xs(4 * kGiB, kBf16, {kT, kK + 8});
    // dw [K, N] as a transposed view: checked against the dims the inputs give.
    rejects([&] { wgrad(dwkn.dl, dy.dl, xs.dl, acc); }, "dw", "shape [48, 32] differs from [K, N] = [56, 32]");
    // An expanded dw would be read and written through several aliases while accumulating.
    FakeTensor dwx(5 * kGiB, kF32, {kN, kK}, {0, 1});
    rejects([&] { wgrad(dwx.dl, dy.dl, x.dl, acc); }, "dw", "contiguous");
    FakeTensor dwa(5 * kGiB + 4, kF32, {kN, kK});
    rejects([&] { wgrad(dwa.dl, dy.dl, x.dl, acc); }, "dw", "16-byte aligned");
    FakeTensor dwdy(2 * kGiB + 32, kF32, {kN, kK});
    rejects([&] { wgrad(dwdy.dl, dy.dl, x.dl, acc); }, "dw", "overlaps input 'dy'");
    FakeTensor dynull(0, kBf16, {kT, kN});
    rejects([&] { wgrad(dw.dl, dynull.dl, x.dl, acc); }, "dy", "null data pointer");
  }
}

TEST_F(OpsArgs, DenseGemmCAbi) {
  test::CAbiArgs c;
  FakeTensor y(1 * kGiB, kBf16, {kT, kN}), x(2 * kGiB, kBf16, {kT, kK}), w(3 * kGiB, kBf16, {kN, kK}),
      dy(5 * kGiB, kBf16, {kT, kN}), dw(7 * kGiB, kF32, {kN, kK});
  c.rejects("dense_gemm.fwd", {{"y", nullptr}, {"x", &x.dl}, {"w", &w.dl}}, nullptr, "argument 'y': null");
  c.rejects("dense_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}}, nullptr, "argument 'w': missing");
  c.rejects("dense_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}, {"w", &w.dl}, {"offs", &w.dl}}, nullptr,
            "offs");
  c.rejects("dense_gemm.fwd", {{"y", &y.dl}, {"x", &dw.dl}, {"w", &w.dl}}, nullptr, "argument 'x'");
  c.rejects("dense_gemm.fwd", {{"y", &y.dl}, {"x", &x.dl}, {"w", &w.dl}}, "{\"accumulate\": true}",
            "argument 'accumulate': dense_gemm.fwd does not accumulate");
  c.rejects("dense_gemm.wgrad", {{"dw", &y.dl}, {"dy", &dy.dl}, {"x", &x.dl}}, "{\"accumulate\": true}",
            "argument 'dw'");
  FakeTensor xcol(2 * kGiB, kBf16, {kT, kK}, {1, kT}), yover(1 * kGiB, kBf16, {kT, kN}, {8, 1});
  c.rejects("dense_gemm.fwd", {{"y", &y.dl}, {"x", &xcol.dl}, {"w", &w.dl}}, nullptr, "each row must be contiguous");
  c.rejects("dense_gemm.fwd", {{"y", &yover.dl}, {"x", &x.dl}, {"w", &w.dl}}, nullptr, "reach some elements twice");
}

}  // namespace
}  // namespace cake
