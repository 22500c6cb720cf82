// Label gpu: every router_gemm route, forced by name, against FP64 with TARGETS.md's budgets
// (FP32; a bf16 dx the bf16 one) on ten fresh seeds per row, with full-precision FP32 data.
// Outputs are poisoned before each run. A route that cannot serve a row (its window, or no
// build for the device) is skipped there, but on Hopper every route must have run on some
// row, and on other parts every portable one (test::RouteSweep).
#include <gtest/gtest.h>

#include "gpu_util.hpp"
#include "route_sweep.hpp"
#include "router_gemm_ops.hpp"

namespace cake {
namespace {
using test::Dev;
using test::parallel_for;
using test::widen;

struct Row {
  int64_t t, e, h;
};
const Row kRows[] = {{4097, 64, 512}, {1000, 136, 264}};
constexpr int kSeeds = 10;

using RouterGemmSeeds = test::RuntimeTest<>;

TEST_F(RouterGemmSeeds, EveryRouteMeetsFp64OnTenSeeds) {
  test::RouteSweep sweep(*rt_, "router_gemm");
  for (const Row& r : kRows) {
    const int64_t T = r.t, E = r.e, H = r.h;
    SCOPED_TRACE("T " + std::to_string(T) + " E " + std::to_string(E) + " H " + std::to_string(H));
    for (int seed = 0; seed < kSeeds; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      const uint64_t s = uint64_t(seed) * 7919 + uint64_t(T * 31 + E * 7 + H);
      auto xb = test::to_bf16(test::random_floats(size_t(T * H), s));
      auto wf = test::random_floats(size_t(E * H), s + 1, 0.02f);
      auto wb = test::to_bf16(wf);
      // dlogits of order 1 (not a softmax's 1e-3): dx is then of order 0.1-1, where the bf16
      // budget's absolute 1e-2 does not pass a wrong dx.
      auto gf = test::random_floats(size_t(T * E), s + 2, 1.0f);
      auto dw0 = test::random_floats(size_t(E * H), s + 3, 0.1f);
      const auto x = widen(xb), wbd = widen(wb);
      const std::vector<double> wfd(wf.begin(), wf.end()), g(gf.begin(), gf.end());
      Dev X(DType::bf16, {T, H}), WF(DType::f32, {E, H}), WB(DType::bf16, {E, H}), G(DType::f32, {T, E});
      X.upload(xb), WF.upload(wf), WB.upload(wb), G.upload(gf);
      // FP64 references for both weights (index 0: bf16, 1: f32): logits, dx; dw and dw0 + dw.
      std::vector<double> lref[2], dxref[2], dwref(size_t(E * H), 0.0), accref(size_t(E * H));
      for (int i = 0; i < 2; ++i) lref[i].assign(size_t(T * E), 0.0), dxref[i].assign(size_t(T * H), 0.0);
      parallel_for(T, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t)
          for (int i = 0; i < 2; ++i)
            for (int64_t e = 0; e < E; ++e) {
              const double* wr = &(i ? wfd : wbd)[size_t(e * H)];
              double acc = 0;
              for (int64_t k = 0; k < H; ++k) acc += x[size_t(t * H + k)] * wr[k];
              lref[i][size_t(t * E + e)] = acc;
              for (int64_t k = 0; k < H; ++k) dxref[i][size_t(t * H + k)] += g[size_t(t * E + e)] * wr[k];
            }
      });
      parallel_for(E, [&](int64_t lo, int64_t hi) {
        for (int64_t e = lo; e < hi; ++e)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < H; ++k) dwref[size_t(e * H + k)] += g[size_t(t * E + e)] * x[size_t(t * H + k)];
      });
      for (size_t i = 0; i < accref.size(); ++i) accref[i] = double(dw0[i]) + dwref[i];

      for (int i = 0; i < 2; ++i) {
        const Dev& W = i ? WF : WB;
        sweep.each("fwd", [&](const Candidate& c, const ops::OpOptions& o) {
          Dev L(DType::f32, {T, E});
          auto l = sweep.served("fwd", c, [&] { return ops::prepare_router_gemm_fwd(*rt_, L.dl, X.dl, W.dl, o); });
          if (!l) return;
          L.poison();
          l->launch(nullptr);
          test::expect_f32_close(L.download<float>(), lref[i], i ? "logits (f32 w)" : "logits (bf16 w)");
        });
        sweep.each("dgrad", [&](const Candidate& c, const ops::OpOptions& o) {
          for (DType dt : {DType::bf16, DType::f32}) {
            Dev DX(dt, {T, H});
            auto l = sweep.served("dgrad", c, [&] { return ops::prepare_router_gemm_dgrad(*rt_, DX.dl, G.dl, W.dl, o); });
            if (!l) continue;
            DX.poison();
            l->launch(nullptr);
            if (dt == DType::f32) test::expect_f32_close(DX.download<float>(), dxref[i], "dx (f32)");
            else test::expect_bf16_close(DX.download<uint16_t>(), dxref[i], dxref[i].size(), "dx (bf16)");
          }
        });
      }
      sweep.each("wgrad", [&](const Candidate& c, const ops::OpOptions& o) {
        for (bool acc : {false, true}) {
          Dev DW(DType::f32, {E, H});
          auto l = sweep.served("wgrad", c, [&] { return ops::prepare_router_gemm_wgrad(*rt_, DW.dl, G.dl, X.dl, acc, o); });
          if (!l) continue;
          if (acc) DW.upload(dw0);
          else DW.poison();
          l->launch(nullptr);
          test::expect_f32_close(DW.download<float>(), acc ? accref : dwref, acc ? "dw0 + dw" : "dw");
        }
      });
    }
  }
  sweep.expect_all_ran({"fwd", "dgrad", "wgrad"});
}

}  // namespace
}  // namespace cake
