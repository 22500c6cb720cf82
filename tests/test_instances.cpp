// Parametric programs: a program whose kernels name problem dims is made concrete per call
// (an instance), with its own name, build key and source hash; the planner takes the instance
// a call's dims give; `cakec build` prebuilds the instances a program lists. No GPU, no NVRTC.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "aot_manifest.hpp"
#include "availability.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "fixtures.hpp"
#include "instance_table.hpp"
#include "planner.hpp"
#include "prebuild.hpp"
#include "renderer.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using nlohmann::json;

const Arch kSm80 = *Arch::parse("sm_80"), kSm90 = *Arch::parse("sm_90a");

NvrtcInfo nvrtc_13() {
  NvrtcInfo n;
  n.present = true;
  n.version = *CudaVersion::parse("13.0");
  n.archs = {80, 90};
  return n;
}

// `vadd` stands for one program per vector width v (1..8); v = 2 and 4 are prebuilt.
json parametric_program() {
  return {{"name", "vadd"},
          {"template", "smxx_elementwise.cuh"},
          {"kernels", {"cake::ew::add<float, float, float, {v}>"}},
          {"archs", {"sm_80", "sm_90a"}},
          {"params", {{"threads", 256}}},
          {"instance", {{"dims", {{"v", {{"range", {1, 8}}}}}}, {"prebuild", {{{"v", 2}}, {{"v", 4}}}}}}};
}

json registry_with(const json& program, const std::string& hash = test::kHash) {
  json builds = json::array();
  for (const auto& a : program["archs"])
    builds.push_back({{"program", program["name"]}, {"arch", a}, {"min_cuda", "12.0"},
                      {"options", json::array()}, {"source_hash", hash}});
  json cand = {{"name", "vadd_any"}, {"stages", {{{"program", program["name"]}}}}, {"window", {{"archs", {"sm_80+"}}}}};
  json route = {{"op", "fx.vadd"}, {"candidates", json::array({cand})}};
  return {{"family", "fx"}, {"programs", json::array({program})}, {"builds", builds}, {"routes", json::array({route})}};
}

std::shared_ptr<const Registry> load(const json& doc) { return Registry::from_sources({{"fx.json", doc.dump()}}); }

void expect_rejected(const json& program, const std::string& what) {
  try {
    load(registry_with(program));
    ADD_FAILURE() << "accepted; expected: " << what;
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

Problem vadd_problem(int64_t v) {
  Problem p;
  p.op = "fx.vadd";
  p.dims = {{"n", 4096}, {"v", v}};
  return p;
}

TEST(Instances, AreMadeOnceWithTheirValuesInPlace) {
  auto reg = load(registry_with(parametric_program()));
  const Program& vadd = *reg->program("vadd");
  ASSERT_TRUE(vadd.parametric());
  std::string why;
  const Program* inst = reg->instance(vadd, {{"n", 4096}, {"v", 4}}, &why);
  ASSERT_NE(inst, nullptr) << why;
  EXPECT_EQ(inst->name, "vadd.v4");
  EXPECT_EQ(inst->kernels, std::vector<std::string>{"cake::ew::add<float, float, float, 4>"});
  EXPECT_EQ(inst->params->at("v"), 4);
  EXPECT_EQ(inst->params->at("threads"), 256);
  EXPECT_EQ(inst->instance_of, &vadd);
  EXPECT_FALSE(inst->parametric());
  EXPECT_EQ(reg->instance(vadd, {{"v", 4}}), inst);  // the same program on every ask
  EXPECT_EQ(reg->program("vadd.v4"), inst);
  for (const Arch& a : {kSm80, kSm90}) {
    const Build* b = reg->build("vadd.v4", a);
    ASSERT_NE(b, nullptr) << a.str();
    EXPECT_EQ(b->key(), "vadd.v4@" + a.str());
    EXPECT_EQ(b->source_hash, instance_source_hash(test::kHash, "vadd.v4"));
    EXPECT_NE(b->source_hash, reg->build("vadd", a)->source_hash);
  }
  // Another value, another program and hash.
  const Program* v8 = reg->instance(vadd, {{"v", 8}});
  ASSERT_NE(v8, nullptr);
  EXPECT_NE(reg->build("vadd.v8", kSm90)->source_hash, reg->build("vadd.v4", kSm90)->source_hash);
}

TEST(Instances, DimsOutsideTheDomainAreNamed) {
  json prog = parametric_program();
  prog["instance"]["dims"]["v"]["divisible"] = 2;
  prog["instance"]["prebuild"] = {{{"v", 2}}};
  auto reg = load(registry_with(prog));
  const Program& vadd = *reg->program("vadd");
  std::string why;
  EXPECT_EQ(reg->instance(vadd, {{"v", 10}}, &why), nullptr);
  EXPECT_EQ(why, "v=10 is outside program vadd's instances (v in [1, 8], a multiple of 2)");
  EXPECT_EQ(reg->instance(vadd, {{"v", 3}}, &why), nullptr);
  EXPECT_NE(why.find("v=3"), std::string::npos) << why;
  EXPECT_EQ(reg->instance(vadd, {{"v", -4}}, &why), nullptr);
  EXPECT_EQ(reg->instance(vadd, {{"n", 4}}, &why), nullptr);
  EXPECT_EQ(why, "the problem has no dim 'v' (program vadd takes it)");
  EXPECT_EQ(reg->program("vadd.v10"), nullptr);
}

TEST(Instances, MalformedParametricProgramsAreRejectedAtLoad) {
  json p = parametric_program();
  p["kernels"] = {"cake::ew::add<float, float, float, {w}>"};
  expect_rejected(p, "no kernel names {v}");
  p = parametric_program();
  p["kernels"] = {"cake::ew::add<float, float, float, {v}>", "cake::ew::add<float, float, float, {w}>"};
  expect_rejected(p, "{w} is not one of the instance dims");
  p = parametric_program();
  p["params"]["v"] = 4;
  expect_rejected(p, "sets 'v', which each instance sets to its value");
  p = parametric_program();
  p["instance"]["prebuild"] = {{{"v", 9}}};
  expect_rejected(p, "/instance/prebuild/0: v=9 is outside program vadd's instances");
  p = parametric_program();
  p["instance"]["prebuild"] = {{{"v", 2}, {"n", 4}}};
  expect_rejected(p, "needs a value for each instance dim and nothing else");
  p = parametric_program();
  p["instance"]["dims"]["v"]["range"] = {1, nullptr};
  expect_rejected(p, "both given: each value is a program");
  p = parametric_program();
  p["instance"]["dims"]["v"]["range"] = {0, 8};
  expect_rejected(p, "needs 1 <= lo <= hi");
  p = parametric_program();
  p["instance"]["dims"] = json::object();
  expect_rejected(p, "needs at least one dim");
  p = parametric_program();
  p["instance"]["dims"]["V-"] = {{"range", {1, 2}}};
  expect_rejected(p, "is not a dim name");
  p = parametric_program();
  p.erase("instance");
  expect_rejected(p, "names {v} but the program has no \"instance\" dims");

  // A declared program may not take an instance's name.
  json doc = registry_with(parametric_program());
  json squatter = {{"name", "vadd.v4"}, {"template", "smxx_elementwise.cuh"},
                   {"kernels", {"cake::ew::add<float, float, float, 4>"}}, {"archs", {"sm_90a"}}};
  doc["programs"].push_back(squatter);
  doc["builds"].push_back({{"program", "vadd.v4"}, {"arch", "sm_90a"}, {"min_cuda", "12.0"},
                           {"options", json::array()}, {"source_hash", test::kHash}});
  try {
    load(doc);
    ADD_FAILURE() << "a program named like an instance was accepted";
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("'vadd.v4' is in the names of program vadd's instances"), std::string::npos)
        << e.what();
  }
}

TEST(Instances, AStandInOfAParametricProgramIsParametricOnTheSameDims) {
  json doc = registry_with(parametric_program());
  json quick = parametric_program();
  quick["name"] = "vadd_quick";
  doc["programs"][0]["stand_in"] = "vadd_quick";
  doc["programs"].push_back(quick);
  for (const auto& a : {"sm_80", "sm_90a"})
    doc["builds"].push_back({{"program", "vadd_quick"}, {"arch", a}, {"min_cuda", "12.0"},
                             {"options", json::array()}, {"source_hash", std::string(64, 'b')}});
  auto reg = load(doc);
  const Program* inst = reg->instance(*reg->program("vadd"), {{"v", 4}});
  ASSERT_NE(inst, nullptr);
  EXPECT_EQ(inst->stand_in, "vadd_quick.v4");
  ASSERT_NE(reg->program("vadd_quick.v4"), nullptr);
  EXPECT_EQ(reg->build("vadd_quick.v4", kSm90)->source_hash, instance_source_hash(std::string(64, 'b'), "vadd_quick.v4"));

  doc["programs"][1]["instance"]["dims"]["v"]["range"] = {1, 4};
  try {
    load(doc);
    ADD_FAILURE() << "a stand-in on other instance dims was accepted";
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("instance dims"), std::string::npos) << e.what();
  }
}

TEST(Instances, ConcurrentAsksGetOneInstance) {
  auto reg = load(registry_with(parametric_program()));
  const Program& vadd = *reg->program("vadd");
  std::vector<const Program*> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int64_t v = 1; v <= 8; ++v) {
        const Program* p = reg->instance(vadd, {{"v", v}});
        if (v == 5) got[i] = p;
      }
    });
  for (auto& t : threads) t.join();
  for (const Program* p : got) EXPECT_EQ(p, reg->program("vadd.v5"));
}

TEST(Instances, ConcreteBuildsAreThePrebuildInstancesNotTheTemplate) {
  auto reg = load(registry_with(parametric_program()));
  std::vector<std::string> keys;
  for (const Build* b : reg->concrete_builds()) keys.push_back(b->key());
  EXPECT_EQ(keys, (std::vector<std::string>{"vadd.v2@sm_80", "vadd.v2@sm_90a", "vadd.v4@sm_80", "vadd.v4@sm_90a"}));
}

TEST(Instances, ThePlannerTakesTheInstanceTheDimsGive) {
  auto reg = load(registry_with(parametric_program()));
  AvailabilityRule rule(*reg, nullptr, nvrtc_13(), true);
  Planner planner(reg, [&](const Program& p, const Arch& a) { return rule.check(p, a); });
  const Device dev{kSm90, 132};
  const PlanResult r = planner.plan(vadd_problem(4), dev);
  ASSERT_TRUE(r.ok()) << r.error;
  const PlannedStage& s = r.plan->stages.at(0);
  EXPECT_EQ(s.program->name, "vadd.v4");
  EXPECT_EQ(s.build->key(), "vadd.v4@sm_90a");
  EXPECT_EQ(s.served_by, ServedBy::jit);
  const std::string text = format_plan(r, vadd_problem(4), dev);
  EXPECT_NE(text.find("stage 1: vadd.v4 [sm_90a, jit] cake::ew::add<float, float, float, 4>"), std::string::npos)
      << text;
  EXPECT_NE(text.find("instance of vadd: v=4"), std::string::npos) << text;

  const PlanResult out = planner.plan(vadd_problem(16), dev);
  ASSERT_FALSE(out.ok());
  ASSERT_EQ(out.rejections.size(), 1u);
  EXPECT_EQ(out.rejections[0].reason, "instance");
  EXPECT_EQ(out.rejections[0].detail, "v=16 is outside program vadd's instances (v in [1, 8])");
}

TEST(Instances, AnAotCubinServesItsInstanceOnly) {
  // build.json's hash for the parametric program is what the renderer gives it, so the
  // instance's derived hash is the one render() gives the instance.
  json prog = parametric_program();
  Program as_declared;
  as_declared.name = "vadd";
  as_declared.templ = prog["template"];
  as_declared.kernels = prog["kernels"].get<std::vector<std::string>>();
  const std::string hash = render(as_declared).source_hash;
  auto reg = load(registry_with(prog, hash));
  const Program* inst = reg->instance(*reg->program("vadd"), {{"v", 4}});
  ASSERT_NE(inst, nullptr);
  const RenderedProgram r = render(*inst);
  EXPECT_EQ(r.source_hash, reg->build("vadd.v4", kSm90)->source_hash);
  EXPECT_EQ(r.name_expressions, inst->kernels);
  EXPECT_NE(r.source.find("// kernel: cake::ew::add<float, float, float, 4>"), std::string::npos) << r.source;

  // Prebuild the listed instances with a stand-in compiler; aot/ then serves them, not v8.
  if (!Nvrtc::instance().info().present) GTEST_SKIP() << "prebuild asks the local NVRTC for its version";
  test::TempDir dir;
  PrebuildOptions po;
  po.archs = {kSm90};
  po.out = dir.path() / "aot";
  std::vector<std::string> compiled;
  std::mutex compiled_mutex;  // prebuild compiles on several threads (PrebuildOptions::jobs)
  po.compile = [&](const RenderedProgram& rp, const Arch&, const std::vector<std::string>&) {
    {
      std::lock_guard<std::mutex> lock(compiled_mutex);
      compiled.push_back(rp.name_expressions.at(0));
    }
    CompiledBinary b;
    b.cubin = "\x7f" "ELF fake " + rp.name;
    b.lowered_names = {"_Z3fakev"};
    return b;
  };
  const PrebuildSummary sum = prebuild(*reg, Nvrtc::instance(), po);
  EXPECT_EQ(sum.built, 2) << (sum.failures.empty() ? "" : sum.failures[0].second);
  std::sort(compiled.begin(), compiled.end());
  EXPECT_EQ(compiled, (std::vector<std::string>{"cake::ew::add<float, float, float, 2>",
                                                "cake::ew::add<float, float, float, 4>"}));
  const AotManifest aot = AotManifest::read(po.out);
  EXPECT_TRUE(aot.has("vadd.v4", kSm90, r.source_hash));
  AvailabilityRule rule(*reg, &aot, nvrtc_13(), /*jit_enabled=*/false);
  EXPECT_EQ(rule.check(*inst, kSm90).by, ServedBy::aot);
  const Availability v8 = rule.check(*reg->instance(*reg->program("vadd"), {{"v", 8}}), kSm90);
  EXPECT_FALSE(v8.available());
  EXPECT_EQ(v8.reason, "jit_disabled");
}

}  // namespace
}  // namespace cake
