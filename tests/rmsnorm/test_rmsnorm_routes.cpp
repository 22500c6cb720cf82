// The rmsnorm family's registry entries and plans (no GPU): the contract's geometry rule
// reproduces the thread counts measured for the sizes that had their own programs, every H
// of the parametric domain gets its own instance whose row stays in registers, H outside it
// the generic program (reason "instance"), and instances are served from aot/ like any program.
#include <gtest/gtest.h>

#include <algorithm>

#include "rmsnorm_contract.h"

#include "fixtures.hpp"
#include "planner.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

constexpr int kH200Smem = 232448;

Problem fwd_problem(int64_t t, int64_t h, bool residual = false, DType w = DType::bf16) {
  Problem p;
  p.op = "rmsnorm.fwd";
  p.dims = {{"t", t}, {"h", h}, {"residual", residual ? 1 : 0}};
  for (const char* n : {"x", "y", "residual", "h_out"}) p.dtypes[n] = DType::bf16, p.align[n] = 256;
  if (!residual) p.dtypes.erase("residual"), p.dtypes.erase("h_out"), p.align.erase("residual"), p.align.erase("h_out");
  p.dtypes["w"] = w, p.align["w"] = 256;
  p.dtypes["rstd"] = DType::f32, p.align["rstd"] = 256;
  return p;
}

Problem bwd_problem(int64_t t, int64_t h, DType w = DType::bf16) {
  Problem p;
  p.op = "rmsnorm.bwd";
  p.dims = {{"t", t}, {"h", h}};
  for (const char* n : {"dx", "dy", "x"}) p.dtypes[n] = DType::bf16, p.align[n] = 256;
  p.dtypes["w"] = w, p.dtypes["dw"] = w, p.align["w"] = 256, p.align["dw"] = 256;
  p.dtypes["rstd"] = DType::f32, p.align["rstd"] = 256;
  return p;
}

// The measured choices (docs/decisions.md) for the sizes that had their own programs.
TEST(RmsnormRoutes, GeometryRuleReproducesTheMeasuredChoices) {
  for (int h : {256, 512, 5120, 6144, 8192}) EXPECT_EQ(rms::fwd_threads(h), 256) << h;
  for (int h : {1024, 1536, 2048}) EXPECT_EQ(rms::fwd_threads(h), 64) << h;
  EXPECT_EQ(rms::fwd_threads(4096), 128);
  EXPECT_EQ(rms::fwd_threads(16384), 512);
  EXPECT_EQ(rms::fwd_threads(0), 1024);
  for (int h : {256, 512, 1024, 1536, 2048}) EXPECT_EQ(rms::bwd_threads(h), 256) << h;
  for (int h : {0, 4096, 5120, 6144, 8192}) EXPECT_EQ(rms::bwd_threads(h), 512) << h;
  for (int h : {8200, 12288, 16384}) EXPECT_EQ(rms::bwd_threads(h), 1024) << h;
  for (int h : {12288, 16376}) EXPECT_EQ(rms::bwd_vec(h), 4) << h;
  EXPECT_EQ(rms::bwd_vec(16384), 8);
  for (int h : {5120, 6144}) EXPECT_EQ(rms::bwd_vec(h), 4) << h;
  for (int h : {0, 256, 512, 1024, 1536, 2048, 4096, 8192}) EXPECT_EQ(rms::bwd_vec(h), 8) << h;
}

// A row of the instance's H stays in registers: the kernels' Layout (smxx_rmsnorm.cuh) holds
// up to 32 bf16 a lane in the forward (16 at 1024 threads) and 16 in the backward;
// beyond that it would stream the row twice, a path only the generic program takes.
TEST(RmsnormRoutes, EveryInstanceKeepsItsRowInRegisters) {
  auto fits = [](int h, int vec, int threads, int fit_elems) {
    const int tpr = rms::threads_per_row(h, vec, threads);
    const int need = (h / vec + tpr - 1) / tpr;
    return need <= std::max(1, fit_elems / vec) && (threads / tpr == 1 || need == 1);
  };
  for (int h = rms::kSpecialisedMinH; h <= rms::kFwdSpecialisedMaxH; h += 8) {
    const int t = rms::fwd_threads(h);
    ASSERT_TRUE(t >= 64 && t <= 1024 && (t & (t - 1)) == 0) << h;
    ASSERT_TRUE(fits(h, rms::fwd_vec(h), t, t >= 1024 ? 16 : 32)) << "fwd h=" << h;
  }
  for (int h = rms::kSpecialisedMinH; h <= rms::kBwdSpecialisedMaxH; h += 8) {
    const int t = rms::bwd_threads(h);
    ASSERT_TRUE(fits(h, rms::bwd_vec(h), t, 16)) << "bwd h=" << h;
  }
}

class RmsnormPlans : public ::testing::Test {
 protected:
  void SetUp() override { reg_ = Registry::load_default(); }
  PlanResult plan(const Problem& p, const Device& d) const { return Planner(reg_, test::all_jit(reg_)).plan(p, d); }
  std::shared_ptr<const Registry> reg_;
};

TEST_F(RmsnormPlans, EveryHGetsItsOwnInstance) {
  for (const Device& d : {Device{*Arch::parse("sm_90a"), 132, kH200Smem}, Device{*Arch::parse("sm_80"), 108, 166912},
                          Device{*Arch::parse("sm_86"), 84, 101376}}) {
    for (int64_t h = 256; h <= 16384; h += h < 2048 ? 8 : 56) {
      auto r = plan(fwd_problem(4096, h), d);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.plan->route, "fwd_wbf16") << h;
      const Program* p = r.plan->stages[0].program;
      EXPECT_EQ(p->name, "rms_fwd.h" + std::to_string(h));
      EXPECT_EQ(p->params->at("h"), h);
      EXPECT_EQ(p->kernels[0], "cake::rms::fwd<cake::bf16, " + std::to_string(h) + ", cake::rms::fwd_vec(" +
                                   std::to_string(h) + "), cake::rms::fwd_threads(" + std::to_string(h) + "), false>");
      if (h > rms::kBwdSpecialisedMaxH) continue;
      r = plan(bwd_problem(65536, h), d);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.plan->route, "bwd_wbf16_chunk64") << h;
      EXPECT_EQ(r.plan->stages[0].program->name, "rms_bwd.h" + std::to_string(h));
      EXPECT_EQ(r.plan->stages[1].program->name, "rms_dw_finalize");
    }
  }
}

TEST_F(RmsnormPlans, OutsideTheDomainTheGenericProgramServes) {
  const Device h200{*Arch::parse("sm_90a"), 132, kH200Smem};
  for (int64_t h : {8, 128, 248, 16392, 32768, 65536}) {
    auto r = plan(fwd_problem(100, h, true, DType::f32), h200);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "fwd_hany_wf32_residual") << h;
    const auto it = std::find_if(r.plan->passed_over.begin(), r.plan->passed_over.end(),
                                 [](const Rejection& x) { return x.candidate == "fwd_wf32_residual"; });
    ASSERT_NE(it, r.plan->passed_over.end()) << h;
    EXPECT_EQ(it->reason, "instance") << h;
    EXPECT_NE(it->detail.find("outside program rms_fwd's instances"), std::string::npos) << it->detail;
  }
  for (int64_t h : {128, 248, 16392, 32768}) {
    auto r = plan(bwd_problem(200000, h, DType::f32), h200);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "bwd_hany_wf32_chunk64_compensated") << h;
    EXPECT_EQ(r.plan->stages[0].program->name, "rms_bwd_hany");
  }
  auto r = plan(fwd_problem(100, 4100), h200);  // not a multiple of 8: no route (the op rejects it first)
  EXPECT_FALSE(r.ok());
}

// T picks the chunking and the compensated dw; H does not change the candidate.
TEST_F(RmsnormPlans, TPicksTheBackwardChunking) {
  const Device h200{*Arch::parse("sm_90a"), 132, kH200Smem};
  const std::pair<int64_t, std::string> want[] = {{1, "bwd_wbf16_chunk32"},        {16384, "bwd_wbf16_chunk32"},
                                                  {16385, "bwd_wbf16_chunk64"},    {131071, "bwd_wbf16_chunk64"},
                                                  {131072, "bwd_wbf16_chunk64_compensated"}};
  for (const auto& [t, route] : want) {
    auto r = plan(bwd_problem(t, 7168), h200);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, route) << t;
    EXPECT_EQ(r.plan->scratch_bytes, ((t + (route.find("chunk32") != std::string::npos ? 31 : 63)) /
                                      (route.find("chunk32") != std::string::npos ? 32 : 64)) * 7168 * 4) << t;
  }
}

// An instance is served from aot/ like any program, with JIT off: the prebuilt ones are;
// another H falls to the generic program when that is prebuilt.
TEST_F(RmsnormPlans, PrebuiltInstancesServeWithJitOff) {
  const Arch hopper = *Arch::parse("sm_90a");
  const Program* inst = reg_->instance(*reg_->program("rms_fwd"), {{"h", 7168}});
  ASSERT_NE(inst, nullptr);
  bool prebuilt = false;
  for (const Build* b : reg_->concrete_builds()) prebuilt = prebuilt || b->program == "rms_fwd.h7168";
  EXPECT_TRUE(prebuilt) << "cakec build prebuilds H 7168";
  test::TempDir dir;
  AotManifest m(dir.path() / "aot");
  for (const std::string name : {"rms_fwd.h7168", "rms_fwd_hany"}) {
    const Build* b = reg_->build(name, hopper);
    ASSERT_NE(b, nullptr) << name;
    dir.write("aot/sm_90a/" + name + ".cubin", "cubin");
    AotEntry e;
    e.program = name;
    e.arch = "sm_90a";
    e.source_hash = b->source_hash;
    e.toolkit = "13.0";
    e.file = "sm_90a/" + name + ".cubin";
    e.sha256 = std::string(64, '0');
    e.size = 5;
    m.put(e);
  }
  m.write();
  const AotManifest aot = AotManifest::read(dir.path() / "aot");
  AvailabilityRule rule(*reg_, &aot, NvrtcInfo{}, /*jit_enabled=*/false);
  Planner planner(reg_, [&](const Program& p, const Arch& a) { return rule.check(p, a); });
  const Device h200{hopper, 132, kH200Smem};
  auto r = planner.plan(fwd_problem(65536, 7168), h200);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->stages[0].program->name, "rms_fwd.h7168");
  EXPECT_EQ(r.plan->stages[0].served_by, ServedBy::aot);
  r = planner.plan(fwd_problem(65536, 3584), h200);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->stages[0].program->name, "rms_fwd_hany");
  EXPECT_EQ(r.plan->passed_over.front().reason, "unavailable:jit_disabled");
}

}  // namespace
}  // namespace cake
