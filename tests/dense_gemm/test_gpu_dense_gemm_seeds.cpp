// Label gpu: every dense_gemm route for a [N, K] weight, deterministic or not, forced by name,
// against FP64 with TARGETS.md's budgets on ten fresh seeds per row. Outputs are poisoned
// before each run. A route that cannot serve a row (its window, or no build for the device)
// is skipped there, but on Hopper every route must have run on some row, and on other parts
// every portable one (test::RouteSweep).
#include <gtest/gtest.h>

#include "dense_gemm_ops.hpp"
#include "gpu_util.hpp"
#include "route_sweep.hpp"

namespace cake {
namespace {
using test::Dev;
using test::parallel_for;
using test::widen;

struct Row {
  int64_t t, n, k;
};
// Narrow and wide fwd tiles (N 72: a partial 128-column tile), masked row blocks, T past two
// reduce parts, K not a tile multiple, few tiles (fwd's tail split over K at T 2048).
const Row kRows[] = {{4097, 64, 1024}, {2048, 136, 520}, {3000, 128, 264}, {2048, 72, 2048}};
constexpr int kSeeds = 10;

// FP64 references of one seed: y = x w^T, dx = dy w, dw = dy^T x.
struct Refs {
  std::vector<double> y, dx, dw;
};
Refs fp64(const Row& r, const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& w) {
  const int64_t T = r.t, N = r.n, K = r.k;
  Refs f{std::vector<double>(size_t(T * N)), std::vector<double>(size_t(T * K)), std::vector<double>(size_t(N * K))};
  parallel_for(T, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < K; ++kk) s += x[size_t(t * K + kk)] * w[size_t(j * K + kk)];
        f.y[size_t(t * N + j)] = s;
        for (int64_t kk = 0; kk < K; ++kk) f.dx[size_t(t * K + kk)] += g[size_t(t * N + j)] * w[size_t(j * K + kk)];
      }
  });
  parallel_for(N, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t kk = 0; kk < K; ++kk) f.dw[size_t(j * K + kk)] += g[size_t(t * N + j)] * x[size_t(t * K + kk)];
  });
  return f;
}

// Accumulating into bf16 rounds dW to bf16 before the add, by definition (as torch's bf16
// `grad += mm` does): where out0 and dW nearly cancel, that rounding is not small against the
// sum, so the bf16 budget holds against the operands' size, |out0| + |dW|, not the sum's.
void expect_bf16_sum_close(const std::vector<uint16_t>& got, const std::vector<uint16_t>& out0,
                           const std::vector<double>& dw) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = test::bf16_float(out0[i]), g = test::bf16_float(got[i]);
    if (!(std::fabs(g - (a + dw[i])) <= 1e-2 + 1e-2 * (std::fabs(a) + std::fabs(dw[i]))) && bad++ < 3)
      ADD_FAILURE() << "dw0 + dw (bf16)[" << i << "] = " << g << ", out0 " << a << ", dW " << dw[i];
  }
  EXPECT_EQ(bad, 0) << "dw0 + dw (bf16): elements outside the budget";
}

using DenseGemmSeeds = test::RuntimeTest<>;

TEST_F(DenseGemmSeeds, EveryRouteMeetsFp64OnTenSeeds) {
  // The [N, K] weight's candidates. The [K, N] ones run the other row op's kernels (fwd's
  // narrow tiles: dgrad's programs): WeightStoredKNMatchesFp64 and the stand-in test run them.
  test::RouteSweep sweep(*rt_, "dense_gemm", [](const Candidate& c) { return c.name.find("_kn") == std::string::npos; });
  for (const Row& r : kRows) {
    const int64_t T = r.t, N = r.n, K = r.k;
    SCOPED_TRACE("T " + std::to_string(T) + " N " + std::to_string(N) + " K " + std::to_string(K));
    for (int seed = 0; seed < kSeeds; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      const uint64_t s = uint64_t(seed) * 7919 + uint64_t(T * 31 + N * 7 + K);
      auto xb = test::to_bf16(test::random_floats(size_t(T * K), s));
      auto gb = test::to_bf16(test::random_floats(size_t(T * N), s + 1));
      auto wb = test::to_bf16(test::random_floats(size_t(N * K), s + 2, 0.5f));
      auto out0 = test::random_floats(size_t(N * K), s + 3, 4.0f);
      auto out0b = test::to_bf16(test::random_floats(size_t(N * K), s + 4, 4.0f));
      const Refs f = fp64(r, widen(xb), widen(gb), widen(wb));
      Dev X(DType::bf16, {T, K}), G(DType::bf16, {T, N}), W(DType::bf16, {N, K});
      X.upload(xb), G.upload(gb), W.upload(wb);
      std::vector<double> acc_ref(out0.size());
      for (size_t i = 0; i < out0.size(); ++i) acc_ref[i] = double(out0[i]) + f.dw[i];

      sweep.each("fwd", [&](const Candidate& c, const ops::OpOptions& o) {
        for (DType yt : {DType::bf16, DType::f32}) {
          Dev Y(yt, {T, N});
          auto l = sweep.served("fwd", c, [&] { return ops::prepare_dense_gemm_fwd(*rt_, Y.dl, X.dl, W.dl, o); });
          if (!l) continue;
          Y.poison();
          l->launch(nullptr);
          if (yt == DType::bf16) test::expect_bf16_close(Y.download<uint16_t>(), f.y, f.y.size(), "y");
          else test::expect_f32_close(Y.download<float>(), f.y, "y (f32)");
        }
      });
      sweep.each("dgrad", [&](const Candidate& c, const ops::OpOptions& o) {
        Dev DX(DType::bf16, {T, K});
        auto l = sweep.served("dgrad", c, [&] { return ops::prepare_dense_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, o); });
        if (!l) return;
        DX.poison();
        l->launch(nullptr);
        test::expect_bf16_close(DX.download<uint16_t>(), f.dx, f.dx.size(), "dx");
      });
      sweep.each("wgrad", [&](const Candidate& c, const ops::OpOptions& o) {
        for (DType dt : {DType::bf16, DType::f32})
          for (bool acc : {false, true}) {
            Dev DW(dt, {N, K});
            auto l = sweep.served("wgrad", c, [&] { return ops::prepare_dense_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, acc, o); });
            if (!l) continue;
            if (!acc) DW.poison();
            else if (dt == DType::f32) DW.upload(out0);
            else DW.upload(out0b);
            l->launch(nullptr);
            if (dt == DType::f32) test::expect_f32_close(DW.download<float>(), acc ? acc_ref : f.dw, "dw (f32)");
            else if (!acc) test::expect_bf16_close(DW.download<uint16_t>(), f.dw, f.dw.size(), "dw (bf16)");
            else expect_bf16_sum_close(DW.download<uint16_t>(), out0b, f.dw);
          }
      });
    }
  }
  sweep.expect_all_ran({"fwd", "dgrad", "wgrad"});
}

}  // namespace
}  // namespace cake
