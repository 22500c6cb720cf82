// The dense_gemm family's routes (no GPU): the Hopper program of each op, the portable
// programs on sm_80, fused vs composed accumulate, the one non-deterministic split,
// and the programs as the shared GEMM kernels with this family's tiles.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "fixtures.hpp"
#include "gemm_contract.h"
#include "op_family.hpp"
#include "planner.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

class DenseGemmRoutes : public ::testing::Test {
 protected:
  void SetUp() override { reg_ = Registry::load_default(); }
  PlanResult plan(const Problem& p, const Device& d) const { return Planner(reg_, test::all_jit(reg_)).plan(p, d); }
  // A problem as the ops build it: every tensor's dtype and alignment.
  static Problem problem(const std::string& op, int64_t n, const std::string& out_dtype = "bf16",
                         bool accumulate = false, int64_t t = 16173, int64_t k = 4096, int64_t b = 1) {
    Problem p;
    p.op = "dense_gemm." + op;
    p.dims = {{"t", t}, {"n", n}, {"k", k}, {"b", b}, {"kn", 0}};
    p.accumulate = accumulate;
    std::vector<std::string> names = op == "fwd"     ? std::vector<std::string>{"y", "x", "w"}
                                     : op == "dgrad" ? std::vector<std::string>{"dx", "dy", "w"}
                                                     : std::vector<std::string>{"dw", "dy", "x"};
    for (const auto& name : names) p.dtypes[name] = DType::bf16, p.align[name] = 256;
    p.dtypes[names[0]] = *parse_dtype(out_dtype);
    return p;
  }
  std::shared_ptr<const Registry> reg_;
  Device hopper_{*Arch::parse("sm_90a"), 132, 232448};
  Device ampere_{*Arch::parse("sm_80"), 108, 166912};
};

TEST_F(DenseGemmRoutes, EachOpOnHopperAndOnSm80) {
  // fwd's tile is as narrow as N allows: no columns past N computed where N <= 128.
  const std::map<int64_t, std::tuple<const char*, int, int>> fwd = {
      {8, {"fwd_sm90_128x64", 64, 8}},     {64, {"fwd_sm90_128x64", 64, 8}},
      {72, {"fwd_sm90_128x128", 128, 6}},  {128, {"fwd_sm90_128x128", 128, 6}},
      {136, {"fwd_sm90_128x256", 256, 4}}, {1024, {"fwd_sm90_128x256", 256, 4}}};
  for (const auto& [n, want] : fwd) {
    const auto& [route, bn, stages] = want;
    auto r = plan(problem("fwd", n), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, route) << n;
    const auto& params = r.plan->stages[0].program->params;
    EXPECT_EQ(params->at("tile_n"), bn) << n;
    EXPECT_EQ(params->at("smem"), gemm::sm90_smem_bytes(128, bn, stages)) << n;
    EXPECT_LE(params->at("smem").get<int>(), hopper_.max_smem_optin) << n;
  }
  for (std::string op : {"dgrad", "wgrad"}) {
    auto r = plan(problem(op, 64), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, op == "dgrad" ? "dgrad_sm90_128x256" : "wgrad_bf16_sm90_128x64");
    EXPECT_EQ(r.plan->stages[0].program->templ, "sm90_gemm.cuh");
    r = plan(problem(op, 64), ampere_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, op == "dgrad" ? "dgrad_portable_128x128" : "wgrad_bf16_portable_128x128");
    EXPECT_EQ(r.plan->stages[0].program->templ, "smxx_gemm.cuh");
    EXPECT_EQ(r.plan->stages[0].build->arch.str(), "sm_80");
  }
  // wgrad's tile: 64 columns for N <= 64 over T <= 16384, 128 for N <= 128 (more tiles of a
  // skinny dw), 256 above. The sm90 wgrad programs carry the tail split's counters and workspace,
  // and FP32 ones a chain tile per SM besides (gemm_contract.h kChainRows).
  for (const auto& [n, t, bn] : {std::tuple{8, 1, 64}, {32, 16384, 64}, {64, 1024, 64}, {64, 16385, 128},
                                 {72, 1024, 128}, {128, 16173, 128}, {136, 1024, 256}, {1024, 16173, 256}}) {
    auto r = plan(problem("wgrad", n, "f32", false, t), hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "wgrad_f32_sm90_128x" + std::to_string(bn)) << n << " " << t;
    EXPECT_EQ(r.plan->stages[0].program->params->at("counters"), gemm::kCounterInts);
    EXPECT_EQ(r.plan->stages[0].program->params->at("workspace_per_sm"), 2 * 128 * bn * 4);
    EXPECT_TRUE(r.plan->stages[0].program->params->value("chain", false));
    auto b = plan(problem("wgrad", n, "bf16", false, t), hopper_);
    ASSERT_TRUE(b.ok()) << b.error;
    EXPECT_EQ(b.plan->stages[0].program->params->at("workspace_per_sm"), 128 * bn * 4);
  }
}

// Above a narrow tile's N bound fwd still takes it while its tiles make one wave on the
// device's SMs (small T): the narrowest such tile, else the bound's or the widest. The same
// rule for an f32 y and a [K, N] weight; a batch multiplies the tiles.
TEST_F(DenseGemmRoutes, FwdTakesTheNarrowestTileThatMakesOneWave) {
  struct Row {
    int64_t n, t, b;
    int bn;
    bool one_wave;
  };
  const Row rows[] = {{512, 1024, 1, 64, true},     // 8 x 8 = 64 tiles of 128 x 64
                      {1024, 1024, 1, 64, true},    // 128
                      {1024, 1025, 1, 128, true},   // 9 x 16 = 144 of 64 columns: 9 x 8 of 128
                      {512, 4097, 1, 128, true},    // 33 x 4 = 132 of 128 columns
                      {512, 4225, 1, 256, false},   // 34 x 4 = 136
                      {1024, 4097, 1, 256, false},  // 264 of 128 columns
                      {128, 4097, 1, 64, true},     // 33 x 2 = 66
                      {128, 16173, 1, 128, false},  // 254 of 64 columns: N's bound, 128
                      {64, 131072, 1, 64, false},   // N's bound
                      {512, 1024, 2, 64, true},     // 2 x 64
                      {512, 1024, 3, 128, true}};   // 3 x 64 = 192 of 64 columns: 96 of 128
  for (const Row& row : rows) {
    for (int kn : {0, 1}) {
      SCOPED_TRACE("N " + std::to_string(row.n) + ", T " + std::to_string(row.t) + ", B " + std::to_string(row.b) +
                   ", kn " + std::to_string(kn));
      Problem p = problem("fwd", row.n, "bf16", false, row.t, 4096, row.b);
      p.dims["kn"] = kn;
      auto r = plan(p, hopper_);
      ASSERT_TRUE(r.ok()) << r.error;
      const std::string tag = kn ? "_kn" : "";
      EXPECT_EQ(r.plan->route, "fwd" + tag + "_sm90_128x" + std::to_string(row.bn) +
                                   (row.one_wave && row.bn != 256 && row.n > row.bn ? "_one_wave" : ""));
      // An f32 y: 64 columns by the same rule, else 128.
      p.dtypes["y"] = DType::f32;
      r = plan(p, hopper_);
      ASSERT_TRUE(r.ok()) << r.error;
      const int f32_bn = row.bn == 64 ? 64 : 128;
      EXPECT_EQ(r.plan->route, "fwd_f32" + tag + "_sm90_128x" + std::to_string(f32_bn) +
                                   (f32_bn == 64 && row.n > 64 ? "_one_wave" : ""));
    }
  }
  // Fewer SMs, fewer tiles to a wave: 64 tiles of 64 columns on 60 SMs are two.
  auto r = plan(problem("fwd", 512, "bf16", false, 1024), Device{*Arch::parse("sm_90a"), 60, 232448});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "fwd_sm90_128x128_one_wave");
}

TEST_F(DenseGemmRoutes, AccumulateFusedForF32ComposedForBf16) {
  auto r = plan(problem("wgrad", 64, "f32", true), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_f32_fused_sm90_128x64");
  EXPECT_EQ(r.plan->accumulate, Accumulate::fused);
  r = plan(problem("wgrad", 64, "bf16", true, 1000, 4096, 3), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_bf16_composed_sm90_128x64");
  EXPECT_EQ(r.plan->accumulate, Accumulate::composed);
  EXPECT_EQ(r.plan->scratch_bytes, 3 * 64 * 4096 * 2);  // [B, N, K] bf16
  r = plan(problem("wgrad", 256, "bf16", true), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_bf16_composed_sm90");
  r = plan(problem("wgrad", 64, "f32", true), ampere_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_f32_fused_portable_128x128");
  // The portable FP32 wgrad sums long groups through a chain tile per CTA (two per SM); the
  // BF16 one sums in one run.
  EXPECT_TRUE(r.plan->stages[0].program->params->value("chain", false));
  EXPECT_EQ(r.plan->stages[0].program->params->at("workspace_per_sm"), gemm::portable_workspace_per_sm(128, 128));
  r = plan(problem("wgrad", 64, "bf16", false), ampere_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.plan->stages[0].program->params->value("chain", false));
  EXPECT_FALSE(r.plan->stages[0].program->params->contains("workspace_per_sm"));
}

// An f32 y runs the sm90 kernel on Hopper (64 columns for N <= 64, else 128: FP32 tiles are
// held whole) and the portable one elsewhere; a [K, N] weight runs dgrad's kernel.
TEST_F(DenseGemmRoutes, F32OutputRunsTheSm90KernelOnHopperThePortableOneElsewhere) {
  for (int kn : {0, 1}) {
    const std::string tag = kn ? "_kn" : "", kernel = kn ? "dgrad" : "fwd";
    for (const auto& [n, bn, stages] : {std::tuple{32, 64, 8}, {64, 64, 8}, {72, 128, 6}, {1024, 128, 6}}) {
      SCOPED_TRACE("kn " + std::to_string(kn) + ", N " + std::to_string(n));
      Problem p = problem("fwd", n, "f32");
      p.dims["kn"] = kn;
      auto r = plan(p, hopper_);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.plan->route, "fwd_f32" + tag + "_sm90_128x" + std::to_string(bn));
      EXPECT_EQ(r.plan->stages[0].program->name, "dense_sm90_" + kernel + "_f32_128x" + std::to_string(bn) + "_s" +
                                                     std::to_string(stages) + "_r16_c1");
      EXPECT_NE(r.plan->stages[0].program->kernels[0].find(", float, false,"), std::string::npos);
      EXPECT_LE(r.plan->stages[0].program->params->at("smem").get<int>(), hopper_.max_smem_optin);
    }
    Problem p = problem("fwd", 256, "f32");
    p.dims["kn"] = kn;
    auto r = plan(p, ampere_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, "fwd_f32" + tag + "_portable_128x128");
    EXPECT_EQ(r.plan->stages[0].program->name, "dense_portable_" + kernel + "_f32_128x128x32_s4_w2x2");
  }
}

// A weight stored [K, N] (dw for wgrad) runs the other row op's kernel, or wgrad's with dy
// and x exchanged, through the same programs.
TEST_F(DenseGemmRoutes, KnWeightRunsTheSwappedKernel) {
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"fwd", {"fwd_kn_sm90_128x64", "dense_sm90_dgrad_128x64_s8_r16_c1"}},
      {"dgrad", {"dgrad_kn_sm90_128x256", "dense_sm90_fwd_128x256_s4_r16_c1"}},
      {"wgrad", {"wgrad_bf16_kn_sm90_128x64", "dense_sm90_wgrad_bf16_128x64_s8_r16_c1"}}};
  for (const auto& [op, route] : want) {
    Problem p = problem(op, 64);
    p.dims["kn"] = 1;
    auto r = plan(p, hopper_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->route, route.first);
    EXPECT_EQ(r.plan->stages[0].program->name, route.second);
    r = plan(p, ampere_);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->stages[0].program->templ, "smxx_gemm.cuh");
  }
  Problem p = problem("wgrad", 64, "f32", true);
  p.dims["kn"] = 1;
  auto r = plan(p, hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "wgrad_acc_f32_fused_kn_sm90_128x64");
  EXPECT_EQ(r.plan->stages[0].bind.at("a"), "x");
  EXPECT_EQ(r.plan->stages[0].bind.at("b"), "dy");
  // The notes count the kernel's tiles: dw [K, N] = [4096, 64] is 32 x 1 tiles of 128 x 64.
  std::string all;
  for (const auto& line : ops::plan_notes(p, *r.plan, hopper_)) all += line + "\n";
  EXPECT_NE(all.find("32 tiles of 128 x 64"), std::string::npos) << all;
}

// The only non-deterministic dense_gemm candidates are the reduce splits of the f32
// accumulate; a default call in their window gets the deterministic fused route, a call with
// deterministic = false gets the split, and outside its window (T of one part, a dw of many
// tiles, a batch, sm_80) the deterministic route again.
TEST_F(DenseGemmRoutes, NonDeterministicOnlyWhenAskedAndInItsWindow) {
  int seen = 0, nondet = 0;
  for (const auto& route : reg_->routes())
    if (route.op.rfind("dense_gemm.", 0) == 0)
      for (const auto& c : route.candidates) {
        const bool reduce = c.name.find("_reduce") != std::string::npos;
        EXPECT_EQ(c.deterministic, !reduce) << route.op << " " << c.name;
        ++seen, nondet += !c.deterministic;
      }
  EXPECT_GT(seen, 10);
  EXPECT_EQ(nondet, 2);  // [N, K] and [K, N] dw
  auto route_of = [&](Problem p, bool det, const Device& d) {
    p.deterministic = det;
    auto r = plan(p, d);
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.plan->deterministic, r.plan->route.find("_reduce") == std::string::npos) << r.plan->route;
    return r.plan->route;
  };
  Problem p = problem("wgrad", 256, "f32", true);
  EXPECT_EQ(route_of(p, true, hopper_), "wgrad_acc_f32_fused_sm90_128x256");
  EXPECT_EQ(route_of(p, false, hopper_), "wgrad_acc_f32_reduce_sm90_128x256");
  EXPECT_EQ(route_of(problem("wgrad", 136, "f32", true), false, hopper_), "wgrad_acc_f32_reduce_sm90_128x256");
  p.dims["kn"] = 1;
  EXPECT_EQ(route_of(p, true, hopper_), "wgrad_acc_f32_fused_kn_sm90_128x256");
  EXPECT_EQ(route_of(p, false, hopper_), "wgrad_acc_f32_reduce_kn_sm90_128x256");
  // Outside its window: N <= 128 (the 128-column tiles), T of one part, N over 256, a batch.
  EXPECT_EQ(route_of(problem("wgrad", 128, "f32", true), false, hopper_), "wgrad_acc_f32_fused_sm90_128x128");
  EXPECT_EQ(route_of(problem("wgrad", 256, "f32", true, 2047), false, hopper_), "wgrad_acc_f32_fused_sm90_128x256");
  EXPECT_EQ(route_of(problem("wgrad", 512, "f32", true), false, hopper_), "wgrad_acc_f32_fused_sm90_128x256");
  EXPECT_EQ(route_of(problem("wgrad", 256, "f32", true, 16173, 4096, 2), false, hopper_),
            "wgrad_acc_f32_fused_sm90_128x256");
  EXPECT_EQ(route_of(problem("wgrad", 256, "f32", false), false, hopper_), "wgrad_f32_sm90_128x256");
  EXPECT_EQ(route_of(p, false, ampere_), "wgrad_acc_f32_fused_kn_portable_128x128");
}

// The split's parts (gemm_contract.h reduce_parts): one wave of tiles, parts of at least
// kMinReducePartRows rows and at most kChainRows; `cakec plan` says so.
TEST_F(DenseGemmRoutes, ReduceSplitFillsOneWave) {
  EXPECT_EQ(gemm::reduce_parts(132, 16, 16173), 8);   // N 64, K 4096: 16 tiles
  EXPECT_EQ(gemm::reduce_parts(132, 16, 4097), 4);    // parts of at least 1024 rows
  EXPECT_EQ(gemm::reduce_parts(132, 64, 32768), 2);   // N 256, K 8192
  EXPECT_EQ(gemm::reduce_parts(132, 64, 131072), 8);  // parts of kChainRows at most
  EXPECT_EQ(gemm::reduce_parts(132, 64, 131073), 9);
  EXPECT_EQ(gemm::reduce_parts(132, 200, 16384), 1);
  EXPECT_EQ(gemm::reduce_parts(132, 200, 16385), 2);
  EXPECT_EQ(gemm::reduce_parts(132, 16, 1000), 1);
  EXPECT_EQ(gemm::reduce_parts(132, 16, 0), 1);
  for (int rows : {1, 4097, 16384, 16385, 131072, 1000001, 2000000000})
    EXPECT_LE(gemm::uniform_group_rows(rows, gemm::reduce_parts(132, 64, rows)), gemm::kChainRows) << rows;
  EXPECT_EQ(gemm::reduce_parts(132, 32, 16173), 4);   // N 256, K 4096: 32 tiles
  EXPECT_EQ(gemm::uniform_group_rows(16173, 4), 4044);
  Problem p = problem("wgrad", 256, "f32", true);
  p.deterministic = false;
  auto r = plan(p, hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  std::string all;
  for (const auto& line : ops::plan_notes(p, *r.plan, hopper_)) all += line + "\n";
  EXPECT_NE(all.find("16173 rows in 4 parts of up to 4044, 32 tiles"), std::string::npos) << all;
  EXPECT_NE(all.find("not bitwise repeatable"), std::string::npos) << all;
}

// What `cakec plan` prints under a dense plan on Hopper: the tiles and how the kernel will
// split the last wave, computed by the contract's rule the kernel runs (gemm_contract.h).
TEST_F(DenseGemmRoutes, PlanNotesSayTheTailSplitAndWhy) {
  auto notes = [&](const std::string& op, int64_t t, int64_t n, int64_t b = 1) {
    Problem p = problem(op, n, op == "wgrad" ? "f32" : "bf16", op == "wgrad", t, 4096, b);
    auto r = plan(p, hopper_);
    EXPECT_TRUE(r.ok()) << r.error;
    std::string all;
    for (const auto& line : ops::plan_notes(p, *r.plan, hopper_)) all += line + "\n";
    return all;
  };
  // N 256: 2 x 16 tiles of 128 x 256, parts of at least 4096 rows.
  std::string s = notes("wgrad", 16173, 256);
  EXPECT_NE(s.find("32 tiles of 128 x 256 on 132 SMs (0.24 waves), each over 16173 rows"), std::string::npos) << s;
  EXPECT_NE(s.find("the last 32 tiles run as 3 parts each"), std::string::npos) << s;  // 16173 / 4096 rows
  EXPECT_EQ(gemm::even_wgrad_split(132, 32, 16173, gemm::min_split_part_rows(128, 256)).parts, 3);
  s = notes("wgrad", 4097, 256);
  EXPECT_NE(s.find("tail split: none (no split into parts of at least 4096 rows shortens the tail)"), std::string::npos)
      << s;
  // N 128: 32 tiles of 128 x 128, whose half-size sums pass on in parts of 2048 rows or more.
  EXPECT_EQ(gemm::min_split_part_rows(128, 128), 2048);
  s = notes("wgrad", 16173, 128);
  EXPECT_NE(s.find("32 tiles of 128 x 128 on 132 SMs (0.24 waves), each over 16173 rows"), std::string::npos) << s;
  EXPECT_NE(s.find("the last 32 tiles run as 4 parts each"), std::string::npos) << s;  // kMaxSplitParts
  s = notes("wgrad", 4097, 128);
  EXPECT_NE(s.find("the last 32 tiles run as 2 parts each"), std::string::npos) << s;
  s = notes("wgrad", 4000, 128);
  EXPECT_NE(s.find("tail split: none (no split into parts of at least 2048 rows shortens the tail)"), std::string::npos)
      << s;
  // N 64 over T <= 16384: 64 tiles of 128 x 64, parts of at least 1024 rows; past 16384 rows
  // the 128-column tile again.
  EXPECT_EQ(gemm::min_split_part_rows(128, 64), 1024);
  s = notes("wgrad", 16173, 64);
  EXPECT_NE(s.find("64 tiles of 128 x 64 on 132 SMs (0.48 waves), each over 16173 rows"), std::string::npos) << s;
  EXPECT_NE(s.find("the last 64 tiles run as 2 parts each"), std::string::npos) << s;
  s = notes("wgrad", 2000, 64);
  EXPECT_NE(s.find("tail split: none (no split into parts of at least 1024 rows shortens the tail)"), std::string::npos)
      << s;
  s = notes("wgrad", 16385, 64);
  EXPECT_NE(s.find("32 tiles of 128 x 128 on 132 SMs"), std::string::npos) << s;
  s = notes("wgrad", 8192, 64, 300);
  EXPECT_NE(s.find("tail split: none (over 256 groups)"), std::string::npos) << s;
  s = notes("fwd", 1024, 32);
  EXPECT_NE(s.find("8 tiles of 128 x 64"), std::string::npos) << s;
  EXPECT_NE(s.find("the last 8 tiles run as 4 parts each over equal shares of the reduction, the last adding the "
                   "others' sums in part order"),
            std::string::npos)
      << s;
  s = notes("fwd", 131072, 1024);
  EXPECT_NE(s.find("tail split: none (8 waves or more: the tail is a small share)"), std::string::npos) << s;
  s = notes("dgrad", 33 * 128, 64);  // 33 row blocks x 16 column blocks = 4 waves of 132
  EXPECT_NE(s.find("tail split: none (the tiles fill whole waves)"), std::string::npos) << s;
  // The portable programs split nothing; a BF16 dw sums in one run: no notes.
  Problem p = problem("wgrad", 64, "bf16", false);
  auto r = plan(p, ampere_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(ops::plan_notes(p, *r.plan, ampere_).empty());
}

// fwd and dgrad parts but the last each hold an FP32 tile of workspace, and a launch has one a
// device SM: every split row_op_split plans fits. 70 tiles on 132 SMs would take 3 parts (two
// waves of thirds) and 140 tiles: they do not split (2 parts would not shorten the tail).
TEST_F(DenseGemmRoutes, RowOpSplitFitsTheWorkspace) {
  for (int ctas = 1; ctas <= gemm::kMaxSplitSlots; ctas += ctas < 200 ? 1 : 37)
    for (int total = 1; total < gemm::kRowOpSplitWaves * ctas; total += total < 300 ? 1 : 53)
      for (int k_blocks : {16, 32, 48, 64, 128}) {
        const gemm::TailSplit s = gemm::row_op_split(ctas, total, k_blocks);
        ASSERT_LE(s.tiles * (s.parts - 1), ctas) << ctas << " " << total << " " << k_blocks;
        ASSERT_LE(s.parts, std::min(gemm::kMaxSplitParts, std::max(1, k_blocks / gemm::kRowOpSplitBlocks)));
      }
  EXPECT_EQ(gemm::split_last(132, 70, 4).parts, 3);
  EXPECT_EQ(gemm::row_op_split(132, 70, 64).parts, 1);
  EXPECT_EQ(gemm::row_op_split(132, 132 + 30, 64).parts, 4);
  EXPECT_EQ(gemm::row_op_split(132, 132 + 30, 64).tiles, 30);
}

// An FP32 dw says how its sums run (gemm_contract.h kChainRows): one run up to 16384 rows,
// else segments through the chain tile; BF16 dw, fwd and the non-deterministic split's parts
// (at most 16384 rows) say nothing of it.
TEST_F(DenseGemmRoutes, PlanNotesSayHowFp32SumsRun) {
  auto notes = [&](const std::string& op, const std::string& out, int64_t t, const Device& d, bool nd = false) {
    Problem p = problem(op, 256, out, op == "wgrad" && out == "f32", t);
    p.deterministic = !nd;
    auto r = plan(p, d);
    EXPECT_TRUE(r.ok()) << r.error;
    std::string all;
    if (r.ok())
      for (const auto& line : ops::plan_notes(p, *r.plan, d)) all += line + "\n";
    return all;
  };
  std::string s = notes("wgrad", "f32", 16173, hopper_);
  EXPECT_NE(s.find("FP32 sums: one run (16173 rows, at most 16384 a run)"), std::string::npos) << s;
  s = notes("wgrad", "f32", 131072, hopper_);
  EXPECT_NE(s.find("FP32 sums: 131072 rows in segments of 16384 (8 a whole tile"), std::string::npos) << s;
  s = notes("wgrad", "f32", 40000, ampere_);
  EXPECT_NE(s.find("FP32 sums: 40000 rows in segments of 16384 (3 a whole tile"), std::string::npos) << s;
  for (const std::string& other : {notes("wgrad", "bf16", 131072, hopper_), notes("fwd", "bf16", 131072, hopper_),
                                   notes("wgrad", "f32", 4097, hopper_, true)})
    EXPECT_EQ(other.find("FP32 sums"), std::string::npos) << other;
  EXPECT_NE(notes("wgrad", "f32", 4097, hopper_, true).find("split over T"), std::string::npos);
}

}  // namespace
}  // namespace cake
