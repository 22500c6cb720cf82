// The planner: windows, precedence, determinism, accumulate (fused vs composed) and the
// reasons it gives. Availability is injected: no NVRTC, no GPU.
#include <gtest/gtest.h>

#include <set>

#include "fixtures.hpp"
#include "planner.hpp"

namespace cake {
namespace {
using nlohmann::json;

json planner_registry() {
  auto program = [](const std::string& name, json archs) {
    return json{{"name", name},
                {"template", "smxx_elementwise.cuh"},
                {"kernels", {"cake::ew::add<float, float, float, 1>"}},
                {"archs", archs}};
  };
  json programs = {program("nondet", {"sm_90a"}), program("fast", {"sm_90a"}),
                   program("odd", {"sm_90a"}),    program("portable", {"sm_80"}),
                   program("fused", {"sm_90a"}),  program("main", {"sm_80", "sm_90a"}),
                   program("add", {"sm_80", "sm_90a"})};
  json builds = json::array();
  for (const auto& p : programs)
    for (const auto& a : p["archs"])
      builds.push_back({{"program", p["name"]}, {"arch", a}, {"min_cuda", "12.0"},
                        {"options", json::array()}, {"source_hash", test::kHash}});
  json candidates = {
      {{"name", "split_nondet"}, {"stages", {{{"program", "nondet"}}}}, {"deterministic", false},
       {"window", {{"archs", {"sm_90a"}}, {"dims", {{"k", {4096, nullptr}}}}}}},
      {{"name", "big_tile"}, {"stages", {{{"program", "fast"}}}},
       {"window", {{"archs", {"sm_90a"}}, {"sm_count", {100, 200}}, {"dims", {{"m", {1024, nullptr}}}},
                   {"divisible", {{"n", 128}}}}}},
      {{"name", "odd_k"}, {"stages", {{{"program", "odd"}}}},
       {"window", {{"archs", {"sm_90a"}}, {"parity", {{"k", "odd"}}}}}},
      {{"name", "portable"}, {"stages", {{{"program", "portable"}}}}, {"window", {{"archs", {"sm_80+"}}}}},
      {{"name", "fused_acc"}, {"stages", {{{"program", "fused"}}}}, {"accumulate", "fused"},
       {"window", {{"archs", {"sm_90a"}}, {"dtypes", {{"out", "f32"}}}, {"align", {{"out", 32}}}}}},
      {{"name", "composed_acc"},
       {"stages", {{{"program", "main"}, {"bind", {{"out", "scratch"}}}},
                   {{"program", "add"}, {"bind", {{"out", "out"}, {"a", "out"}, {"b", "scratch"}}}}}},
       {"accumulate", "composed"}, {"scratch", {{"dims", {"e", "n", "k"}}, {"dtype_of", "out"}}},
       {"window", {{"archs", {"sm_80+"}}}}}};
  return {{"family", "fx"}, {"programs", programs}, {"builds", builds},
          {"routes", {{{"op", "fx.wgrad"}, {"candidates", candidates}}}}};
}

class PlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = Registry::from_sources({{"planner.json", planner_registry().dump()}});
  }
  Planner planner() {
    return Planner(registry_, [this](const Program& p, const Arch& arch) {
      Availability a;
      bool runs = false;
      for (const auto& b : p.archs) runs = runs || b.runs_on(arch);
      if (!runs) {
        a.reason = "no_build";
        a.detail = p.name + " has no build for " + arch.str();
      } else if (unavailable_.count(p.name)) {
        a.reason = "min_cuda";
        a.detail = p.name + " needs CUDA >= 99.0";
      } else {
        a.by = ServedBy::jit;
        a.build = registry_->build(p.name, p.archs.back());
      }
      return a;
    });
  }
  static Problem problem(int64_t m, int64_t n, int64_t k) {
    Problem p;
    p.op = "fx.wgrad";
    p.dims = {{"e", 8}, {"m", m}, {"n", n}, {"k", k}};
    p.dtypes = {{"out", DType::f32}};
    p.align = {{"out", 256}};
    return p;
  }
  std::shared_ptr<const Registry> registry_;
  std::set<std::string> unavailable_;
  Device hopper_{*Arch::parse("sm_90a"), 132};
};

TEST_F(PlannerTest, FirstMatchingWindowWins) {
  auto r = planner().plan(problem(4096, 256, 1024), hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "big_tile");
  ASSERT_EQ(r.plan->passed_over.size(), 1u);
  EXPECT_EQ(r.plan->passed_over[0].candidate, "split_nondet");
  EXPECT_EQ(r.plan->passed_over[0].reason, "deterministic");
  EXPECT_EQ(r.plan->accumulate, Accumulate::off);
  EXPECT_TRUE(r.plan->deterministic);
}

TEST_F(PlannerTest, NonDeterministicOnlyOnExplicitRequest) {
  auto p = problem(4096, 256, 8192);
  EXPECT_EQ(planner().plan(p, hopper_).plan->route, "big_tile");
  p.deterministic = false;
  auto r = planner().plan(p, hopper_);
  EXPECT_EQ(r.plan->route, "split_nondet");
  EXPECT_FALSE(r.plan->deterministic);
  p.dims["k"] = 1024;  // below the split window: deterministic routes again
  EXPECT_EQ(planner().plan(p, hopper_).plan->route, "big_tile");
}

TEST_F(PlannerTest, SmCountDimsDivisibilityParity) {
  // 64 SMs: big_tile's SM window fails, k is even, and the portable program has no sm_90a
  // build: no route, and each candidate says why.
  auto r = planner().plan(problem(4096, 256, 1024), Device{*Arch::parse("sm_90a"), 64});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejections[1].reason, "sm_count");
  EXPECT_EQ(r.rejections[2].reason, "parity");
  EXPECT_EQ(r.rejections[3].reason, "unavailable:no_build");
  r = planner().plan(problem(4096, 256, 1025), Device{*Arch::parse("sm_90a"), 64});
  EXPECT_EQ(r.plan->route, "odd_k");
  r = planner().plan(problem(512, 256, 1025), hopper_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.plan->passed_over[1].reason, "dim");
  EXPECT_NE(r.plan->passed_over[1].detail.find("m=512 outside [1024, inf]"), std::string::npos);
  r = planner().plan(problem(4096, 200, 1025), hopper_);
  EXPECT_EQ(r.plan->passed_over[1].reason, "divisible");
  EXPECT_EQ(r.plan->route, "odd_k");
}

// A problem without dims the windows ask about: the error names every one of them (each
// rejection names only the first its window checks), but none the problem has.
TEST_F(PlannerTest, NoRouteNamesTheDimsTheProblemLacks) {
  Problem p = problem(4096, 256, 1024);
  p.dims = {{"e", 8}, {"m", 4096}};
  auto r = planner().plan(p, Device{*Arch::parse("sm_90a"), 64});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("every candidate was passed over (the problem has no dim k, n)"), std::string::npos) << r.error;
  r = planner().plan(problem(4096, 256, 1024), Device{*Arch::parse("sm_90a"), 64});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.find("has no dim"), std::string::npos) << r.error;
}

TEST_F(PlannerTest, UnavailableStageIsPassedOverWithItsReason) {
  unavailable_ = {"fast"};
  auto r = planner().plan(problem(4096, 256, 1025), hopper_);
  EXPECT_EQ(r.plan->route, "odd_k");
  EXPECT_EQ(r.plan->passed_over[1].reason, "unavailable:min_cuda");
}

TEST_F(PlannerTest, ArchWindows) {
  // "portable" is built for sm_80 only: on an sm_86 part it runs; on sm_90a the fake says
  // no build runs, so the hopper-only windows are what serves there.
  auto r = planner().plan(problem(4096, 256, 1024), Device{*Arch::parse("sm_86"), 84});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.plan->route, "portable");
  EXPECT_EQ(r.plan->passed_over[1].reason, "arch");
  EXPECT_NE(r.plan->passed_over[1].detail.find("sm_86 is not in [sm_90a]"), std::string::npos);
}

TEST_F(PlannerTest, NoRouteListsEveryCandidate) {
  auto r = planner().plan(problem(4096, 256, 1024), Device{*Arch::parse("sm_75"), 40});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.rejections.size(), 6u);
  EXPECT_NE(r.error.find("no route for fx.wgrad"), std::string::npos);
}

TEST_F(PlannerTest, UnknownOp) {
  auto p = problem(1, 1, 1);
  p.op = "fx.nothing";
  auto r = planner().plan(p, hopper_);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("unknown op 'fx.nothing' (known: fx.wgrad)"), std::string::npos) << r.error;
}

TEST_F(PlannerTest, AccumulateFusedWhenServable) {
  auto p = problem(4096, 256, 1024);
  p.accumulate = true;
  auto r = planner().plan(p, hopper_);
  EXPECT_EQ(r.plan->route, "fused_acc");
  EXPECT_EQ(r.plan->accumulate, Accumulate::fused);
  EXPECT_EQ(r.plan->scratch_bytes, 0);
  for (const auto& x : r.plan->passed_over) EXPECT_EQ(x.reason, "accumulate");
}

TEST_F(PlannerTest, AccumulateComposesWhenFusedIsUnavailable) {
  unavailable_ = {"fused"};
  auto p = problem(4096, 256, 1024);
  p.accumulate = true;
  auto r = planner().plan(p, hopper_);
  EXPECT_EQ(r.plan->route, "composed_acc");
  EXPECT_EQ(r.plan->accumulate, Accumulate::composed);
  EXPECT_EQ(r.plan->scratch_bytes, 8 * 256 * 1024 * 4);
  EXPECT_NE(r.plan->why.find("fused_acc: fused needs CUDA >= 99.0"), std::string::npos) << r.plan->why;
  ASSERT_EQ(r.plan->stages.size(), 2u);
  EXPECT_EQ(r.plan->stages[0].bind.at("out"), "scratch");
}

TEST_F(PlannerTest, AccumulateComposesWhenPreconditionsFail) {
  auto p = problem(4096, 256, 1024);
  p.accumulate = true;
  p.align["out"] = 16;  // the fused epilogue needs 32
  auto r = planner().plan(p, hopper_);
  EXPECT_EQ(r.plan->route, "composed_acc");
  EXPECT_NE(r.plan->why.find("out is 16-byte aligned, needs 32"), std::string::npos) << r.plan->why;
  p.align["out"] = 256;
  p.dtypes["out"] = DType::bf16;
  r = planner().plan(p, hopper_);
  EXPECT_EQ(r.plan->route, "composed_acc");
  EXPECT_EQ(r.plan->scratch_bytes, 8 * 256 * 1024 * 2);  // scratch of out's dtype
}

// Several scratch buffers: one after another, each at a multiple of 256 bytes, `times` x the
// dims x the dtype's size each; the plan says where each starts.
TEST_F(PlannerTest, ScratchBuffersAreLaidOutInOrderAligned) {
  json reg = planner_registry();
  json& c = reg["routes"][0]["candidates"][5];
  c["scratch"] = json::array({{{"dims", {"e", "n"}}, {"dtype_of", "out"}, {"times", 3}},
                              {{"dims", {"k"}}, {"dtype_of", "out"}},
                              {{"dims", {"e"}}, {"dtype_of", "out"}, {"ceil_div", {"k", 100}}}});
  c["stages"][1]["bind"]["b"] = "scratch.2";
  registry_ = Registry::from_sources({{"planner.json", reg.dump()}});
  unavailable_ = {"fused"};
  auto p = problem(4096, 24, 1000);  // e = 8
  p.accumulate = true;
  p.dtypes["out"] = DType::bf16;
  auto r = planner().plan(p, hopper_);
  ASSERT_TRUE(r.ok()) << r.error;
  // 3 x 8 x 24 x 2 = 1152 bytes (to 1280), 1000 x 2 = 2000 (to 2048), 8 x ceil(1000 / 100) x 2 = 160.
  EXPECT_EQ(r.plan->scratch_offsets, (std::vector<int64_t>{0, 1280, 1280 + 2048}));
  EXPECT_EQ(r.plan->scratch_bytes, 1280 + 2048 + 160);
  // A size past int64 is a rejection, not an overflow.
  p.dims["k"] = int64_t(1) << 62;
  r = planner().plan(p, hopper_);
  ASSERT_FALSE(r.ok());
  bool seen = false;
  for (const auto& x : r.rejections)
    if (x.candidate == "composed_acc") {
      EXPECT_EQ(x.reason, "dim") << x.detail;
      seen = true;
    }
  EXPECT_TRUE(seen);
}

TEST_F(PlannerTest, AccumulatingCandidatesNeverServePlainCalls) {
  auto r = planner().plan(problem(4096, 256, 1024), Device{*Arch::parse("sm_75"), 40});
  for (const auto& x : r.rejections)
    if (x.candidate == "fused_acc" || x.candidate == "composed_acc") EXPECT_EQ(x.reason, "accumulate");
}

TEST_F(PlannerTest, CachedPlansAreReused) {
  auto pl = planner();
  const PlanResult& a = pl.plan_cached(problem(4096, 256, 1024), hopper_);
  const PlanResult& b = pl.plan_cached(problem(4096, 256, 1024), hopper_);
  const PlanResult& c = pl.plan_cached(problem(4096, 256, 1025), hopper_);
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_EQ(c.plan->route, "big_tile");
}

TEST_F(PlannerTest, FormatExplainsTheChoice) {
  unavailable_ = {"fused"};
  auto p = problem(4096, 256, 1024);
  p.accumulate = true;
  auto text = format_plan(planner().plan(p, hopper_), p, hopper_);
  EXPECT_NE(text.find("passed over fused_acc: unavailable:min_cuda"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen:  composed_acc  (accumulate composed"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 2: add"), std::string::npos) << text;
}

// A window on the waves a call's tiles make: ceil(prod ceil(dim / size) / SMs) in range,
// the SM count the device's; a dim it names that the problem lacks is named, and dims so large
// that the tile count overflows are many waves, not few.
TEST(TileWavePlans, WavesOfTheCallsTilesOnTheDevicesSms) {
  json reg = planner_registry();
  auto waves = [](int64_t lo, json hi) {
    return json{{"per", {{"m", 128}, {"n", 64}}}, {"waves", {lo, hi}}};
  };
  reg["routes"][0]["candidates"] = {
      {{"name", "one_wave"}, {"stages", {{{"program", "fast"}}}}, {"window", {{"tiles", waves(0, 1)}}}},
      {{"name", "two_waves"}, {"stages", {{{"program", "odd"}}}}, {"window", {{"tiles", waves(2, 2)}}}},
      {{"name", "many"}, {"stages", {{{"program", "main"}}}}, {"window", {{"tiles", waves(3, nullptr)}}}}};
  auto registry = Registry::from_sources({{"waves.json", reg.dump()}});
  Planner pl(registry, test::all_jit(registry));
  const Device h200{*Arch::parse("sm_90a"), 132};
  auto route = [&](int64_t m, int64_t n, const Device& d) {
    Problem p;
    p.op = "fx.wgrad";
    p.dims = {{"m", m}, {"n", n}};
    auto r = pl.plan(p, d);
    return r.ok() ? r.plan->route : r.error;
  };
  EXPECT_EQ(route(1024, 512, h200), "one_wave");      // 8 x 8 = 64 tiles
  EXPECT_EQ(route(128 * 33, 256, h200), "one_wave");  // 33 x 4 = 132: exactly one wave
  EXPECT_EQ(route(128 * 33 + 1, 256, h200), "two_waves");  // 34 x 4 = 136
  EXPECT_EQ(route(1, 1, h200), "one_wave");
  EXPECT_EQ(route(128 * 66, 256, h200), "two_waves");  // 264 tiles
  EXPECT_EQ(route(128 * 66, 257, h200), "many");       // 66 x 5 = 330
  EXPECT_EQ(route(128 * 33, 256, Device{*Arch::parse("sm_90a"), 114}), "two_waves");
  EXPECT_EQ(route(int64_t(1) << 62, int64_t(1) << 62, h200), "many");  // saturates
  Problem p;
  p.op = "fx.wgrad";
  p.dims = {{"m", 4096}};
  auto r = pl.plan(p, h200);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejections[0].reason, "tiles");
  EXPECT_NE(r.error.find("(the problem has no dim n)"), std::string::npos) << r.error;
  p.dims["n"] = 64 * 200;
  r = pl.plan(p, h200);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.plan->route, "many");
  EXPECT_EQ(r.plan->passed_over[0].detail, "tiles of m/128 x n/64 make 49 waves on 132 SMs, outside [0, 1]");
}

// The real elementwise routes over the embedded registry.
TEST(ElementwisePlans, VectorProgramsNeedAlignmentAndDivisibility) {
  auto reg = Registry::load_default();
  Planner pl(reg, test::all_jit(reg));
  Device d{*Arch::parse("sm_90a"), 132};
  Problem p;
  p.op = "elementwise.add";
  p.dims = {{"n", 1 << 20}};
  p.dtypes = {{"out", DType::f32}, {"a", DType::f32}, {"b", DType::f32}};
  p.align = {{"out", 256}, {"a", 256}, {"b", 256}};
  EXPECT_EQ(pl.plan(p, d).plan->route, "add_f32_vec4");
  p.align["b"] = 4;
  EXPECT_EQ(pl.plan(p, d).plan->route, "add_f32");
  p.align["b"] = 256;
  p.dims["n"] = 1001;
  EXPECT_EQ(pl.plan(p, d).plan->route, "add_f32");
  p.dtypes = {{"out", DType::bf16}, {"a", DType::bf16}, {"b", DType::bf16}};
  p.dims["n"] = 1024;
  EXPECT_EQ(pl.plan(p, d).plan->route, "add_bf16_vec8");
}

}  // namespace
}  // namespace cake
