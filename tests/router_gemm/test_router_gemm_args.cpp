// Every argument of router_gemm.fwd, .dgrad and .wgrad rejected before anything happens,
// through the C++ API and the C ABI.
#include "ops_args.hpp"
#include "router_gemm_ops.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::OpsArgs;
using test::kBf16;
using test::kF32;
using test::kF64;
using test::kGiB;

// router_gemm: x [T, H] bf16, w [E, H] bf16 or f32, logits / dlogits [T, E] f32, dx [T, H],
// dw [E, H] f32.
constexpr int64_t kT = 100, kE = 64, kH = 48;

TEST_F(OpsArgs, RouterGemmForward) {
  Runtime rt(opts());
  FakeTensor logits(1 * kGiB, kF32, {kT, kE}), x(2 * kGiB, kBf16, {kT, kH}), w(3 * kGiB, kF32, {kE, kH});
  auto fwd = [&](const DLTensor& l_, const DLTensor& x_, const DLTensor& w_) {
    ops::prepare_router_gemm_fwd(rt, l_, x_, w_);
  };
  FakeTensor we(3 * kGiB, kF32, {20, kH}), wh(3 * kGiB, kF32, {kE, 12}), w0(3 * kGiB, kF32, {0, kH});
  rejects([&] { fwd(logits.dl, x.dl, we.dl); }, "w", "E = 20 must be a positive multiple of 8");
  rejects([&] { fwd(logits.dl, x.dl, wh.dl); }, "w", "H = 12 must be a positive multiple of 8");
  rejects([&] { fwd(logits.dl, x.dl, w0.dl); }, "w", "E = 0");
  FakeTensor x3(2 * kGiB, kBf16, {1, kT, kH}), w3(3 * kGiB, kF32, {1, kE, kH});
  rejects([&] { fwd(logits.dl, x3.dl, w.dl); }, "x", "must be 2-D [T, K], got 3-D");
  rejects([&] { fwd(logits.dl, x.dl, w3.dl); }, "w", "must be 2-D");
  FakeTensor xh(2 * kGiB, kBf16, {kT, kH + 8});
  rejects([&] { fwd(logits.dl, xh.dl, w.dl); }, "w", "shape [64, 48] differs from [N, K] = [64, 56]");
  FakeTensor lb(1 * kGiB, kBf16, {kT, kE}), lt(1 * kGiB, kF32, {kT + 1, kE});
  rejects([&] { fwd(lb.dl, x.dl, w.dl); }, "logits", "dtype bf16 not supported here (f32)");
  rejects([&] { fwd(lt.dl, x.dl, w.dl); }, "logits", "differs from [T, N] = [100, 64]");
  FakeTensor xf(2 * kGiB, kF32, {kT, kH}), w64(3 * kGiB, kF64, {kE, kH});
  rejects([&] { fwd(logits.dl, xf.dl, w.dl); }, "x", "dtype f32");
  rejects([&] { fwd(logits.dl, x.dl, w64.dl); }, "w", "dtype f64 not supported here (bf16, f32)");
  FakeTensor ws(3 * kGiB, kF32, {kE, kH}, {1, kE}), wa(3 * kGiB + 4, kF32, {kE, kH});
  rejects([&] { fwd(logits.dl, x.dl, ws.dl); }, "w", "contiguous");
  rejects([&] { fwd(logits.dl, x.dl, wa.dl); }, "w", "16-byte aligned");
  FakeTensor lx(2 * kGiB + 64, kF32, {kT, kE});
  rejects([&] { fwd(lx.dl, x.dl, w.dl); }, "logits", "overlaps input 'x'");
  FakeTensor wdev(3 * kGiB, kF32, {kE, kH});
  wdev.dl.device = {kDLCUDA, 1};
  rejects([&] { fwd(logits.dl, x.dl, wdev.dl); }, "w", "device 1");
  FakeTensor xnull(0, kBf16, {kT, kH});
  rejects([&] { fwd(logits.dl, xnull.dl, w.dl); }, "x", "null data pointer");
  // T x 6 E parts must stay int-indexed.
  FakeTensor xbig(2 * kGiB, kBf16, {int64_t(1) << 24, kH}), lbig(100 * kGiB, kF32, {int64_t(1) << 24, kE});
  rejects([&] { fwd(lbig.dl, xbig.dl, w.dl); }, "x", "T x E = 16777216 x 64 is larger than cake supports");
}

TEST_F(OpsArgs, RouterGemmDgradAndWgrad) {
  Runtime rt(opts());
  FakeTensor dx(1 * kGiB, kBf16, {kT, kH}), dl(2 * kGiB, kF32, {kT, kE}), w(3 * kGiB, kBf16, {kE, kH}),
      x(4 * kGiB, kBf16, {kT, kH});
  auto dgrad = [&](const DLTensor& dx_, const DLTensor& dl_, const DLTensor& w_) {
    ops::prepare_router_gemm_dgrad(rt, dx_, dl_, w_);
  };
  FakeTensor dlb(2 * kGiB, kBf16, {kT, kE});
  rejects([&] { dgrad(dx.dl, dlb.dl, w.dl); }, "dlogits", "dtype bf16 not supported here (f32)");
  FakeTensor dle(2 * kGiB, kF32, {kT, kE + 8});
  rejects([&] { dgrad(dx.dl, dle.dl, w.dl); }, "w", "differs from [N, K] = [72, 48]");
  FakeTensor dx64(1 * kGiB, kF64, {kT, kH}), dxt(1 * kGiB, kBf16, {kT - 1, kH});
  rejects([&] { dgrad(dx64.dl, dl.dl, w.dl); }, "dx", "dtype f64 not supported here (bf16, f32)");
  rejects([&] { dgrad(dxt.dl, dl.dl, w.dl); }, "dx", "differs from [T, K] = [100, 48]");
  FakeTensor dxw(3 * kGiB + 16, kF32, {kT, kH});
  rejects([&] { dgrad(dxw.dl, dl.dl, w.dl); }, "dx", "overlaps input 'w'");

  auto wgrad = [&](const DLTensor& dw_, const DLTensor& dl_, const DLTensor& x_, bool acc) {
    ops::prepare_router_gemm_wgrad(rt, dw_, dl_, x_, acc);
  };
  for (bool acc : {false, true}) {
    SCOPED_TRACE(acc ? "accumulate" : "overwrite");
    FakeTensor dw(5 * kGiB, kF32, {kE, kH});
    FakeTensor dwb(5 * kGiB, kBf16, {kE, kH});
    rejects([&] { wgrad(dwb.dl, dl.dl, x.dl, acc); }, "dw", "dtype bf16 not supported here (f32)");
    FakeTensor dwe(5 * kGiB, kF32, {kE + 4, kH});
    rejects([&] { wgrad(dwe.dl, dl.dl, x.dl, acc); }, "dw", "E = 68 must be a positive multiple of 8");
    FakeTensor xt(4 * kGiB, kBf16, {kT + 1, kH});
    rejects([&] { wgrad(dw.dl, dl.dl, xt.dl, acc); }, "x", "differs from [T, K] = [100, 48]");
    FakeTensor dwx(5 * kGiB, kF32, {kE, kH}, {0, 1});
    rejects([&] { wgrad(dwx.dl, dl.dl, x.dl, acc); }, "dw", "contiguous");
    FakeTensor dwdl(2 * kGiB + 32, kF32, {kE, kH});
    rejects([&] { wgrad(dwdl.dl, dl.dl, x.dl, acc); }, "dw", "overlaps input 'dlogits'");
  }
}

TEST_F(OpsArgs, RouterGemmCAbi) {
  test::CAbiArgs c;
  FakeTensor logits(1 * kGiB, kF32, {kT, kE}), x(2 * kGiB, kBf16, {kT, kH}), w(3 * kGiB, kF32, {kE, kH}),
      dw(4 * kGiB, kF32, {kE, kH});
  c.rejects("router_gemm.fwd", {{"logits", nullptr}, {"x", &x.dl}, {"w", &w.dl}}, nullptr, "argument 'logits': null");
  c.rejects("router_gemm.fwd", {{"logits", &logits.dl}, {"x", &x.dl}}, nullptr, "argument 'w': missing");
  c.rejects("router_gemm.fwd", {{"logits", &logits.dl}, {"x", &x.dl}, {"w", &w.dl}}, "{\"accumulate\": true}",
            "argument 'accumulate': router_gemm.fwd does not accumulate");
  c.rejects("router_gemm.fwd", {{"logits", &logits.dl}, {"x", &w.dl}, {"w", &w.dl}}, nullptr, "argument 'x'");
  c.rejects("router_gemm.wgrad", {{"dw", &dw.dl}, {"dlogits", &x.dl}, {"x", &x.dl}}, "{\"accumulate\": true}",
            "argument 'dlogits'");
}

}  // namespace
}  // namespace cake
