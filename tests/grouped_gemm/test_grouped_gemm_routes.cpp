// The grouped_gemm family's registry entries and plans (no GPU): which candidate each op,
// out dtype and accumulate mode gets on Hopper and on sm_80, fused vs composed and the reasons,
// the shared-memory gate, candidate forcing (API and `cakec plan --candidate`), and the
// argument struct the sm90 programs take (three 64-byte aligned TMA descriptors).
#include <gtest/gtest.h>

#include "gemm_contract.h"

#include <cstddef>

#include "fixtures.hpp"
#include "launch.hpp"
#include "planner.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

constexpr int kH200Smem = 232448;  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN

class GroupedGemmRoutes : public ::testing::Test {
 protected:
  void SetUp() override { reg_ = Registry::load_default(); }
  PlanResult plan(const Problem& p, const Device& d) const {
    return Planner(reg_, test::all_jit(reg_)).plan(p, d);
  }
  // A problem as the ops build it: every tensor's dtype and alignment.
  static Problem problem(const std::string& op, const std::string& out_dtype = "bf16", bool accumulate = false,
                         int64_t m = 4096, int64_t n = 512, int64_t k = 256, int64_t e = 8) {
    Problem p;
    p.op = "grouped_gemm." + op;
    p.dims = {{"m", m}, {"n", n}, {"k", k}, {"e", e}};
    p.accumulate = accumulate;
    std::vector<std::string> names = op == "fwd"     ? std::vector<std::string>{"y", "x", "w"}
                                     : op == "dgrad" ? std::vector<std::string>{"dx", "g", "w"}
                                                     : std::vector<std::string>{"dw", "g", "x"};
    for (const auto& n_ : names) p.dtypes[n_] = DType::bf16, p.align[n_] = 256;
    p.dtypes[names[0]] = *parse_dtype(out_dtype);
    p.dtypes["offs"] = DType::i32, p.align["offs"] = 256;
    return p;
  }
  std::shared_ptr<const Registry> reg_;
  Device hopper_{*Arch::parse("sm_90a"), 132, kH200Smem};
  Device ampere_{*Arch::parse("sm_80"), 108, 166912};
};

TEST_F(GroupedGemmRoutes, HopperProgramFirstPortableOnSm80) {
  for (std::string op : {"fwd", "dgrad"}) {
    auto r = plan(problem(op), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, op + "_sm90_128x256");
    EXPECT_EQ(r.plan->passed_over.size(), 0u);
    ASSERT_EQ(r.plan->stages.size(), 1u);
    EXPECT_EQ(r.plan->stages[0].program->params->at("kind"), "sm90");
    EXPECT_EQ(r.plan->stages[0].program->params->at("smem"), 4 * (128 + 256) * 128 + 4 * 8192 + 2048);
    r = plan(problem(op), ampere_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, op + "_portable_128x128");
    ASSERT_EQ(r.plan->passed_over.size(), 1u);
    EXPECT_EQ(r.plan->passed_over[0].reason, "arch");
    EXPECT_EQ(r.plan->stages[0].build->arch.str(), "sm_80");
    EXPECT_EQ(r.plan->stages[0].program->params->at("smem"), 4 * (128 + 128) * 32 * 2);
  }
}

TEST_F(GroupedGemmRoutes, WgradKernelPerOutDtype) {
  auto bf = plan(problem("wgrad", "bf16"), hopper_);
  auto f32 = plan(problem("wgrad", "f32"), hopper_);
  ASSERT_TRUE(bf.ok() && f32.ok());
  EXPECT_EQ(bf.plan->route, "wgrad_bf16_sm90_128x256");
  EXPECT_EQ(f32.plan->route, "wgrad_f32_sm90_128x256");
  // A program per out dtype, one kernel each: a first call compiles only the kernel it runs.
  EXPECT_EQ(bf.plan->stages[0].program->name, "gg_sm90_wgrad_bf16_128x256_s4_r16_c1");
  EXPECT_EQ(f32.plan->stages[0].program->name, "gg_sm90_wgrad_f32_128x256_s4_r16_c1");
  for (const auto* r : {&bf, &f32}) {
    EXPECT_EQ(r->plan->stages[0].program->kernels.size(), 1u);
    EXPECT_EQ(r->plan->stages[0].kernel, 0);
  }
  EXPECT_NE(f32.plan->stages[0].program->kernels[0].find("<2, float, false, 128, 256, 4, 16, 1>"), std::string::npos);
  EXPECT_NE(bf.plan->stages[0].program->kernels[0].find("<2, cake::bf16, false,"), std::string::npos);
  auto p = problem("wgrad", "f16");
  EXPECT_FALSE(plan(p, hopper_).ok());  // no f16 out anywhere
}

TEST_F(GroupedGemmRoutes, F32AccumulateIsFusedOnBothArchs) {
  auto r = plan(problem("wgrad", "f32", true), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_f32_fused_sm90_128x256");
  EXPECT_EQ(r.plan->accumulate, Accumulate::fused);
  EXPECT_EQ(r.plan->scratch_bytes, 0);
  EXPECT_NE(r.plan->stages[0].program->kernels[size_t(r.plan->stages[0].kernel)].find("<2, float, true,"),
            std::string::npos);
  r = plan(problem("wgrad", "f32", true), ampere_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_f32_fused_portable_128x128");
  EXPECT_EQ(r.plan->accumulate, Accumulate::fused);
}

TEST_F(GroupedGemmRoutes, Bf16AccumulateIsComposedAndSaysWhy) {
  const int64_t e = 8, n = 512, k = 256;
  auto r = plan(problem("wgrad", "bf16", true, 4096, n, k, e), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_bf16_composed_sm90");
  EXPECT_EQ(r.plan->accumulate, Accumulate::composed);
  EXPECT_EQ(r.plan->scratch_bytes, e * n * k * 2);
  ASSERT_EQ(r.plan->stages.size(), 2u);
  EXPECT_EQ(r.plan->stages[0].bind.at("out"), "scratch");
  EXPECT_NE(r.plan->stages[0].program->kernels[size_t(r.plan->stages[0].kernel)].find("<2, cake::bf16, false,"),
            std::string::npos);
  EXPECT_EQ(r.plan->stages[1].program->name, "ew_add_bf16_v8");
  EXPECT_EQ(r.plan->stages[1].bind.at("b"), "scratch");
  EXPECT_EQ(r.plan->stages[1].bind.at("a"), "dw");
  EXPECT_NE(r.plan->why.find("composed because the fused candidates were passed over"), std::string::npos) << r.plan->why;
  EXPECT_NE(r.plan->why.find("dw is bf16, needs f32"), std::string::npos) << r.plan->why;
  EXPECT_NE(r.plan->why.find("would round once from f32"), std::string::npos) << r.plan->why;
  r = plan(problem("wgrad", "bf16", true), ampere_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_bf16_composed_portable");
}

TEST_F(GroupedGemmRoutes, F32ComposedWhenNoFusedCandidateCanServe) {
  // The fused kernels live in the same programs as the overwriting ones, so with the default
  // registry composed f32 is reached when a fused candidate's window fails (a user registry's
  // program, say) or by forcing: it plans with f32 scratch and the f32 add.
  Problem p = problem("wgrad", "f32", true, 100, 64, 72, 4);
  p.candidate = "wgrad_acc_f32_composed_sm90";
  auto r = plan(p, hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->accumulate, Accumulate::composed);
  EXPECT_EQ(r.plan->scratch_bytes, 4 * 64 * 72 * 4);
  EXPECT_EQ(r.plan->stages[1].program->name, "ew_add_f32_v4");
  EXPECT_NE(r.plan->why.find("forced by the caller"), std::string::npos) << r.plan->why;
  p.candidate = "wgrad_acc_f32_composed_portable";
  r = plan(p, ampere_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->stages[0].build->arch.str(), "sm_80");
}

TEST_F(GroupedGemmRoutes, SharedMemoryGate) {
  Device small = hopper_;
  small.max_smem_optin = 100 * 1024;  // a part (or a MIG slice) with less opt-in smem
  auto r = plan(problem("fwd"), small);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "fwd_portable_128x128");
  ASSERT_EQ(r.plan->passed_over.size(), 1u);
  EXPECT_EQ(r.plan->passed_over[0].reason, "smem");
  EXPECT_NE(r.plan->passed_over[0].detail.find("needs 231424 bytes"), std::string::npos);
  EXPECT_NE(r.plan->passed_over[0].detail.find("allows 102400"), std::string::npos);
  small.max_smem_optin = 32 * 1024;  // neither fits: no route, each says why
  r = plan(problem("fwd"), small);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.rejections.size(), 2u);
  EXPECT_EQ(r.rejections[1].reason, "smem");
  small.max_smem_optin = 0;  // unknown: not checked
  EXPECT_EQ(plan(problem("fwd"), small).plan->route, "fwd_sm90_128x256");
}

TEST_F(GroupedGemmRoutes, CandidateForcing) {
  Problem p = problem("fwd");
  p.candidate = "fwd_portable_128x128";
  auto r = plan(p, hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "fwd_portable_128x128");
  EXPECT_EQ(r.plan->stages[0].build->arch.str(), "sm_90a");
  EXPECT_TRUE(r.plan->passed_over.empty());  // the others were not considered
  EXPECT_EQ(r.plan->why, "the candidate the caller asked for");
  // Ineligible: the error says the candidate cannot serve, and why.
  p.candidate = "fwd_sm90_128x256";
  r = plan(p, ampere_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("the candidate asked for cannot serve it"), std::string::npos) << r.error;
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_EQ(r.rejections[0].candidate, "fwd_sm90_128x256");
  EXPECT_EQ(r.rejections[0].reason, "arch");
  Problem w = problem("wgrad", "f32", true);
  w.candidate = "wgrad_f32_sm90_128x256";
  r = plan(w, hopper_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejections[0].reason, "accumulate");
  // Unknown: the error lists the op's candidates.
  p.candidate = "nope";
  r = plan(p, hopper_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("has no candidate 'nope'"), std::string::npos) << r.error;
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_EQ(r.rejections[0].reason, "candidate");
  EXPECT_NE(r.rejections[0].detail.find("fwd_sm90_128x256, fwd_portable_128x128"), std::string::npos);
  // The candidate is part of the plan cache's key.
  Planner cached(reg_, test::all_jit(reg_));
  Problem a = problem("fwd"), b = problem("fwd");
  b.candidate = "fwd_portable_128x128";
  EXPECT_EQ(cached.plan_cached(a, hopper_).plan->route, "fwd_sm90_128x256");
  EXPECT_EQ(cached.plan_cached(b, hopper_).plan->route, "fwd_portable_128x128");
  EXPECT_NE(a.hash(), b.hash());
}

TEST_F(GroupedGemmRoutes, EveryCandidateNeedsAlignedOperandsAndRowsOfEight) {
  for (const auto& route : reg_->routes()) {
    if (route.op.rfind("grouped_gemm.", 0) != 0) continue;
    for (const auto& c : route.candidates) {
      EXPECT_EQ(c.window.divisible.at("n"), 8) << c.name;
      EXPECT_EQ(c.window.divisible.at("k"), 8) << c.name;
      EXPECT_EQ(c.window.dtypes.at("offs"), DType::i32) << c.name;
      EXPECT_EQ(c.window.align.size(), 3u) << c.name;
      EXPECT_TRUE(c.deterministic) << c.name;
      for (const auto& st : c.stages) {
        const Program* p = reg_->program(st.program);
        if (p->family != "grouped_gemm") continue;
        for (const char* key : {"kind", "threads", "smem", "tile_m", "tile_n", "stages", "kernels"})
          EXPECT_TRUE(p->params->contains(key)) << p->name << " lacks params." << key;
        EXPECT_EQ(p->params->at("kernels").size(), p->kernels.size()) << p->name;
      }
    }
  }
}

TEST_F(GroupedGemmRoutes, CliPlanCandidateAndSmem) {
  const std::string cakec = CAKEC_PATH;
  const std::string base = cakec + " plan --op grouped_gemm.wgrad --arch sm_90a --sms 132 --dim m=4096"
                                   " --dim n=512 --dim k=256 --dim e=8 --dtype dw=f32 --dtype g=bf16"
                                   " --dtype x=bf16 --dtype offs=i32 --accumulate";
  auto r = test::run(base);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chosen:  wgrad_acc_f32_fused_sm90_128x256  (accumulate fused"), std::string::npos) << r.out;
  r = test::run(base + " --candidate wgrad_acc_f32_composed_portable");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chosen:  wgrad_acc_f32_composed_portable  (accumulate composed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 2: ew_add_f32_v4"), std::string::npos) << r.out;
  r = test::run(base + " --max-smem 65536");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("passed over wgrad_acc_f32_fused_sm90_128x256: smem"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  wgrad_acc_f32_fused_portable_128x128"), std::string::npos) << r.out;
  r = test::run(base + " --candidate missing");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("has no candidate 'missing'"), std::string::npos) << r.out;
  r = test::run(base + " --max-smem -5");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--max-smem: must be >= 0"), std::string::npos) << r.out;
}

// The sm90 kernel takes one Sm90Args (gemm_contract.h) holding three 64-byte aligned
// TMA descriptors: ArgPack must keep it whole at a 64-byte aligned address. (Nvrtc.
// EveryBuildCompiles checks the compiled kernels' parameter lists against the same struct.)
TEST(ArgPackLayout, KeepsTheArgumentStructAligned) {
  gemm::Sm90Args k{};
  k.a.words[0] = 0x1111, k.b.words[15] = 0x2222, k.out_map.words[7] = 0x3333;
  k.n = 4096;
  k.split_ctas = 132;
  ArgPack pack;
  pack.add(k);
  EXPECT_EQ(pack.offsets(), std::vector<size_t>{0});
  EXPECT_EQ(pack.size(), sizeof(gemm::Sm90Args));
  auto ptrs = pack.pointers();
  ASSERT_EQ(ptrs.size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptrs[0]) % 64, 0u);
  const auto* got = static_cast<const gemm::Sm90Args*>(ptrs[0]);
  EXPECT_EQ(got->a.words[0], 0x1111u);
  EXPECT_EQ(got->b.words[15], 0x2222u);
  EXPECT_EQ(got->out_map.words[7], 0x3333u);
  EXPECT_EQ(got->n, 4096);
  EXPECT_EQ(got->split_ctas, 132);
  // Arguments after others go to their own alignment, as in a struct.
  ArgPack p2;
  p2.add(1);
  p2.add(static_cast<void*>(nullptr));
  p2.add(k.a);
  EXPECT_EQ(p2.offsets(), (std::vector<size_t>{0, 8, 64}));
}

}  // namespace
}  // namespace cake
