// The router_gemm family's routes (no GPU): which parts each op runs for each weight dtype,
// the scratch each lays out (the split parts and the products, checked against the layout the
// family's binder uses), accumulate only when asked, every candidate deterministic.
#include <gtest/gtest.h>

#include <algorithm>

#include "fixtures.hpp"
#include "gemm_contract.h"
#include "planner.hpp"
#include "router_gemm_contract.h"
#include "test_util.hpp"

namespace cake {
namespace {

class RouterGemmRoutes : public ::testing::Test {
 protected:
  void SetUp() override { reg_ = Registry::load_default(); }
  PlanResult plan(const Problem& p, const Device& d) const { return Planner(reg_, test::all_jit(reg_)).plan(p, d); }
  // A problem as the ops build it; `w` is w's dtype (fwd, dgrad), `out` the output's.
  static Problem problem(const std::string& op, const std::string& w, const std::string& out = "f32",
                         bool accumulate = false, int64_t t = 16384, int64_t e = 256, int64_t h = 7168) {
    Problem p;
    p.op = "router_gemm." + op;
    p.dims = {{"t", t}, {"e", e}, {"h", h}};
    p.accumulate = accumulate;
    if (op == "fwd") p.dtypes = {{"logits", DType::f32}, {"x", DType::bf16}, {"w", *parse_dtype(w)}};
    if (op == "dgrad") p.dtypes = {{"dx", *parse_dtype(out)}, {"dlogits", DType::f32}, {"w", *parse_dtype(w)}};
    if (op == "wgrad") p.dtypes = {{"dw", DType::f32}, {"dlogits", DType::f32}, {"x", DType::bf16}};
    for (const auto& [name, dt] : p.dtypes) p.align[name] = 256;
    return p;
  }
  static std::vector<std::string> programs(const Plan& p) {
    std::vector<std::string> v;
    for (const auto& s : p.stages) v.push_back(s.program->name);
    return v;
  }
  std::shared_ptr<const Registry> reg_;
  Device hopper_{*Arch::parse("sm_90a"), 132, 232448};
  Device ampere_{*Arch::parse("sm_80"), 108, 166912};
};

constexpr int64_t kT = 16384, kE = 256, kH = 7168;
int64_t aligned(int64_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// fwd: one GEMM for a bf16 w; an f32 w's three parts are, on Hopper, the B parts of one GEMM
// (x read once), elsewhere three GEMMs into logits.
TEST_F(RouterGemmRoutes, ForwardIsOneGemmForABf16WeightAndThreeForAnF32One) {
  for (const Device& d : {hopper_, ampere_}) {
    const bool hopper = d.arch == hopper_.arch;
    auto r = plan(problem("fwd", "bf16"), d);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, hopper ? "fwd_bf16w_sm90_128x128" : "fwd_bf16w_portable_128x128");
    EXPECT_EQ(r.plan->scratch_bytes, 0);
    r = plan(problem("fwd", "f32"), d);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, hopper ? "fwd_bf16x3_fused_sm90_128x128" : "fwd_bf16x3_portable_128x128");
    EXPECT_EQ(programs(*r.plan),
              hopper ? (std::vector<std::string>{"router_parts_v8", "router_sm90_fwd_f32_128x128_x3_s3_r16_c1"})
                     : (std::vector<std::string>{"router_parts_v8", "router_portable_fwd_f32_128x128x32_s4_w2x2",
                                                 "router_portable_fwd_f32_acc_128x128x32_s4_w2x2",
                                                 "router_portable_fwd_f32_acc_128x128x32_s4_w2x2"}));
    EXPECT_EQ(r.plan->stages[0].kernel, 0);  // split<float>
    EXPECT_EQ(r.plan->stages[1].bind.at("b"), hopper ? "scratch.0" : "w_hi");
    // w's three parts, [3, E, H] bf16.
    EXPECT_EQ(r.plan->scratch_bytes, 3 * kE * kH * 2);
    EXPECT_EQ(r.plan->scratch_offsets, std::vector<int64_t>{0});
  }
}

// Hopper's fwd tile by E: one 64-column tile up to E = 64, 128 columns past it; the fused
// program's stage holds three B tiles, and its shared memory fits the device.
TEST_F(RouterGemmRoutes, ForwardTileFollowsE) {
  for (const auto& [e, bn] : {std::pair{8, 64}, {64, 64}, {72, 128}, {256, 128}}) {
    SCOPED_TRACE("E " + std::to_string(e));
    auto r = plan(problem("fwd", "f32", "f32", false, 4097, e, 4096), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "fwd_bf16x3_fused_sm90_128x" + std::to_string(bn));
    const auto& params = *r.plan->stages[1].program->params;
    EXPECT_EQ(params.at("b_parts"), 3);
    EXPECT_EQ(params.at("tile_n"), bn);
    EXPECT_EQ(params.at("smem"), gemm::sm90_smem_bytes(128, bn, bn == 64 ? 4 : 3, 3));
    EXPECT_LE(params.at("smem").get<int>(), hopper_.max_smem_optin);
    EXPECT_NE(r.plan->stages[1].program->kernels[0].find(", false, false, 3>"), std::string::npos);
    r = plan(problem("fwd", "bf16", "f32", false, 4097, e, 4096), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "fwd_bf16w_sm90_128x" + std::to_string(bn));
    EXPECT_FALSE(r.plan->stages[0].program->params->contains("b_parts"));
  }
  // The three-GEMM sm90 route (the fused one's fallback) runs the f32 program, then the
  // accumulating one twice.
  const Route* fwd = reg_->route("router_gemm.fwd");
  ASSERT_NE(fwd, nullptr);
  const auto three = std::find_if(fwd->candidates.begin(), fwd->candidates.end(),
                                  [](const Candidate& c) { return c.name == "fwd_bf16x3_sm90_128x128"; });
  ASSERT_NE(three, fwd->candidates.end());
  ASSERT_EQ(three->stages.size(), 4u);
  EXPECT_EQ(three->stages[1].program, "router_sm90_fwd_f32_128x128_s6_r16_c1");
  EXPECT_EQ(three->stages[2].program, "router_sm90_fwd_f32_acc_128x128_s6_r16_c1");
  EXPECT_EQ(three->stages[3].bind.at("b"), "w_lo");
}

TEST_F(RouterGemmRoutes, DgradLaysThePartsAlongE) {
  // bf16 w: dlogits' [T, 3 E] and w' [3 E, H]; f32 w: six products, [T, 6 E] and [6 E, H].
  for (const auto& [w, parts] : {std::pair{"bf16", 3}, std::pair{"f32", 6}}) {
    for (const std::string out : {"bf16", "f32"}) {
      SCOPED_TRACE(std::string(w) + " w, " + out + " dx");
      auto r = plan(problem("dgrad", w, out), hopper_);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.plan->route, "dgrad_" + out + "_" + w + "w_" + (out == "bf16" ? "sm90_128x256" : "sm90_128x128"));
      ASSERT_EQ(r.plan->stages.size(), 3u);
      EXPECT_EQ(r.plan->stages[0].kernel, 0);
      EXPECT_EQ(r.plan->stages[1].kernel, std::string(w) == "f32" ? 0 : 1);
      const int64_t a = kT * parts * kE * 2;
      EXPECT_EQ(r.plan->scratch_offsets, (std::vector<int64_t>{0, aligned(a)}));
      EXPECT_EQ(r.plan->scratch_bytes, aligned(a) + parts * kE * kH * 2);
      EXPECT_EQ(r.plan->stages[2].bind.at("a"), "scratch.0");
      EXPECT_EQ(r.plan->stages[2].bind.at("b"), "scratch.1");
      r = plan(problem("dgrad", w, out), ampere_);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.plan->stages[2].program->templ, "smxx_gemm.cuh");
    }
  }
}

// wgrad sums chunks of at most kWgradChunk rows apart (groups of the GEMM), then adds them.
TEST_F(RouterGemmRoutes, WgradSumsThePartsAndAccumulatesOnlyWhenAsked) {
  EXPECT_EQ(router::kWgradChunk, 4096);
  for (const bool acc : {false, true}) {
    auto r = plan(problem("wgrad", "bf16", "f32", acc), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, acc ? "wgrad_acc_sm90_128x256" : "wgrad_sm90_128x256");
    EXPECT_EQ(r.plan->accumulate, acc ? Accumulate::fused : Accumulate::off);
    ASSERT_EQ(r.plan->stages.size(), 3u);
    EXPECT_EQ(r.plan->stages[2].kernel, acc ? 3 : 2);  // sum, sum accumulating
    // dlogits' [T, 3 E] bf16, the products [chunks, 3 E, H] f32 (T = 4 chunks of 4096 rows),
    // the chunks' ends (int32; E words).
    const int64_t a = aligned(kT * 3 * kE * 2), b = aligned(4 * 3 * kE * kH * 4);
    EXPECT_EQ(r.plan->scratch_offsets, (std::vector<int64_t>{0, a, a + b}));
    EXPECT_EQ(r.plan->scratch_bytes, a + b + 4 * kE * 4);
    EXPECT_EQ(r.plan->stages[0].bind.at("offs"), "scratch.2");
    EXPECT_EQ(r.plan->stages[1].bind.at("offs"), "scratch.2");
    // Its GEMM's groups are one run each (gemm_contract.h kChainRows): no chain tile.
    const auto& gemm_params = *r.plan->stages[1].program->params;
    EXPECT_FALSE(gemm_params.value("chain", false)) << r.plan->stages[1].program->name;
    EXPECT_EQ(gemm_params.at("workspace_per_sm"), 128 * 256 * 4);
    r = plan(problem("wgrad", "bf16", "f32", acc), ampere_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, acc ? "wgrad_acc_portable_128x128" : "wgrad_portable_128x128");
    EXPECT_FALSE(r.plan->stages[1].program->params->value("chain", false)) << r.plan->stages[1].program->name;
    EXPECT_FALSE(r.plan->stages[1].program->params->contains("workspace_per_sm"));
  }
}

// E and H multiples of 8 (the GEMMs' rows, the split's vectors); the windows say so too.
TEST_F(RouterGemmRoutes, WindowsAskForMultiplesOfEight) {
  auto r = plan(problem("fwd", "f32", "f32", false, 100, 60, 4096), hopper_);
  EXPECT_FALSE(r.ok());
  r = plan(problem("dgrad", "bf16", "bf16", false, 100, 64, 4100), hopper_);
  EXPECT_FALSE(r.ok());
}

// No router candidate is non-deterministic, so a default call is never given one.
TEST_F(RouterGemmRoutes, EveryCandidateIsDeterministic) {
  int seen = 0;
  for (const auto& route : reg_->routes())
    if (route.op.rfind("router_gemm.", 0) == 0)
      for (const auto& c : route.candidates) {
        EXPECT_TRUE(c.deterministic) << route.op << " " << c.name;
        ++seen;
      }
  EXPECT_EQ(seen, 8 + 8 + 4);
}

}  // namespace
}  // namespace cake
