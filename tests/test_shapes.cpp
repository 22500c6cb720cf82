// Prebuilding for a job's problems (no GPU): shapes files and their errors, problems completed
// from the ops' schemas, the distinct builds the planner picks for them, ops::prebuild_for into
// a runtime (compiles once, then served from memory; failures reported and passed over), and
// `cakec build --shapes` / `cakec doctor --strict --shapes` where a user meets them.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "cake_c.h"
#include "error.hpp"
#include "fixtures.hpp"
#include "ops.hpp"
#include "shapes.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using test::run;

const std::string kShapes = R"({
  "arch": "sm_90a", "sms": 132,
  "problems": [
    {"op": "rmsnorm.fwd", "dims": {"t": 16384, "h": 4096, "residual": 0}},
    {"op": "rmsnorm.fwd", "dims": {"t": 65536, "h": 4096, "residual": 0}},
    {"op": "rmsnorm.bwd", "dims": {"t": 16384, "h": 4096}},
    {"op": "grouped_gemm.wgrad", "dims": {"m": 16384, "n": 4096, "k": 7168, "e": 8},
     "dtypes": {"dw": "f32"}, "accumulate": true}
  ]})";

TEST(Shapes, ProblemsAreCompletedFromTheOpsSchemas) {
  const ops::Shapes s = ops::parse_shapes(kShapes, "job.json");
  EXPECT_EQ(s.arch->str(), "sm_90a");
  EXPECT_EQ(s.sms, 132);
  ASSERT_EQ(s.problems.size(), 4u);
  const Problem& rms = s.problems[0];
  EXPECT_EQ(rms.dtypes.at("x"), DType::bf16);
  EXPECT_EQ(rms.dtypes.at("rstd"), DType::f32);
  EXPECT_EQ(rms.align.at("x"), 256);
  EXPECT_FALSE(rms.dtypes.count("residual"));  // optional tensors stay out
  const Problem& wgrad = s.problems[3];
  EXPECT_TRUE(wgrad.accumulate);
  EXPECT_EQ(wgrad.dtypes.at("dw"), DType::f32);
  EXPECT_EQ(wgrad.dtypes.at("g"), DType::bf16);  // g does not take f32: its first dtype
}

TEST(Shapes, BadFilesNameThePlace) {
  auto error = [](const std::string& text) {
    try {
      ops::parse_shapes(text, "job.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error("{not json").find("job.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error(R"({"problems": []})").find("no problems"), std::string::npos);
  EXPECT_NE(error(R"({"problems": [{"op": "nope.fwd"}]})").find("/problems/0/op"), std::string::npos);
  EXPECT_NE(error(R"({"problems": [{"op": "rmsnorm.fwd", "dims": {"t": -1}}]})").find("/problems/0/dims/t"),
            std::string::npos);
  EXPECT_NE(error(R"({"problems": [{"op": "rmsnorm.fwd", "dtypes": {"w": "f8"}}]})").find("not a dtype"),
            std::string::npos);
  EXPECT_NE(error(R"({"problems": [{"op": "rmsnorm.fwd", "shape": 3}]})").find("shape"), std::string::npos);
  EXPECT_NE(error(R"({"arch": "compute_80", "problems": [{"op": "rmsnorm.fwd"}]})").find("not a device arch"),
            std::string::npos);
  EXPECT_NE(error(R"({"sms": 0, "problems": [{"op": "rmsnorm.fwd"}]})").find("/sms"), std::string::npos);
}

TEST(Shapes, PlansGiveEachBuildOnce) {
  auto reg = Registry::load_default();
  Planner planner(reg, test::all_jit(reg));
  ops::Shapes s = ops::parse_shapes(kShapes, "job.json");
  Problem none;  // a problem no candidate serves: reported, the others still planned
  none.op = "rmsnorm.fwd";
  none.dims = {{"t", 16}, {"h", 7}, {"residual", 0}};
  ops::complete_problem(none);
  s.problems.push_back(none);
  const ops::ShapePlans plans = ops::plan_shapes(planner, s.problems, Device{*s.arch, s.sms, 0});
  ASSERT_EQ(plans.routes.size(), 5u);
  EXPECT_EQ(plans.routes[0], plans.routes[1]);  // two token counts, one program
  EXPECT_EQ(plans.routes[4], "");
  EXPECT_FALSE(plans.errors[4].empty());
  std::set<std::string> keys;
  for (const auto& st : plans.stages) EXPECT_TRUE(keys.insert(st.build->key()).second) << st.build->key();
  EXPECT_TRUE(keys.count("rms_dw_finalize@sm_90a"));
  EXPECT_TRUE(keys.count("gg_sm90_wgrad_f32_acc_128x256_s4_r16_c1@sm_90a")) << plans.stages.size();
  EXPECT_EQ(keys.size(), 4u);  // fwd, bwd, finalize, wgrad
}

TEST(Shapes, PrebuildForCompilesOnceIntoTheRuntime) {
  std::atomic<int> compiles{0};
  RuntimeOptions o;
  o.cache_dir = "";
  o.aot_dir = "";
  o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
    ++compiles;
    if (p.name == "rms_dw_finalize") throw CompileError("injected", p.name, "sm_90a", p.source_hash, {}, "log");
    return test::fake_binary(p);
  };
  Runtime rt(o);
  const ops::Shapes s = ops::parse_shapes(kShapes, "job.json");
  const Device h200{*s.arch, s.sms, 232448};
  PrebuildSummary first = ops::prebuild_for(rt, s.problems, h200);
  EXPECT_EQ(first.built, 3);
  EXPECT_EQ(first.failed, 1);
  ASSERT_EQ(first.failures.size(), 1u);
  EXPECT_EQ(first.failures[0].first, "rms_dw_finalize@sm_90a");
  EXPECT_EQ(compiles.load(), 4);
  // Compiled once: a second prebuild finds them in memory. The failed build is passed over by
  // the plans made from now on, so the backward (whose only routes need it) has none.
  PrebuildSummary second = ops::prebuild_for(rt, s.problems, h200);
  EXPECT_EQ(second.built, 0);
  EXPECT_EQ(second.up_to_date, 2);
  EXPECT_EQ(compiles.load(), 4);
  ASSERT_EQ(second.skipped.size(), 1u);
  EXPECT_EQ(second.skipped[0].first, s.problems[2].describe());
  EXPECT_NE(second.skipped[0].second.find("compile_failed"), std::string::npos) << second.skipped[0].second;
}

// The C ABI: a malformed file names shapes_json; with nothing servable (JIT off, no aot/) every
// problem is reported in the summary and the status says there was no route.
TEST(Shapes, CAbiPrebuildFor) {
  cake_runtime* rt = nullptr;
  ASSERT_EQ(cake_runtime_create(R"({"cache_dir": "", "aot_dir": "", "jit": false})", &rt), CAKE_OK) << cake_last_error();
  const char* summary = nullptr;
  EXPECT_EQ(cake_prebuild_for(nullptr, kShapes.c_str(), &summary), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_prebuild_for(rt, nullptr, &summary), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_prebuild_for(rt, R"({"problems": [{"op": "nope.fwd"}]})", &summary), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'shapes_json'"), std::string::npos) << cake_last_error();
  EXPECT_NE(std::string(cake_last_error()).find("/problems/0/op"), std::string::npos) << cake_last_error();
  EXPECT_EQ(cake_prebuild_for(rt, kShapes.c_str(), &summary), CAKE_ERROR_NO_ROUTE);
  EXPECT_NE(std::string(cake_last_error()).find("jit_disabled"), std::string::npos) << cake_last_error();
  const auto j = nlohmann::json::parse(summary);
  EXPECT_EQ(j.at("built"), 0);
  EXPECT_EQ(j.at("skipped").size(), 4u);
  EXPECT_EQ(cake_prebuild_for(rt, kShapes.c_str(), nullptr), CAKE_ERROR_NO_ROUTE);
  cake_runtime_destroy(rt);
}

// cake_plan: one plan a problem, as `cakec plan --json` prints it (notes included), on the
// device the document names; a problem with no route still gets its plan (why) and the status
// says so.
TEST(Shapes, CAbiPlan) {
  cake_runtime* rt = nullptr;
  ASSERT_EQ(cake_runtime_create(R"({"cache_dir": "", "aot_dir": ""})", &rt), CAKE_OK) << cake_last_error();
  const char* plans = nullptr;
  EXPECT_EQ(cake_plan(nullptr, kShapes.c_str(), &plans), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_plan(rt, nullptr, &plans), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_plan(rt, kShapes.c_str(), nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_plan(rt, R"({"problems": [{"op": "rmsnorm.fwd", "dims": {"t": -1}}]})", &plans), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("argument 'shapes_json'"), std::string::npos) << cake_last_error();
  EXPECT_STREQ(plans, "");

  ASSERT_EQ(cake_plan(rt, kShapes.c_str(), &plans), CAKE_OK) << cake_last_error();
  const auto j = nlohmann::json::parse(plans).at("plans");
  ASSERT_EQ(j.size(), 4u);
  for (const auto& p : j) {
    EXPECT_TRUE(p.at("ok").get<bool>()) << p.dump();
    EXPECT_EQ(p.at("device").get<std::string>().rfind("sm_90a", 0), 0u) << p.dump();
    EXPECT_NE(p.at("text").get<std::string>().find("chosen:"), std::string::npos);
  }
  EXPECT_EQ(j[0].at("stages")[0].at("instance"), (nlohmann::json{{"of", "rms_fwd"}, {"values", {{"h", 4096}}}}));
  EXPECT_EQ(j[0].at("stages")[0].at("build"), j[0].at("stages")[0].at("program").get<std::string>() + "@sm_90a");
  EXPECT_EQ(j[3].at("accumulate"), "fused");
  // The family's notes, in "notes" and under the text, as `cakec plan` prints them.
  EXPECT_TRUE(j[0].at("notes").empty()) << j[0].dump();
  ASSERT_FALSE(j[3].at("notes").empty()) << j[3].dump();
  EXPECT_EQ(j[3].at("notes")[0].get<std::string>().rfind("FP32 sums: a group of over 16384 rows", 0), 0u) << j[3].dump();
  EXPECT_NE(j[3].at("text").get<std::string>().find("\nnote: FP32 sums"), std::string::npos) << j[3].dump();

  const std::string none = R"({"arch": "sm_90a", "sms": 132, "problems": [
    {"op": "rmsnorm.fwd", "dims": {"t": 64, "h": 4096, "residual": 0}}, {"op": "grouped_gemm.fwd",
     "dims": {"m": 64, "n": 12, "k": 64, "e": 2}}]})";
  EXPECT_EQ(cake_plan(rt, none.c_str(), &plans), CAKE_ERROR_NO_ROUTE);
  EXPECT_NE(std::string(cake_last_error()).find("no route for 1 problem"), std::string::npos) << cake_last_error();
  const auto k = nlohmann::json::parse(plans).at("plans");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_TRUE(k[0].at("ok").get<bool>());
  EXPECT_FALSE(k[1].at("ok").get<bool>());
  EXPECT_FALSE(k[1].at("error").get<std::string>().empty());
  cake_runtime_destroy(rt);
}

TEST(Shapes, CakecSaysWhatItNeeds) {
  test::TempDir dir;
  dir.write("job.json", kShapes);
  dir.write("nodevice.json", R"({"problems": [{"op": "rmsnorm.fwd", "dims": {"t": 1, "h": 8, "residual": 0}}]})");
  const std::string cakec = CAKEC_PATH, job = (dir.path() / "job.json").string();
  auto r = run(cakec + " doctor --strict --shapes " + job + " --aot " + (dir.path() / "none").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("4 of 4 problems would compile at their first call"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rms_dw_finalize@sm_90a"), std::string::npos) << r.out;
  r = run(cakec + " doctor --shapes " + job);
  EXPECT_EQ(r.code, 2) << r.out;
  r = run(cakec + " doctor --strict --shapes " + (dir.path() / "missing.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot read the shapes file"), std::string::npos) << r.out;
  r = run(cakec + " build --shapes " + (dir.path() / "nodevice.json").string() + " --out " + (dir.path() / "aot").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the problems' device is not known"), std::string::npos) << r.out;
  r = run(cakec + " build --shapes " + job + " --arch sm_90a --arch sm_80");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run(cakec + " build --sms 132");
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace cake
