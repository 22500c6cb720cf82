// Label gpu: rmsnorm forward and backward against an FP64 reference on the same bf16 inputs,
// with TARGETS.md's budgets; outputs poisoned with NaN; dw bitwise identical run to run and
// over grids of any size (OpOptions::max_sms).
#include <gtest/gtest.h>

#include <cmath>

#include "error.hpp"
#include "gpu_util.hpp"
#include "rmsnorm_contract.h"
#include "rmsnorm_mat.hpp"
#include "rmsnorm_ops.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using test::bf16_float;
using test::FreshRuntime;
using test::Mat;

// Budget for bf16 outputs (TARGETS.md), element by element; f32 ones: test::expect_f32_close.
void expect_bf16_close(const std::vector<uint16_t>& got, const std::vector<double>& ref, int64_t rows,
                       int64_t h, int64_t stride, const char* what) {
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < h; ++j) {
      double g = bf16_float(got[size_t(r * stride + j)]), e = ref[size_t(r * h + j)];
      if (!(std::fabs(g - e) <= 1e-2 + 1e-2 * std::fabs(e))) {
        if (bad++ < 3) ADD_FAILURE() << what << "[" << r << "," << j << "] = " << g << ", ref " << e;
      }
    }
  EXPECT_EQ(bad, 0) << what;
}


struct Case {
  int64_t t, h;
  bool f32_weight, residual;
  bool generic = false;  // the generic program forced (candidate), whatever H is
};

// The options of a case: the planner's choice, or the generic program's candidate forced.
ops::OpOptions fwd_options(const Case& c) {
  ops::OpOptions o;
  if (c.generic)
    o.candidate = std::string("fwd_hany_w") + (c.f32_weight ? "f32" : "bf16") + (c.residual ? "_residual" : "");
  return o;
}
ops::OpOptions bwd_options(const Case& c) {
  ops::OpOptions o;
  if (c.generic)
    o.candidate = std::string("bwd_hany_w") + (c.f32_weight ? "f32" : "bf16") + (c.t <= 16384 ? "_chunk32" : "_chunk64") +
                  (c.t >= 131072 ? "_compensated" : "");
  return o;
}

// The program a case runs: its H's instance inside the parametric domain, else the generic one.
std::string program_for(const Case& c, const char* op, int64_t max_h) {
  if (c.generic || c.h < rms::kSpecialisedMinH || c.h > max_h) return std::string("rms_") + op + "_hany";
  return std::string("rms_") + op + ".h" + std::to_string(c.h);
}

using RmsNormTest = test::RuntimeTest<::testing::TestWithParam<Case>>;

TEST_P(RmsNormTest, ForwardAndBackwardMatchFp64) {
  const auto c = GetParam();
  const int64_t T = c.t, H = c.h, stride = H + 8;  // padded rows: stride != H is normal input
  const float eps = 1e-6f;
  uint64_t seed = uint64_t(T * 131 + H);
  auto hx = test::to_bf16(test::random_floats(size_t(T * stride), seed));
  auto hres = test::to_bf16(test::random_floats(size_t(T * stride), seed + 1));
  auto wf = test::random_floats(size_t(H), seed + 2, 0.5f);
  for (auto& v : wf) v += 1.0f;
  auto wb = test::to_bf16(wf);
  std::vector<double> w(static_cast<size_t>(H));
  for (int64_t j = 0; j < H; ++j) w[size_t(j)] = c.f32_weight ? double(wf[size_t(j)]) : bf16_float(wb[size_t(j)]);

  Mat x(DType::bf16, T, H, stride), res(DType::bf16, T, H, stride), y(DType::bf16, T, H, stride),
      hout(DType::bf16, T, H), rstd(DType::f32, T, 0), wt(c.f32_weight ? DType::f32 : DType::bf16, H, 0);
  x.upload(hx);
  res.upload(hres);
  if (c.f32_weight) wt.upload(wf); else wt.upload(wb);
  y.poison(), hout.poison(), rstd.poison();
  auto fwd = ops::prepare_rmsnorm_fwd(*rt_, y.dl, rstd.dl, c.residual ? &hout.dl : nullptr, x.dl,
                                      c.residual ? &res.dl : nullptr, wt.dl, eps, fwd_options(c));
  ASSERT_EQ(fwd.plan()->stages[0].program->name, program_for(c, "fwd", rms::kFwdSpecialisedMaxH)) << fwd.describe();
  fwd.launch(nullptr);

  // FP64 reference on the same bf16 inputs; h = bf16(x + residual) as the kernel defines it.
  std::vector<double> hin(size_t(T * H)), yref(size_t(T * H)), rref(static_cast<size_t>(T));
  for (int64_t r = 0; r < T; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < H; ++j) {
      float xv = bf16_float(hx[size_t(r * stride + j)]);
      double v = c.residual ? bf16_float(test::bf16_bits(xv + bf16_float(hres[size_t(r * stride + j)]))) : xv;
      hin[size_t(r * H + j)] = v;
      ss += v * v;
    }
    rref[size_t(r)] = 1.0 / std::sqrt(ss / double(H) + double(eps));
    for (int64_t j = 0; j < H; ++j) yref[size_t(r * H + j)] = hin[size_t(r * H + j)] * rref[size_t(r)] * w[size_t(j)];
  }
  expect_bf16_close(y.download<uint16_t>(), yref, T, H, stride, "y");
  test::expect_f32_close(rstd.download<float>(), rref, "rstd");
  if (c.residual) {
    auto gh = hout.download<uint16_t>();
    for (int64_t i = 0; i < T * H; ++i)
      ASSERT_EQ(bf16_float(gh[size_t(i)]), float(hin[size_t(i)])) << "h_out " << i;
  }

  // The forward launches one block per row group; capped to one SM's worth of blocks (max_sms)
  // each block walks many rows (grid-stride). Same bits either way.
  {
    Mat y2(DType::bf16, T, H, stride), hout2(DType::bf16, T, H), rstd2(DType::f32, T, 0);
    y2.poison(), hout2.poison(), rstd2.poison();
    ops::OpOptions one_sm = fwd_options(c);
    one_sm.max_sms = 1;
    ops::prepare_rmsnorm_fwd(*rt_, y2.dl, rstd2.dl, c.residual ? &hout2.dl : nullptr, x.dl,
                             c.residual ? &res.dl : nullptr, wt.dl, eps, one_sm)
        .launch(nullptr);
    // Only the H columns of each padded row are written: compare those, and the padding must
    // still hold the poison (0xffff) after either launch.
    auto ya = y.download<uint16_t>(), yb = y2.download<uint16_t>();
    for (int64_t r = 0; r < T; ++r) {
      for (int64_t j = 0; j < H; ++j)
        ASSERT_EQ(ya[size_t(r * stride + j)], yb[size_t(r * stride + j)]) << "y, max_sms 1, row " << r << " col " << j;
      for (int64_t j = H; j < stride; ++j) {
        ASSERT_EQ(ya[size_t(r * stride + j)], 0xffffu) << "y padding written, row " << r << " col " << j;
        ASSERT_EQ(yb[size_t(r * stride + j)], 0xffffu) << "y padding written (max_sms 1), row " << r << " col " << j;
      }
    }
    auto ra = rstd.download<float>(), rb = rstd2.download<float>();
    for (int64_t r = 0; r < T; ++r)
      ASSERT_EQ(test::f32_bits(ra[size_t(r)]), test::f32_bits(rb[size_t(r)])) << "rstd, max_sms 1, row " << r;
    if (c.residual) EXPECT_EQ(hout.download<uint16_t>(), hout2.download<uint16_t>()) << "h_out, max_sms 1";
  }

  // Backward from the kernel's own h and rstd (what a training step saves).
  auto hdy = test::to_bf16(test::random_floats(size_t(T * H), seed + 3));
  Mat dy(DType::bf16, T, H), dx(DType::bf16, T, H), dw(wt.dtype, H, 0), hsaved(DType::bf16, T, H);
  dy.upload(hdy);
  std::vector<uint16_t> hb(static_cast<size_t>(T * H));
  for (int64_t i = 0; i < T * H; ++i) hb[size_t(i)] = test::bf16_bits(float(hin[size_t(i)]));
  hsaved.upload(hb);
  auto rstd_dev = rstd.download<float>();
  dx.poison(), dw.poison();
  auto bwd = ops::prepare_rmsnorm_bwd(*rt_, dx.dl, dw.dl, dy.dl, hsaved.dl, rstd.dl, wt.dl, bwd_options(c));
  ASSERT_EQ(bwd.plan()->stages[0].program->name, program_for(c, "bwd", rms::kBwdSpecialisedMaxH)) << bwd.describe();
  bwd.launch(nullptr);
  std::vector<double> dxref(size_t(T * H)), dwref(static_cast<size_t>(H), 0.0);
  for (int64_t r = 0; r < T; ++r) {
    double rs = rstd_dev[size_t(r)], m = 0;
    for (int64_t j = 0; j < H; ++j) {
      double g = double(bf16_float(hdy[size_t(r * H + j)])) * w[size_t(j)], xh = hin[size_t(r * H + j)] * rs;
      m += g * xh;
      dwref[size_t(j)] += double(bf16_float(hdy[size_t(r * H + j)])) * xh;
    }
    m /= double(H);
    for (int64_t j = 0; j < H; ++j) {
      double g = double(bf16_float(hdy[size_t(r * H + j)])) * w[size_t(j)], xh = hin[size_t(r * H + j)] * rs;
      dxref[size_t(r * H + j)] = rs * (g - xh * m);
    }
  }
  expect_bf16_close(dx.download<uint16_t>(), dxref, T, H, H, "dx");
  std::vector<uint16_t> dw16_first;
  std::vector<float> dw32_first;
  if (c.f32_weight) {
    dw32_first = dw.download<float>();
    test::expect_f32_close(dw32_first, dwref, "dw");
  } else {
    dw16_first = dw.download<uint16_t>();
    expect_bf16_close(dw16_first, dwref, 1, H, H, "dw");
  }
  // Deterministic: a second run of the same launch, a freshly prepared one, and ones whose
  // grids are capped to 1 and 7 SMs' worth of blocks (each block then walks many more chunks
  // and column groups): same bits.
  for (int rep = 0; rep < 4; ++rep) {
    dw.poison();
    ops::OpOptions capped = bwd_options(c);
    capped.max_sms = rep == 2 ? 1 : 7;
    if (rep == 0) bwd.launch(nullptr);
    else if (rep == 1) ops::prepare_rmsnorm_bwd(*rt_, dx.dl, dw.dl, dy.dl, hsaved.dl, rstd.dl, wt.dl, bwd_options(c)).launch(nullptr);
    else ops::prepare_rmsnorm_bwd(*rt_, dx.dl, dw.dl, dy.dl, hsaved.dl, rstd.dl, wt.dl, capped).launch(nullptr);
    if (c.f32_weight) {
      auto again = dw.download<float>();
      for (int64_t j = 0; j < H; ++j) ASSERT_EQ(test::f32_bits(again[size_t(j)]), test::f32_bits(dw32_first[size_t(j)])) << j;
    } else {
      EXPECT_EQ(dw.download<uint16_t>(), dw16_first);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RmsNormTest,
    ::testing::Values(Case{1, 256, false, false}, Case{7, 512, true, true}, Case{1000, 1024, false, true},
                      Case{333, 1536, true, false}, Case{64, 2048, false, false}, Case{513, 4096, true, true},
                      Case{129, 5120, false, true}, Case{65, 6144, true, false}, Case{65, 6144, false, true},
                      Case{300, 8192, false, false},
                      Case{300, 8192, true, true}, Case{17, 328, true, true}, Case{11, 3000, false, true},
                      Case{33, 7168, false, false}, Case{70, 3584, true, true}, Case{21, 5376, false, true},
                      Case{40, 12288, false, false} /* bwd: 1024 threads of 4 */,
                      Case{9, 16384, true, false} /* the domain's top */, Case{130, 16384, false, true},
                      Case{67, 9000, true, false} /* bwd: 1024 threads, 3 slots of 4 */,
                      Case{3, 16392, false, false} /* above the domain: generic */,
                      Case{5, 248, false, false} /* below the domain: generic */,
                      Case{17, 4096, true, true, true}, Case{40, 12288, false, false, true},
                      Case{300, 8192, false, true, true}, Case{65, 5120, true, false, true},
                      Case{20000, 1024, true, false} /* chunk 64 */,
                      Case{140000, 256, true, false} /* compensated */,
                      Case{140000, 256, false, false, true} /* compensated, generic */),
    [](const auto& info) {
      const Case& c = info.param;
      return "T" + std::to_string(c.t) + "_H" + std::to_string(c.h) + (c.f32_weight ? "_wf32" : "_wbf16") +
             (c.residual ? "_res" : "") + (c.generic ? "_generic" : "");
    });

TEST(RmsNormArgs, RejectedBeforeAnythingIsWritten) {
  CAKE_SKIP_WITHOUT_GPU();
  FreshRuntime fresh;
  Runtime& rt = *fresh.rt;
  Mat x(DType::bf16, 4, 64), y(DType::bf16, 4, 64), rstd(DType::f32, 4, 0), w(DType::bf16, 64, 0),
      wbad(DType::bf16, 32, 0), odd(DType::bf16, 4, 60), r5(DType::f32, 5, 0);
  y.poison();
  auto expect_arg = [](auto&& call, const std::string& arg, const std::string& text) {
    test::expect_argument_error(call, arg, text);
  };
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl, 0.0f); }, "eps", "> 0");
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, nullptr, x.dl, nullptr, w.dl, NAN); }, "eps", "> 0");
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, nullptr, x.dl, nullptr, wbad.dl, 1e-6f); }, "w", "64 elements");
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, r5.dl, nullptr, x.dl, nullptr, w.dl, 1e-6f); }, "rstd", "4 elements");
  Mat o2(DType::bf16, 4, 60);
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, o2.dl, rstd.dl, nullptr, odd.dl, nullptr, w.dl, 1e-6f); }, "x", "multiple of 8");
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, &y.dl, x.dl, nullptr, w.dl, 1e-6f); }, "residual", "come together");
  DLTensor narrow = x.dl;
  int64_t st[2] = {32, 1};
  narrow.strides = st;
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd.dl, nullptr, narrow, nullptr, w.dl, 1e-6f); }, "x", "row stride 32");
  DLTensor ybf = y.dl;
  ybf.dtype = {kDLFloat, 32, 1};
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, ybf, rstd.dl, nullptr, x.dl, nullptr, w.dl, 1e-6f); }, "y", "dtype f32");
  DLTensor rstd_in_y = rstd.dl;
  rstd_in_y.data = y.dl.data;
  expect_arg([&] { ops::prepare_rmsnorm_fwd(rt, y.dl, rstd_in_y, nullptr, x.dl, nullptr, w.dl, 1e-6f); }, "rstd", "overlaps");
  Mat dw32(DType::f32, 64, 0);
  expect_arg([&] { ops::prepare_rmsnorm_bwd(rt, y.dl, dw32.dl, x.dl, x.dl, rstd.dl, w.dl); }, "dw", "dtype f32");
  auto got = y.download<uint16_t>();
  for (auto v : got) ASSERT_EQ(v, 0xffff);  // untouched
  // T = 0: nothing to do, nothing launched.
  Mat x0(DType::bf16, 0, 64), y0(DType::bf16, 0, 64), r0(DType::f32, 0, 0);
  auto l = ops::prepare_rmsnorm_fwd(rt, y0.dl, r0.dl, nullptr, x0.dl, nullptr, w.dl, 1e-6f);
  EXPECT_EQ(l.stage_count(), 0u);
}

}  // namespace
}  // namespace cake
