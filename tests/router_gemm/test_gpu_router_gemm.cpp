// Label gpu: router_gemm fwd (bf16 and f32 w), dgrad (bf16 and f32 w, bf16 and f32 dx) and
// wgrad (overwrite and accumulate) against an FP64 reference of the FP32 values, with
// TARGETS.md's FP32 budget (bf16 dx: the bf16 budget). Outputs are poisoned before every run;
// each route runs twice and capped to 3 SMs (the same bits each time), on the planner's route
// and with the portable programs forced (on Hopper also the three-GEMM sm90 fwd). The data is full-precision FP32 (not values that
// BF16 holds), so a result computed from BF16-rounded operands misses the budget: a check
// below makes sure of it.
#include <gtest/gtest.h>

#include "driver.hpp"
#include "gpu_util.hpp"
#include "router_gemm_ops.hpp"

namespace cake {
namespace {
using test::Dev;
using test::parallel_for;
using test::widen;

struct Case {
  const char* name;
  int64_t t, e, h;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

template <typename T>
std::vector<T> as(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Relative Frobenius error of `got` against `ref`.
double rel_fro(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

class RouterGemm : public test::RuntimeTest<::testing::TestWithParam<Case>> {
 protected:
  // Runs `prepare(options)` on a poisoned output twice, then capped to 3 SMs, for the planner's
  // route and the forced portable candidate: the same bits within each; returns both.
  std::vector<std::vector<uint8_t>> runs(const std::string& portable, Dev& out, bool accumulate_from,
                                         const std::vector<float>& out0,
                                         const std::function<Launch(const ops::OpOptions&)>& prepare) {
    std::vector<std::vector<uint8_t>> result;
    for (const bool forced : {false, true}) {
      std::vector<uint8_t> first;
      for (int max_sms : {0, 0, 3}) {
        ops::OpOptions o;
        o.max_sms = max_sms;
        if (forced) o.candidate = portable;
        Launch l = prepare(o);
        EXPECT_NE(l.plan(), nullptr);
        if (l.plan() && forced) EXPECT_EQ(l.plan()->route, portable);
        if (accumulate_from) out.upload(out0);
        else out.poison();
        l.launch(nullptr);
        auto bits = out.download<uint8_t>();
        if (first.empty()) first = bits;
        else EXPECT_EQ(bits, first) << portable << ": bits differ (max_sms " << max_sms << ", forced " << forced << ")";
      }
      result.push_back(first);
    }
    return result;
  }
};

TEST_P(RouterGemm, MatchesFp64) {
  const Case c = GetParam();
  const int64_t T = c.t, E = c.e, H = c.h;
  const uint64_t seed = uint64_t(T * 7919 + E * 1009 + H);
  auto xb = test::to_bf16(test::random_floats(size_t(T * H), seed));
  auto wf = test::random_floats(size_t(E * H), seed + 1, 0.02f);
  auto wb = test::to_bf16(wf);
  auto gf = test::random_floats(size_t(T * E), seed + 2, 1e-3f);
  const auto x = widen(xb), wbd = widen(wb);
  const std::vector<double> w(wf.begin(), wf.end()), g(gf.begin(), gf.end());
  Dev X(DType::bf16, {T, H}), WF(DType::f32, {E, H}), WB(DType::bf16, {E, H}), G(DType::f32, {T, E});
  X.upload(xb), WF.upload(wf), WB.upload(wb), G.upload(gf);

  // FP64 references for both weights: logits = x w^T, dx = g w; dw = g^T x.
  std::vector<double> lref[2], dxref[2], dwref(size_t(E * H), 0.0);
  for (int i = 0; i < 2; ++i) lref[i].assign(size_t(T * E), 0.0), dxref[i].assign(size_t(T * H), 0.0);
  parallel_for(T, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r)
      for (int i = 0; i < 2; ++i) {
        const std::vector<double>& wv = i ? w : wbd;
        for (int64_t e = 0; e < E; ++e) {
          const double* wr = &wv[size_t(e * H)];
          double s = 0;
          for (int64_t k = 0; k < H; ++k) s += x[size_t(r * H + k)] * wr[k];
          lref[i][size_t(r * E + e)] = s;
          const double gv = g[size_t(r * E + e)];
          for (int64_t k = 0; k < H; ++k) dxref[i][size_t(r * H + k)] += gv * wr[k];
        }
      }
  });
  parallel_for(E, [&](int64_t lo, int64_t hi) {
    for (int64_t e = lo; e < hi; ++e)
      for (int64_t r = 0; r < T; ++r) {
        const double gv = g[size_t(r * E + e)];
        for (int64_t k = 0; k < H; ++k) dwref[size_t(e * H + k)] += gv * x[size_t(r * H + k)];
      }
  });
  // The data needs FP32: logits from the BF16-rounded weight miss the FP32 budget.
  if (T * E > 1000) EXPECT_GT(rel_fro(lref[0], lref[1]), 5e-5);

  for (int i = 0; i < 2; ++i) {
    const char* wt = i ? "f32" : "bf16";
    const Dev& W = i ? WF : WB;
    SCOPED_TRACE(std::string(wt) + " w");
    Dev L(DType::f32, {T, E});
    for (const auto& bits : runs(i ? "fwd_bf16x3_portable_128x128" : "fwd_bf16w_portable_128x128", L, false, {},
                                 [&](const ops::OpOptions& o) {
                                   return ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl, o);
                                 }))
      test::expect_f32_close(as<float>(bits), lref[i], "logits");
    // Hopper: the sm90 fwd by E (an f32 w's parts as the B parts of one GEMM), and the
    // three-GEMM sm90 route, the fused one's fallback, forced.
    if (Driver::instance().device(0).arch == *Arch::parse("sm_90a")) {
      const std::string tile = E <= 64 ? "128x64" : "128x128";
      Launch planned = ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl);
      ASSERT_NE(planned.plan(), nullptr);
      EXPECT_EQ(planned.plan()->route, (i ? "fwd_bf16x3_fused_sm90_" : "fwd_bf16w_sm90_") + tile);
      if (i)
        for (const auto& bits : runs("fwd_bf16x3_sm90_" + tile, L, false, {}, [&](const ops::OpOptions& o) {
               return ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl, o);
             }))
          test::expect_f32_close(as<float>(bits), lref[i], "logits (three sm90 GEMMs)");
    }
    for (const std::string out : {"bf16", "f32"}) {
      Dev DX(*parse_dtype(out), {T, H});
      for (const auto& bits : runs("dgrad_" + out + "_" + wt + "w_portable_128x128", DX, false, {},
                                   [&](const ops::OpOptions& o) {
                                     return ops::prepare_router_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, o);
                                   })) {
        if (out == "f32") test::expect_f32_close(as<float>(bits), dxref[i], "dx (f32)");
        else test::expect_bf16_close(as<uint16_t>(bits), dxref[i], dxref[i].size(), "dx (bf16)");
      }
    }
  }
  Dev DW(DType::f32, {E, H});
  const auto dw = runs("wgrad_portable_128x128", DW, false, {}, [&](const ops::OpOptions& o) {
    return ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, false, o);
  });
  for (const auto& bits : dw) test::expect_f32_close(as<float>(bits), dwref, "dw");
  // Accumulating: dw0 + the overwrite's result, rounded once (bitwise).
  const auto dw0 = test::random_floats(size_t(E * H), seed + 3, 0.1f);
  const auto acc = runs("wgrad_acc_portable_128x128", DW, true, dw0, [&](const ops::OpOptions& o) {
    return ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true, o);
  });
  for (size_t r = 0; r < acc.size(); ++r) {
    const auto got = as<uint32_t>(acc[r]);
    const auto sum = as<float>(dw[r]);
    size_t bad = 0;
    for (size_t j = 0; j < got.size(); ++j)
      if (got[j] != test::f32_bits(dw0[j] + sum[j]) && bad++ < 3) ADD_FAILURE() << "dw += at " << j;
    EXPECT_EQ(bad, 0u);
  }
}

const Case kCases[] = {
    {"T1_E64_H4096", 1, 64, 4096},   {"T4097_E128_H512", 4097, 128, 512}, {"T1000_E256_H1024", 1000, 256, 1024},
    {"T333_E8_H8", 333, 8, 8},       {"T20000_E64_H256", 20000, 64, 256}, {"T257_E72_H520", 257, 72, 520},
    // A long reduction for wgrad (the tensor cores' FP32 accumulation over 131072 rows).
    {"T65536_E64_H256", 65536, 64, 256}, {"T131072_E64_H256", 131072, 64, 256},
};
INSTANTIATE_TEST_SUITE_P(Cases, RouterGemm, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

using RouterGemmGpu = test::RuntimeTest<>;

// No tokens: fwd and dgrad write nothing, wgrad zero-fills dw (or leaves it, accumulating).
TEST_F(RouterGemmGpu, NoTokens) {
  Dev X(DType::bf16, {0, 64}), W(DType::f32, {16, 64}), L(DType::f32, {0, 16}), G(DType::f32, {0, 16}),
      DW(DType::f32, {16, 64});
  ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl).launch(nullptr);
  DW.poison();
  ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, false).launch(nullptr);
  for (float v : DW.download<float>()) ASSERT_EQ(v, 0.0f);
  const std::vector<float> ones(16 * 64, 1.0f);
  DW.upload(ones);
  ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true).launch(nullptr);
  EXPECT_EQ(DW.download<float>(), ones);
}

// Non-finite values propagate as in FP32: an inf in w makes its logits column inf or NaN,
// not a finite number.
TEST_F(RouterGemmGpu, NonFiniteWeightsPropagate) {
  const int64_t T = 64, E = 8, H = 64;
  Dev X(DType::bf16, {T, H}), W(DType::f32, {E, H}), L(DType::f32, {T, E});
  X.upload(test::to_bf16(test::random_floats(size_t(T * H), 7)));
  auto w = test::random_floats(size_t(E * H), 8);
  w[3 * H + 5] = INFINITY;
  W.upload(w);
  ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl).launch(nullptr);
  const auto l = L.download<float>();
  for (int64_t r = 0; r < T; ++r) {
    EXPECT_FALSE(std::isfinite(l[size_t(r * E + 3)])) << r;
    EXPECT_TRUE(std::isfinite(l[size_t(r * E + 2)])) << r;
  }
}

// A prepared f32-weight fwd and an accumulating wgrad replay in a captured graph with a
// direct launch's bits.
TEST_F(RouterGemmGpu, ReplaysInACapturedGraph) {
  const int64_t T = 1500, E = 64, H = 512;
  Dev X(DType::bf16, {T, H}), W(DType::f32, {E, H}), G(DType::f32, {T, E}), L(DType::f32, {T, E}),
      DW(DType::f32, {E, H});
  X.upload(test::to_bf16(test::random_floats(size_t(T * H), 1)));
  W.upload(test::random_floats(size_t(E * H), 2));
  G.upload(test::random_floats(size_t(T * E), 3));
  const auto dw0 = test::random_floats(size_t(E * H), 4);
  auto fwd = ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl);
  auto acc = ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true);
  L.poison(), DW.upload(dw0);
  fwd.launch(nullptr), acc.launch(nullptr);
  const auto l1 = L.download<uint32_t>(), dw1 = DW.download<uint32_t>();
  test::CapturedGraph graph([&](CUstream s) { fwd.launch(s), acc.launch(s); });
  L.poison(), DW.upload(dw0);
  graph.replay();
  EXPECT_EQ(L.download<uint32_t>(), l1);
  EXPECT_EQ(DW.download<uint32_t>(), dw1);
}

}  // namespace
}  // namespace cake
