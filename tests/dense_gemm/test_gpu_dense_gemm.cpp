// Label gpu: dense_gemm fwd (bf16 / f32 out), dgrad, wgrad (bf16 / f32 out, accumulate fused
// and composed), plain and batched (contiguous heads, or strided views of them), against an FP64 reference on the same bf16 inputs with
// TARGETS.md's budgets. Outputs are poisoned before every run; each route runs twice (the
// same bits), and with a grid capped to 3 SMs (the same bits again). Every case runs on the
// planner's route and with the portable programs forced.
#include <gtest/gtest.h>

#include <map>

#include "dense_gemm_ops.hpp"
#include "gemm_contract.h"
#include "gpu_util.hpp"

namespace cake {
namespace {
using test::bf16_float;
using test::Dev;
using test::expect_bf16_close;
using test::f32_bits;
using test::parallel_for;
using test::widen;

struct Case {
  const char* name;
  int64_t b, t, n, k;  // b = 0: not batched (2-D tensors)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Candidates of the portable programs (registry/dense_gemm.json), by op and out kind.
const char* portable(const std::string& what) {
  static const std::map<std::string, const char*> names = {
      {"fwd", "fwd_portable_128x128"},
      {"fwd_f32", "fwd_f32_portable_128x128"},
      {"dgrad", "dgrad_portable_128x128"},
      {"wgrad_bf16", "wgrad_bf16_portable_128x128"},
      {"wgrad_f32", "wgrad_f32_portable_128x128"},
      {"wgrad_acc_f32", "wgrad_acc_f32_fused_portable_128x128"},
      {"wgrad_acc_f32_composed", "wgrad_acc_f32_composed_portable"},
      {"wgrad_acc_bf16", "wgrad_acc_bf16_composed_portable"}};
  return names.at(what);
}

std::vector<uint16_t> as16(const std::vector<uint8_t>& b) {
  std::vector<uint16_t> v(b.size() / 2);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
std::vector<float> as32(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

class DenseGemm : public ::testing::TestWithParam<std::tuple<Case, bool>> {
 protected:
  static void SetUpTestSuite() {
    auto& d = Driver::instance();
    if (!d.available() || d.device_count() == 0) return;
    ctx_ = new test::PrimaryContext();
    cache_ = new test::TempDir();
    RuntimeOptions o;
    o.cache_dir = cache_->path().string();
    o.aot_dir = "";
    o.stand_ins = false;
    rt_ = new Runtime(o);  // one runtime: each program compiles once for the whole suite
  }
  static void TearDownTestSuite() {
    delete rt_, delete cache_, delete ctx_;
    rt_ = nullptr, cache_ = nullptr, ctx_ = nullptr;
  }
  void SetUp() override { CAKE_SKIP_WITHOUT_GPU(); }
  ops::OpOptions opt(const std::string& what, int max_sms = 0) const {
    ops::OpOptions o;
    if (std::get<1>(GetParam())) o.candidate = portable(what);
    o.max_sms = max_sms;
    return o;
  }
  // Runs `prepare(max_sms)` on a poisoned output twice, then capped to 3 SMs: the same bits
  // each time. Returns them.
  std::vector<uint8_t> stable_bits(const std::string& what, Dev& out,
                                   const std::function<Launch(const ops::OpOptions&)>& prepare) const {
    std::vector<uint8_t> first;
    for (int max_sms : {0, 0, 3}) {
      Launch l = prepare(opt(what, max_sms));
      EXPECT_NE(l.plan(), nullptr);
      if (l.plan() && std::get<1>(GetParam())) EXPECT_EQ(l.plan()->route, portable(what)) << l.describe();
      out.poison();
      l.launch(nullptr);
      auto bits = out.download<uint8_t>();
      if (first.empty()) first = bits;
      else EXPECT_EQ(bits, first) << what << ": bits differ (max_sms " << max_sms << ")";
    }
    return first;
  }
  static inline test::PrimaryContext* ctx_ = nullptr;
  static inline test::TempDir* cache_ = nullptr;
  static inline Runtime* rt_ = nullptr;
};

TEST_P(DenseGemm, MatchesFp64) {
  const Case c = std::get<0>(GetParam());
  const int64_t B = std::max<int64_t>(c.b, 1), T = c.t, N = c.n, K = c.k;
  auto shape = [&](int64_t rows, int64_t cols) {
    return c.b ? std::vector<int64_t>{c.b, rows, cols} : std::vector<int64_t>{rows, cols};
  };
  const uint64_t seed = uint64_t(B * 1000003 + T * 7919 + N * 1009 + K);
  auto xb = test::to_bf16(test::random_floats(size_t(B * T * K), seed));
  auto gb = test::to_bf16(test::random_floats(size_t(B * T * N), seed + 1));
  auto wb = test::to_bf16(test::random_floats(size_t(B * N * K), seed + 2, 0.5f));
  const auto x = widen(xb), g = widen(gb), w = widen(wb);
  Dev X(DType::bf16, shape(T, K)), G(DType::bf16, shape(T, N)), W(DType::bf16, shape(N, K));
  X.upload(xb), G.upload(gb), W.upload(wb);

  // FP64 references, head by head.
  std::vector<double> yref(size_t(B * T * N)), dxref(size_t(B * T * K)), dwref(size_t(B * N * K), 0.0);
  parallel_for(B * T, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t h = r / T;
      for (int64_t j = 0; j < N; ++j) {
        const double* wr = &w[size_t((h * N + j) * K)];
        double s = 0;
        for (int64_t kk = 0; kk < K; ++kk) s += x[size_t(r * K + kk)] * wr[kk];
        yref[size_t(r * N + j)] = s;
        const double gv = g[size_t(r * N + j)];
        for (int64_t kk = 0; kk < K; ++kk) dxref[size_t(r * K + kk)] += gv * wr[kk];
      }
    }
  });
  parallel_for(B * N, [&](int64_t lo, int64_t hi) {
    for (int64_t hj = lo; hj < hi; ++hj) {
      const int64_t h = hj / N, j = hj % N;
      double* out = &dwref[size_t(hj * K)];
      for (int64_t r = h * T; r < (h + 1) * T; ++r) {
        const double gv = g[size_t(r * N + j)];
        for (int64_t kk = 0; kk < K; ++kk) out[kk] += gv * x[size_t(r * K + kk)];
      }
    }
  });

  {
    Dev Y(DType::bf16, shape(T, N));
    auto bits = stable_bits("fwd", Y, [&](const ops::OpOptions& o) {
      return ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, o);
    });
    expect_bf16_close(as16(bits), yref, yref.size(), "y");
  }
  {
    Dev Y(DType::f32, shape(T, N));
    auto bits = stable_bits("fwd_f32", Y, [&](const ops::OpOptions& o) {
      return ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, o);
    });
    test::expect_f32_close(as32(bits), yref, "y (f32)");
  }
  {
    Dev DX(DType::bf16, shape(T, K));
    auto bits = stable_bits("dgrad", DX, [&](const ops::OpOptions& o) {
      return ops::prepare_dense_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, o);
    });
    expect_bf16_close(as16(bits), dxref, dxref.size(), "dx");
  }
  Dev DWb(DType::bf16, shape(N, K)), DWf(DType::f32, shape(N, K));
  const auto dwb = as16(stable_bits("wgrad_bf16", DWb, [&](const ops::OpOptions& o) {
    return ops::prepare_dense_gemm_wgrad(*rt_, DWb.dl, G.dl, X.dl, false, o);
  }));
  expect_bf16_close(dwb, dwref, dwref.size(), "dw (bf16)");
  const auto dwf = as32(stable_bits("wgrad_f32", DWf, [&](const ops::OpOptions& o) {
    return ops::prepare_dense_gemm_wgrad(*rt_, DWf.dl, G.dl, X.dl, false, o);
  }));
  test::expect_f32_close(dwf, dwref, "dw (f32)");

  // Accumulate into f32, fused and composed: bitwise fp32(out0 + dW), dW the f32 result above.
  auto out0 = test::random_floats(size_t(B * N * K), seed + 3, 4.0f);
  auto check_acc_f32 = [&](const std::string& what, const std::string& candidate, Accumulate want) {
    SCOPED_TRACE(what);
    Dev D(DType::f32, shape(N, K));
    ops::OpOptions o = opt("wgrad_acc_f32");
    if (!candidate.empty()) o.candidate = candidate;
    auto l = ops::prepare_dense_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, true, o);
    EXPECT_EQ(l.plan()->accumulate, want) << l.describe();
    D.upload(out0);
    l.launch(nullptr);
    EXPECT_EQ(test::accumulate_mismatches(D.download<float>(), out0, dwf, what), 0u) << l.describe();
  };
  check_acc_f32("accumulate f32 (planner's route)", "", Accumulate::fused);
  const bool hopper = Driver::instance().device(0).arch == *Arch::parse("sm_90a");
  // The sm90 wgrad tile by N and T (codegen/dense_gemm/spec.cpp kNarrowWgrad).
  const std::string wgrad_tile = N <= 64 && T <= 16384 ? "_128x64" : N <= 128 ? "_128x128" : "";
  check_acc_f32("accumulate f32 composed",
                std::get<1>(GetParam()) ? portable("wgrad_acc_f32_composed")
                : hopper                ? "wgrad_acc_f32_composed_sm90" + wgrad_tile
                                        : "wgrad_acc_f32_composed_portable",
                Accumulate::composed);
  // The non-deterministic split (deterministic = false, Hopper, in its window): out0 + dW
  // within the FP32 budget on every run, the capped grid's too; bits may differ run to run.
  if (hopper && !std::get<1>(GetParam()) && c.b == 0) {
    SCOPED_TRACE("accumulate f32, non-deterministic");
    std::vector<double> want(out0.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = double(out0[i]) + dwref[i];
    const bool in_window = T >= 2 * gemm::kMinReducePartRows && N > 128 && N <= 256 && K <= 8192;
    for (int max_sms : {0, 0, 3}) {
      ops::OpOptions o;
      o.deterministic = false;
      o.max_sms = max_sms;
      Dev D(DType::f32, shape(N, K));
      auto l = ops::prepare_dense_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, true, o);
      EXPECT_EQ(l.plan()->route, in_window  ? "wgrad_acc_f32_reduce_sm90_128x256"
                                            : "wgrad_acc_f32_fused_sm90" + (N <= 128 ? wgrad_tile : "_128x256"))
          << l.describe();
      EXPECT_EQ(l.plan()->deterministic, !in_window);
      D.upload(out0);
      l.launch(nullptr);
      test::expect_f32_close(D.download<float>(), want, "out0 + dW (non-deterministic)");
    }
  }
  {  // Accumulate into bf16: composed only, out = bf16(out0 + bf16(dW)), one fp32 add.
    SCOPED_TRACE("accumulate bf16");
    auto out0b = test::to_bf16(test::random_floats(size_t(B * N * K), seed + 4, 4.0f));
    Dev D(DType::bf16, shape(N, K));
    auto l = ops::prepare_dense_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, true, opt("wgrad_acc_bf16"));
    EXPECT_EQ(l.plan()->accumulate, Accumulate::composed);
    D.upload(out0b);
    l.launch(nullptr);
    auto got = D.download<uint16_t>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], test::bf16_bits(bf16_float(out0b[i]) + bf16_float(dwb[i]))) << i;
  }
}

// The skinny projections (K 4096 -> N 32 .. 128) at odd T, wide N, batches of heads.
const Case kCases[] = {
    {"T1_N32_K4096", 0, 1, 32, 4096},       {"T4097_N48_K4096", 0, 4097, 48, 4096},
    {"T16173_N64_K512", 0, 16173, 64, 512}, {"T20000_N32_K1024", 0, 20000, 32, 1024},
    {"T1000_N512_K1024", 0, 1000, 512, 1024}, {"T333_N136_K520", 0, 333, 136, 520},
    {"B3_T300_N128_K256", 3, 300, 128, 256}, {"B2_T777_N136_K520", 2, 777, 136, 520},
    {"B1_T64_N8_K8", 1, 64, 8, 8},          {"T4097_N128_K512", 0, 4097, 128, 512},
    {"T4097_N32_K512", 0, 4097, 32, 512},    {"T4097_N200_K1024", 0, 4097, 200, 1024},
    {"T8600_N136_K256", 0, 8600, 136, 256},  // fwd past one wave of the narrow tiles: 128 x 256
};

INSTANTIATE_TEST_SUITE_P(Cases, DenseGemm, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_portable" : "_planned");
                         });

using DenseGemmGpu = test::RuntimeTest<>;

// FP32 wgrad over long sums (gemm_contract.h kChainRows), N 32, K 256. At T = 262144 the
// sm90 route's two 128 x 128 tiles run as four tail-split parts of 65536 rows, four segments
// each (the unrolled k loop); the 128 x 256 program (forced: one tile, the rolled k loop) the
// same; the portable program's two tiles run 16 segments each through their CTAs' chain
// tiles. A one-run sum misses the FP32 budget there (relative Frobenius error about 7.5e-5
// for the parts, 3e-4 for the portable, extrapolated from 1.5e-4 at 131072 rows in one run).
// T = 200003: parts of 781-782 k blocks, the last block partial. dw, and dw accumulated into
// f32 (fused and composed: out0 + dW, the same bits), each twice and on 3 SMs: the same bits.
TEST_F(DenseGemmGpu, LongWgradSumsWithinFp32Budget) {
  const int64_t N = 32, K = 256;
  const bool hopper = Driver::instance().device(0).arch == *Arch::parse("sm_90a");
  struct Route {
    const char* name;
    std::string wgrad, fused, composed;  // candidates ("": the planner's)
  };
  std::vector<Route> routes{{"planned", "", "", hopper ? "wgrad_acc_f32_composed_sm90_128x128" : ""},
                            {"portable", portable("wgrad_f32"), portable("wgrad_acc_f32"),
                             portable("wgrad_acc_f32_composed")}};
  if (hopper)
    routes.push_back({"sm90 128 x 256", "wgrad_f32_sm90_128x256", "wgrad_acc_f32_fused_sm90_128x256",
                      "wgrad_acc_f32_composed_sm90"});
  for (const int64_t T : {int64_t(262144), int64_t(200003)}) {
    auto xb = test::to_bf16(test::random_floats(size_t(T * K), uint64_t(21 + T)));
    auto gb = test::to_bf16(test::random_floats(size_t(T * N), uint64_t(22 + T)));
    const auto x = widen(xb), g = widen(gb);
    Dev X(DType::bf16, {T, K}), G(DType::bf16, {T, N});
    X.upload(xb), G.upload(gb);
    std::vector<double> dwref(size_t(N * K), 0.0);
    parallel_for(N, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j)
        for (int64_t r = 0; r < T; ++r) {
          const double gv = g[size_t(r * N + j)];
          for (int64_t kk = 0; kk < K; ++kk) dwref[size_t(j * K + kk)] += gv * x[size_t(r * K + kk)];
        }
    });
    auto out0 = test::random_floats(size_t(N * K), 23, 4.0f);
    for (const Route& route : routes) {
      SCOPED_TRACE(std::string(route.name) + ", T " + std::to_string(T));
      auto options = [&](const std::string& candidate, int max_sms) {
        ops::OpOptions o;
        o.candidate = candidate;
        o.max_sms = max_sms;
        return o;
      };
      Dev DW(DType::f32, {N, K});
      std::vector<uint32_t> bits;
      for (const int max_sms : {0, 0, 3}) {
        auto l = ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, false, options(route.wgrad, max_sms));
        if (hopper && route.wgrad.empty()) EXPECT_EQ(l.plan()->route, "wgrad_f32_sm90_128x128") << l.describe();
        DW.poison();
        l.launch(nullptr);
        auto b = DW.download<uint32_t>();
        if (bits.empty()) bits = b;
        else EXPECT_EQ(b, bits) << "bits differ (max_sms " << max_sms << ")";
      }
      std::vector<float> dw(bits.size());
      std::memcpy(dw.data(), bits.data(), bits.size() * 4);
      test::expect_f32_close(dw, dwref, "dw (f32)");
      double num = 0, den = 0;
      for (size_t i = 0; i < dw.size(); ++i) num += (dw[i] - dwref[i]) * (dw[i] - dwref[i]), den += dwref[i] * dwref[i];
      std::printf("%s, T %lld: dw relative Frobenius error %.3g (budget 5e-5)\n", route.name, (long long)T,
                  std::sqrt(num / den));
      for (const std::string& candidate : {route.fused, route.composed}) {
        for (const int max_sms : {0, 3}) {
          SCOPED_TRACE("accumulate, " + (candidate.empty() ? std::string("planned") : candidate) + ", max_sms " +
                       std::to_string(max_sms));
          Dev D(DType::f32, {N, K});
          auto acc = ops::prepare_dense_gemm_wgrad(*rt_, D.dl, G.dl, X.dl, true, options(candidate, max_sms));
          D.upload(out0);
          acc.launch(nullptr);
          EXPECT_EQ(test::accumulate_mismatches(D.download<float>(), out0, dw, "dw accumulated"), 0u) << acc.describe();
        }
      }
    }
  }
}

// Prepared launches replay in a captured graph with a direct launch's bits: fwd, the fused
// f32 accumulate and the composed bf16 one (two stages).
TEST_F(DenseGemmGpu, ReplaysInACapturedGraph) {
  const int64_t T = 1500, N = 64, K = 512;
  Dev X(DType::bf16, {T, K}), G(DType::bf16, {T, N}), W(DType::bf16, {N, K});
  X.upload(test::to_bf16(test::random_floats(size_t(T * K), 1)));
  G.upload(test::to_bf16(test::random_floats(size_t(T * N), 2)));
  W.upload(test::to_bf16(test::random_floats(size_t(N * K), 3)));
  auto out0 = test::random_floats(size_t(N * K), 4);
  auto out0b = test::to_bf16(out0);
  Dev Y(DType::bf16, {T, N}), DW(DType::f32, {N, K}), DWB(DType::bf16, {N, K});
  auto fwd = ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl);
  auto acc = ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true);
  auto accb = ops::prepare_dense_gemm_wgrad(*rt_, DWB.dl, G.dl, X.dl, true);
  Y.poison();
  DW.upload(out0), DWB.upload(out0b);
  fwd.launch(nullptr), acc.launch(nullptr), accb.launch(nullptr);
  auto y1 = Y.download<uint16_t>();
  auto dw1 = DW.download<uint32_t>();
  auto dwb1 = DWB.download<uint16_t>();
  test::CapturedGraph graph([&](CUstream s) { fwd.launch(s), acc.launch(s), accb.launch(s); });
  Y.poison();
  DW.upload(out0), DWB.upload(out0b);
  graph.replay();
  EXPECT_EQ(Y.download<uint16_t>(), y1);
  EXPECT_EQ(DW.download<uint32_t>(), dw1);
  EXPECT_EQ(DWB.download<uint16_t>(), dwb1);
}

// A weight stored [K, N] ([B, K, N]), given as its transposed view (as torch's w.t()), and a
// dw stored the same way: fwd (bf16 and f32 y), dgrad and wgrad (f32, and accumulating) against FP64, on the
// planner's route and with the portable programs forced. On Hopper, fwd's tiles of the dgrad
// kernel: 64 columns at N 40, and at N 72 and 200 while they make one wave (T 777), 128 at N 72
// past it (T 8577: 134 tiles of 64 columns).
TEST_F(DenseGemmGpu, WeightStoredKNMatchesFp64) {
  const int64_t K = 136;
  for (const auto& [batch, forced, N, T] : std::vector<std::tuple<int64_t, bool, int64_t, int64_t>>{
           {0, false, 40, 777}, {0, false, 72, 8577}, {0, true, 72, 777}, {2, false, 40, 777},
           {2, false, 72, 777}, {2, true, 72, 777}, {0, false, 200, 777}}) {
    {
      SCOPED_TRACE(std::string(batch ? "batched" : "plain") + (forced ? ", portable" : ", planned") + ", N " +
                   std::to_string(N) + ", T " + std::to_string(T));
      const bool one_wave = N > 64 && T < 8448;
      const std::string tile = N <= 64 ? "128x64" : one_wave ? "128x64_one_wave" : "128x128";
      const int64_t B = std::max<int64_t>(batch, 1);
      auto shape = [&](int64_t a, int64_t b) {
        return batch ? std::vector<int64_t>{batch, a, b} : std::vector<int64_t>{a, b};
      };
      auto xb = test::to_bf16(test::random_floats(size_t(B * T * K), 11));
      auto gb = test::to_bf16(test::random_floats(size_t(B * T * N), 12));
      auto wb = test::to_bf16(test::random_floats(size_t(B * K * N), 13, 0.5f));  // [B, K, N]
      const auto x = widen(xb), g = widen(gb), w = widen(wb);
      Dev X(DType::bf16, shape(T, K)), G(DType::bf16, shape(T, N)), WKN(DType::bf16, shape(K, N));
      X.upload(xb), G.upload(gb), WKN.upload(wb);
      // [N, K] views of the [K, N] storage: strides (1, N) (and K N per head).
      std::vector<int64_t> nk = shape(N, K), st = batch ? std::vector<int64_t>{K * N, 1, N} : std::vector<int64_t>{1, N};
      DLTensor wv = WKN.dl;
      wv.shape = nk.data(), wv.strides = st.data();
      std::vector<double> yref(size_t(B * T * N)), dxref(size_t(B * T * K)), dwref(size_t(B * K * N), 0.0);
      parallel_for(B * T, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const int64_t h = r / T;
          for (int64_t kk = 0; kk < K; ++kk)
            for (int64_t j = 0; j < N; ++j) {
              const double wv_ = w[size_t((h * K + kk) * N + j)];
              yref[size_t(r * N + j)] += x[size_t(r * K + kk)] * wv_;
              dxref[size_t(r * K + kk)] += g[size_t(r * N + j)] * wv_;
            }
        }
      });
      for (int64_t h = 0; h < B; ++h)
        for (int64_t r = h * T; r < (h + 1) * T; ++r)
          for (int64_t kk = 0; kk < K; ++kk)
            for (int64_t j = 0; j < N; ++j)
              dwref[size_t((h * K + kk) * N + j)] += g[size_t(r * N + j)] * x[size_t(r * K + kk)];
      auto opt = [&](const char* portable_route) {
        ops::OpOptions o;
        if (forced) o.candidate = portable_route;
        return o;
      };
      Dev Y(DType::bf16, shape(T, N)), DX(DType::bf16, shape(T, K)), DW(DType::f32, shape(K, N));
      Y.poison(), DX.poison(), DW.poison();
      const Launch fwd = ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, wv, opt("fwd_kn_portable_128x128"));
      if (!forced && Driver::instance().device(0).arch == *Arch::parse("sm_90a"))
        EXPECT_EQ(fwd.plan()->route, "fwd_kn_sm90_" + tile);
      fwd.launch(nullptr);
      // An f32 y: on Hopper the dgrad kernel's FP32 tiles (T 777: a masked last row block).
      Dev YF(DType::f32, shape(T, N));
      YF.poison();
      const Launch fwd_f32 = ops::prepare_dense_gemm_fwd(*rt_, YF.dl, X.dl, wv, opt("fwd_f32_kn_portable_128x128"));
      if (!forced && Driver::instance().device(0).arch == *Arch::parse("sm_90a"))
        EXPECT_EQ(fwd_f32.plan()->route, "fwd_f32_kn_sm90_" + tile);
      fwd_f32.launch(nullptr);
      test::expect_f32_close(YF.download<float>(), yref, "y (f32)");
      ops::prepare_dense_gemm_dgrad(*rt_, DX.dl, G.dl, wv, opt("dgrad_kn_portable_128x128")).launch(nullptr);
      DLTensor dwv = DW.dl;
      dwv.shape = nk.data(), dwv.strides = st.data();
      auto wg = ops::prepare_dense_gemm_wgrad(*rt_, dwv, G.dl, X.dl, false, opt("wgrad_f32_kn_portable_128x128"));
      wg.launch(nullptr);
      expect_bf16_close(Y.download<uint16_t>(), yref, yref.size(), "y");
      expect_bf16_close(DX.download<uint16_t>(), dxref, dxref.size(), "dx");
      const auto dw = DW.download<float>();
      test::expect_f32_close(dw, dwref, "dw [K, N]");
      auto acc = ops::prepare_dense_gemm_wgrad(*rt_, dwv, G.dl, X.dl, true, opt("wgrad_acc_f32_fused_kn_portable_128x128"));
      acc.launch(nullptr);
      const auto twice = DW.download<float>();
      for (size_t i = 0; i < dw.size(); ++i) ASSERT_EQ(f32_bits(twice[i]), f32_bits(dw[i] + dw[i])) << i;
    }
  }
}

// A token operand ([B, T, C]; b = 0: [T, C]) as a strided view into a storage of its own:
// row t of head h at h * head + t * ld elements, and a row's length of guard after the last
// element. Inputs have NaN between their rows and in the guard (a read shows), outputs poison
// (a write shows).
struct StridedRows {
  StridedRows(DType t, int64_t b, int64_t rows, int64_t c, int64_t ld_, int64_t head_)
      : heads(std::max<int64_t>(b, 1)), T(rows), C(c), ld(ld_), head(head_),
        store(t, {(heads - 1) * head + (T - 1) * ld + C + ld}),
        shape(b ? std::vector<int64_t>{b, T, C} : std::vector<int64_t>{T, C}),
        strides(b ? std::vector<int64_t>{head, ld, 1} : std::vector<int64_t>{ld, 1}) {
    dl = store.dl;
    dl.ndim = int32_t(shape.size()), dl.shape = shape.data(), dl.strides = strides.data();
  }
  size_t at(int64_t h, int64_t t, int64_t c) const { return size_t(h * head + t * ld + c); }
  template <typename V>
  void upload(const std::vector<V>& logical) {
    std::vector<V> s(size_t(store.n));
    std::memset(s.data(), 0xff, s.size() * sizeof(V));  // NaN in bf16 and f32
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) s[at(h, t, c)] = logical[size_t((h * T + t) * C + c)];
    store.upload(s);
  }
  // The logical [B, T, C] values; every element between the rows still 0xff bytes.
  template <typename V>
  std::vector<V> download(const char* what) const {
    const auto s = store.download<V>();
    std::vector<V> out(size_t(heads * T * C));
    std::vector<bool> mine(s.size(), false);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) out[size_t((h * T + t) * C + c)] = s[at(h, t, c)], mine[at(h, t, c)] = true;
    V poison;
    std::memset(&poison, 0xff, sizeof(V));
    for (size_t i = 0; i < s.size(); ++i)
      if (!mine[i]) EXPECT_EQ(std::memcmp(&s[i], &poison, sizeof(V)), 0) << what << ": wrote between rows at " << i;
    return out;
  }
  int64_t heads, T, C, ld, head;
  Dev store;
  std::vector<int64_t> shape, strides;
  DLTensor dl{};
};

// The token operands as strided views (heads of a [T, B, C] tensor, with gaps between heads
// too, padded rows, mixed with contiguous ones): every op computes the bits of the same call on contiguous tensors,
// reads nothing between the rows and writes nothing there; on the planner's route and with
// the portable programs forced. T 200 and 777 end inside a row block, so a head's last block is
// partial (on Hopper: 3-D boxes that stop at the head's end, or masked stores at the row stride).
TEST_F(DenseGemmGpu, StridedTokenOperandsSameBitsAsContiguous) {
  struct Shape {
    int64_t b, t, n, k;
  };
  // Heads of a [T, B, C] tensor, the same with 8 elements between heads, padded rows.
  enum Rows { kContiguous, kHeadsInterleaved, kHeadsApart, kPadded };
  auto layout = [](Rows r, int64_t b, int64_t t, int64_t c) -> std::pair<int64_t, int64_t> {  // ld, head
    const int64_t B = std::max<int64_t>(b, 1);
    if (r == kHeadsInterleaved) return {B * c, c};
    if (r == kHeadsApart) return {B * (c + 8), c + 8};
    if (r == kPadded) return {c + 8, t * (c + 8)};
    return {c, t * c};
  };
  const bool hopper = Driver::instance().device(0).arch == *Arch::parse("sm_90a");
  for (const Shape& sh : {Shape{3, 200, 40, 136}, Shape{2, 777, 264, 72}, Shape{0, 777, 40, 72}}) {
    const int64_t B = std::max<int64_t>(sh.b, 1), T = sh.t, N = sh.n, K = sh.k;
    auto dims = [&](int64_t a, int64_t c) { return sh.b ? std::vector<int64_t>{sh.b, a, c} : std::vector<int64_t>{a, c}; };
    const auto xb = test::to_bf16(test::random_floats(size_t(B * T * K), 21));
    const auto gb = test::to_bf16(test::random_floats(size_t(B * T * N), 22));
    const auto wb = test::to_bf16(test::random_floats(size_t(B * N * K), 23, 0.5f));
    const auto dw0 = test::random_floats(size_t(B * N * K), 24);
    Dev X(DType::bf16, dims(T, K)), G(DType::bf16, dims(T, N)), W(DType::bf16, dims(N, K));
    X.upload(xb), G.upload(gb), W.upload(wb);
    // FP64 y of the contiguous call, once per shape.
    const auto x = widen(xb), w = widen(wb);
    std::vector<double> yref(size_t(B * T * N));
    parallel_for(B * T, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t j = 0; j < N; ++j) {
          double a = 0;
          for (int64_t kk = 0; kk < K; ++kk) a += x[size_t(r * K + kk)] * w[size_t(((r / T) * N + j) * K + kk)];
          yref[size_t(r * N + j)] = a;
        }
    });
    for (const bool forced : {false, true}) {
      auto opt = [&](const char* what) {
        ops::OpOptions o;
        if (forced) o.candidate = portable(what);
        return o;
      };
      // The contiguous calls' bits.
      Dev Y(DType::bf16, dims(T, N)), YF(DType::f32, dims(T, N)), DX(DType::bf16, dims(T, K));
      Dev DW(DType::f32, dims(N, K)), DWB(DType::bf16, dims(N, K)), DWA(DType::f32, dims(N, K));
      Y.poison(), YF.poison(), DX.poison(), DW.poison(), DWB.poison();
      DWA.upload(dw0);
      ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, opt("fwd")).launch(nullptr);
      ops::prepare_dense_gemm_fwd(*rt_, YF.dl, X.dl, W.dl, opt("fwd_f32")).launch(nullptr);
      ops::prepare_dense_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, opt("dgrad")).launch(nullptr);
      ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, false, opt("wgrad_f32")).launch(nullptr);
      ops::prepare_dense_gemm_wgrad(*rt_, DWB.dl, G.dl, X.dl, false, opt("wgrad_bf16")).launch(nullptr);
      ops::prepare_dense_gemm_wgrad(*rt_, DWA.dl, G.dl, X.dl, true, opt("wgrad_acc_f32")).launch(nullptr);
      const auto y = Y.download<uint16_t>();
      expect_bf16_close(y, yref, yref.size(), "y (contiguous)");
      const auto yf = YF.download<uint32_t>(), dw = DW.download<uint32_t>(), dwa = DWA.download<uint32_t>();
      const auto dx = DX.download<uint16_t>(), dwbf = DWB.download<uint16_t>();
      const std::vector<std::pair<Rows, Rows>> variants =
          sh.b ? std::vector<std::pair<Rows, Rows>>{{kHeadsInterleaved, kHeadsInterleaved},
                                                    {kHeadsInterleaved, kContiguous},
                                                    {kContiguous, kPadded},
                                                    {kPadded, kHeadsApart},
                                                    {kHeadsApart, kHeadsInterleaved}}
               : std::vector<std::pair<Rows, Rows>>{{kPadded, kPadded}, {kContiguous, kPadded}};
      for (const auto& [in, out] : variants) {
        SCOPED_TRACE("B " + std::to_string(sh.b) + " T " + std::to_string(T) + " N " + std::to_string(N) + " K " +
                     std::to_string(K) + (forced ? ", portable" : ", planned") + ", inputs " + std::to_string(in) +
                     ", outputs " + std::to_string(out));
        auto rows = [&](Rows r, DType t, int64_t c) {
          const auto [ld, head] = layout(r, sh.b, T, c);
          return std::make_unique<StridedRows>(t, sh.b, T, c, ld, head);
        };
        auto xs = rows(in, DType::bf16, K), gs = rows(in, DType::bf16, N);
        xs->upload(xb), gs->upload(gb);
        auto ys = rows(out, DType::bf16, N), yfs = rows(out, DType::f32, N), dxs = rows(out, DType::bf16, K);
        ys->store.poison(), yfs->store.poison(), dxs->store.poison();
        DW.poison(), DWB.poison();
        DWA.upload(dw0);
        // Each call on the Hopper programs where planned (on the portable one where forced).
        auto run = [&](const char* what, const Launch& l) {
          if (forced) EXPECT_EQ(l.plan()->route, portable(what));
          else if (hopper) EXPECT_NE(l.plan()->route.find("sm90"), std::string::npos) << what << ": " << l.plan()->route;
          l.launch(nullptr);
        };
        run("fwd", ops::prepare_dense_gemm_fwd(*rt_, ys->dl, xs->dl, W.dl, opt("fwd")));
        run("fwd_f32", ops::prepare_dense_gemm_fwd(*rt_, yfs->dl, xs->dl, W.dl, opt("fwd_f32")));
        run("dgrad", ops::prepare_dense_gemm_dgrad(*rt_, dxs->dl, gs->dl, W.dl, opt("dgrad")));
        run("wgrad_f32", ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, gs->dl, xs->dl, false, opt("wgrad_f32")));
        run("wgrad_bf16", ops::prepare_dense_gemm_wgrad(*rt_, DWB.dl, gs->dl, xs->dl, false, opt("wgrad_bf16")));
        run("wgrad_acc_f32", ops::prepare_dense_gemm_wgrad(*rt_, DWA.dl, gs->dl, xs->dl, true, opt("wgrad_acc_f32")));
        EXPECT_EQ(ys->download<uint16_t>("y"), y);
        EXPECT_EQ(yfs->download<uint32_t>("y (f32)"), yf);
        EXPECT_EQ(dxs->download<uint16_t>("dx"), dx);
        EXPECT_EQ(DW.download<uint32_t>(), dw);
        EXPECT_EQ(DWB.download<uint16_t>(), dwbf);
        EXPECT_EQ(DWA.download<uint32_t>(), dwa);
      }
    }
  }
}

// T = 0: fwd and dgrad write nothing; wgrad writes zeros, or with accumulate leaves dw alone.
TEST_F(DenseGemmGpu, NoTokens) {
  const int64_t N = 32, K = 64;
  Dev X(DType::bf16, {0, K}), G(DType::bf16, {0, N}), W(DType::bf16, {N, K}), Y(DType::bf16, {0, N});
  Dev DW(DType::f32, {N, K});
  ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl).launch(nullptr);
  DW.poison();
  ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true).launch(nullptr);
  for (uint32_t v : DW.download<uint32_t>()) ASSERT_EQ(v, 0xffffffffu) << "accumulate over no tokens wrote";
  Launch fill = ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, false);
  fill.launch(nullptr);
  for (uint32_t v : DW.download<uint32_t>()) ASSERT_EQ(v, 0u) << "dw over no tokens is not zeros";
  // Rebound by address (dw, dy, x: prepare's order), the fill clears the new dw and not the old.
  Dev DW2(DType::f32, {N, K});
  DW.poison(), DW2.poison();
  const CUdeviceptr moved[] = {DW2.buf.get(), G.buf.get(), X.buf.get()};
  ops::rebind_data(fill, moved, 3);
  fill.launch(nullptr);
  for (uint32_t v : DW2.download<uint32_t>()) ASSERT_EQ(v, 0u) << "the rebound fill missed the new dw";
  for (uint32_t v : DW.download<uint32_t>()) ASSERT_EQ(v, 0xffffffffu) << "the rebound fill cleared the old dw";
}

// A call refused by its checks writes nothing.
TEST_F(DenseGemmGpu, RejectedBeforeAnythingIsWritten) {
  const int64_t T = 64, N = 32, K = 64;
  Dev X(DType::bf16, {T, K}), G(DType::bf16, {T, N + 8}), DW(DType::f32, {N, K});
  DW.poison();
  test::expect_argument_error([&] { ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, true); }, "dw",
                              "differs from [N, K] = [40, 64]");
  for (uint32_t v : DW.download<uint32_t>()) ASSERT_EQ(v, 0xffffffffu);
}

}  // namespace
}  // namespace cake
