// Every argument of rmsnorm.fwd and .bwd, rejected before anything happens.
#include "ops_args.hpp"
#include "rmsnorm_ops.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::OpsArgs;
using test::kBf16;
using test::kF32;
using test::kF64;
using test::kGiB;

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

}  // namespace
}  // namespace cake
