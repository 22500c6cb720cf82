// Registry loading and validation: each malformed case is rejected with its own message,
// naming the file and the JSON path.
#include <gtest/gtest.h>

#include <cstdlib>

#include "error.hpp"
#include "fixtures.hpp"
#include "aot_manifest.hpp"
#include "planner.hpp"
#include "registry.hpp"
#include "renderer.hpp"
#include "test_util.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

namespace cake {
namespace {
using nlohmann::json;
using test::fixture_registry;

std::shared_ptr<const Registry> load(const json& doc) {
  return Registry::from_sources({{"fx.json", doc.dump()}});
}

// Loading must fail with a message that contains both `where` and `what`.
void expect_rejected(const json& doc, const std::string& where, const std::string& what) {
  try {
    load(doc);
    ADD_FAILURE() << "accepted a bad registry; expected: " << what;
  } catch (const RegistryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Registry, FixtureLoads) {
  auto r = load(fixture_registry());
  ASSERT_NE(r->program("p1"), nullptr);
  EXPECT_EQ(r->programs().size(), 2u);
  ASSERT_NE(r->route("fx.op"), nullptr);
  EXPECT_EQ(r->route("fx.op")->candidates.size(), 2u);
  EXPECT_NE(r->build("p2", *Arch::parse("sm_80")), nullptr);
  EXPECT_EQ(r->build("p1", *Arch::parse("sm_80")), nullptr);
}

TEST(Registry, EmbeddedDefaultLoads) {
  auto r = Registry::load_default();
  EXPECT_NE(r->route("elementwise.add"), nullptr);
  EXPECT_NE(r->route("elementwise.cast"), nullptr);
  EXPECT_NE(r->route("rmsnorm.fwd"), nullptr);
  EXPECT_GE(r->programs().size(), 10u);
  size_t expected_builds = 0;
  for (const auto& p : r->programs()) expected_builds += p.archs.size();
  EXPECT_EQ(r->builds().size(), expected_builds);
}

TEST(Registry, NotJson) {
  try {
    Registry::from_sources({{"broken.json", "{\"programs\": ["}});
    ADD_FAILURE();
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(Registry, UnknownProgramInStage) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][1]["stages"][0]["program"] = "nope";
  expect_rejected(d, "fx.json: /routes/0/candidates/1/stages/0/program", "unknown program 'nope'");
}

TEST(Registry, MissingBuild) {
  auto d = fixture_registry();
  d["builds"].erase(2);
  expect_rejected(d, "fx.json: /programs/1", "missing build for program 'p2' on sm_90a");
}

TEST(Registry, BuildForUnknownProgram) {
  auto d = fixture_registry();
  d["builds"][0]["program"] = "ghost";
  expect_rejected(d, "/builds/0/program", "build for unknown program 'ghost'");
}

TEST(Registry, BuildForArchTheProgramLacks) {
  auto d = fixture_registry();
  d["builds"][0]["arch"] = "sm_80";
  expect_rejected(d, "/builds/0/arch", "does not list arch sm_80");
}

TEST(Registry, DuplicateBuild) {
  auto d = fixture_registry();
  d["builds"].push_back(d["builds"][0]);
  expect_rejected(d, "/builds/3", "duplicate build p1@sm_90a");
}

// p1 (sm_90a) may name p2 (sm_80, sm_90a; same template, kernels and params) as its stand-in.
TEST(Registry, StandIn) {
  auto d = fixture_registry();
  d["programs"][0]["stand_in"] = "p2";
  EXPECT_EQ(load(d)->program("p1")->stand_in, "p2");

  auto bad = d;
  bad["programs"][0]["stand_in"] = "ghost";
  expect_rejected(bad, "fx.json: /programs/0/stand_in", "unknown program 'ghost'");
  bad = d;
  bad["programs"][0]["stand_in"] = "p1";
  expect_rejected(bad, "/programs/0/stand_in", "a program cannot stand in for itself");
  bad = d;
  bad["programs"][1]["params"] = {{"threads", 128}};
  expect_rejected(bad, "/programs/0/stand_in", "must have the template, params, kernel count and instance dims of 'p1'");
  bad = d;
  bad["programs"][1]["stand_in"] = "p1";
  expect_rejected(bad, "/programs/0/stand_in", "stand-in 'p2' has a stand-in of its own");
  bad = fixture_registry();  // p2 lists sm_80, which p1 lacks
  bad["programs"][1]["stand_in"] = "p1";
  expect_rejected(bad, "/programs/1/stand_in", "stand-in 'p1' does not list arch sm_80");
  bad = d;
  bad["programs"][0]["stand_in"] = 3;
  EXPECT_THROW(load(bad), RegistryError);
}

// The embedded registry: fwd's, dgrad's and BF16 wgrad's Hopper programs have compact
// stand-ins, which no route names (they only ever serve in their program's place).
TEST(Registry, EmbeddedStandIns) {
  auto reg = Registry::load_default();
  for (const char* name : {"gg_sm90_fwd_128x256_s4_r16_c1", "gg_sm90_dgrad_128x256_s4_r16_c1",
                           "gg_sm90_wgrad_bf16_128x256_s4_r16_c1", "gg_sm90_wgrad_f32_128x256_s4_r16_c1",
                           "gg_sm90_wgrad_f32_acc_128x256_s4_r16_c1"}) {
    const Program* p = reg->program(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->stand_in, std::string(name) + "_compact");
    const Program* s = reg->program(p->stand_in);
    ASSERT_NE(s, nullptr);
    EXPECT_NE(s->kernels[0].find(", true>"), std::string::npos) << s->kernels[0];
    for (const auto& r : reg->routes())
      for (const auto& c : r.candidates)
        for (const auto& st : c.stages) EXPECT_NE(st.program, s->name) << c.name;
  }
  EXPECT_EQ(reg->program("gg_portable_fwd_128x128x32_s4_w2x2")->stand_in, "");
}

TEST(Registry, BadRange) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["dims"] = {{"n", {5, 3}}};
  expect_rejected(d, "/routes/0/candidates/0/window/dims/n", "empty range: lo 5 > hi 3");
}

TEST(Registry, NegativeRange) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["sm_count"] = {-1, 10};
  expect_rejected(d, "/window/sm_count", "is negative");
}

TEST(Registry, RangeShape) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["dims"] = {{"n", {1, 2, 3}}};
  expect_rejected(d, "/window/dims/n", "a range is [lo, hi]");
}

TEST(Registry, DuplicateProgram) {
  auto d = fixture_registry();
  d["programs"][1]["name"] = "p1";
  expect_rejected(d, "fx.json: /programs/1", "duplicate program name 'p1'");
}

TEST(Registry, DuplicateProgramAcrossFiles) {
  auto d = fixture_registry();
  json user = {{"programs", {d["programs"][0]}}};
  try {
    Registry::from_sources({{"fx.json", d.dump()}, {"user.json", user.dump()}});
    ADD_FAILURE();
  } catch (const RegistryError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("user.json: /programs/0"), std::string::npos) << m;
    EXPECT_NE(m.find("first defined at fx.json: /programs/0"), std::string::npos) << m;
  }
}

TEST(Registry, DuplicateCandidate) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][1]["name"] = "c1";
  expect_rejected(d, "/routes/0/candidates/1/name", "duplicate candidate name 'c1' in route fx.op");
}

TEST(Registry, UnknownMember) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["windw"] = json::object();
  expect_rejected(d, "/routes/0/candidates/0", "unknown member 'windw'");
}

TEST(Registry, BadArch) {
  auto d = fixture_registry();
  d["programs"][0]["archs"][0] = "sm90";
  expect_rejected(d, "/programs/0/archs/0", "'sm90' is not an arch");
}

TEST(Registry, BadArchPattern) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["archs"] = {"hopper"};
  expect_rejected(d, "/window/archs/0", "is not an arch pattern");
}

TEST(Registry, BadMinCuda) {
  auto d = fixture_registry();
  d["builds"][1]["min_cuda"] = "twelve";
  expect_rejected(d, "/builds/1/min_cuda", "'twelve' is not a version");
}

TEST(Registry, BadSourceHash) {
  auto d = fixture_registry();
  d["builds"][1]["source_hash"] = "abc";
  expect_rejected(d, "/builds/1/source_hash", "64 lowercase hex digits");
}

TEST(Registry, UnknownTemplate) {  // the JIT layer's check, where a registry is loaded for use
  auto d = fixture_registry();
  d["programs"][0]["template"] = "sm90_nothing.cuh";
  try {
    check_templates(*load(d));
    ADD_FAILURE() << "accepted a program whose template is not embedded";
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("/programs/0/template"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown template 'sm90_nothing.cuh'"), std::string::npos) << e.what();
  }
  check_templates(*load(fixture_registry()));  // the fixture's templates are embedded
}

TEST(Registry, KernelIndexOutOfRange) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["stages"][0]["kernel"] = 3;
  expect_rejected(d, "/stages/0/kernel", "kernel index 3 out of range");
}

TEST(Registry, ComposedNeedsScratch) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["accumulate"] = "composed";
  expect_rejected(d, "/routes/0/candidates/0", "composed candidate needs a scratch");
}

TEST(Registry, ScratchBindWithoutScratch) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["stages"][0]["bind"] = {{"out", "scratch"}};
  expect_rejected(d, "/routes/0/candidates/0", "binds 'scratch' but the candidate has no scratch");
}

TEST(Registry, ScratchBuffers) {
  auto d = fixture_registry();
  auto& c = d["routes"][0]["candidates"][0];
  c["scratch"] = json::array({{{"dims", {"n"}}, {"dtype_of", "out"}, {"times", 3}}, {{"dims", {"n"}}, {"dtype_of", "out"}}});
  c["stages"][0]["bind"] = {{"out", "scratch.1"}};
  const auto reg = load(d);
  const Candidate& cand = reg->routes()[0].candidates[0];
  ASSERT_EQ(cand.scratch.buffers.size(), 2u);
  EXPECT_EQ(cand.scratch.buffers[0].times, 3);
  EXPECT_EQ(cand.scratch.buffers[1].times, 1);
  c["stages"][0]["bind"] = {{"out", "scratch.2"}};
  expect_rejected(d, "/stages/0/bind/out", "'scratch.2' names no buffer of the candidate's 2 scratch buffers");
  c["stages"][0]["bind"] = {{"out", "scratch.x"}};
  expect_rejected(d, "/stages/0/bind/out", "names no buffer");
  c["stages"][0]["bind"] = {{"out", "scratch.0"}};
  c["scratch"][0]["times"] = 0;
  expect_rejected(d, "/scratch/0/times", "must be >= 1");
  c["scratch"] = json::array();
  expect_rejected(d, "/scratch", "at least one buffer");
}

TEST(Registry, BadAccumulateMode) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["accumulate"] = "sometimes";
  expect_rejected(d, "/candidates/0/accumulate", "'off', 'fused' or 'composed'");
}

TEST(Registry, WrongType) {
  auto d = fixture_registry();
  d["programs"][0]["kernels"] = "cake::ew::add";
  expect_rejected(d, "/programs/0/kernels", "expected an array, got string");
}

TEST(Registry, MissingMember) {
  auto d = fixture_registry();
  d["programs"][0].erase("template");
  expect_rejected(d, "/programs/0", "missing required member 'template'");
}

TEST(Registry, UnsafeName) {
  auto d = fixture_registry();
  d["programs"][0]["name"] = "../../etc/passwd";
  expect_rejected(d, "/programs/0/name", "is not a valid name");
}

TEST(Registry, BadAlignment) {
  auto d = fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["align"] = {{"out", 12}};
  expect_rejected(d, "/window/align/out", "power of two");
}

TEST(Registry, BadTileWaves) {
  auto d = fixture_registry();
  auto& w = d["routes"][0]["candidates"][0]["window"];
  w["tiles"] = {{"per", {{"t", 0}}}, {"waves", {0, 1}}};
  expect_rejected(d, "/window/tiles/per/t", "a tile's size must be >= 1");
  w["tiles"] = {{"per", json::object()}, {"waves", {0, 1}}};
  expect_rejected(d, "/window/tiles/per", "names no dim");
  w["tiles"] = {{"per", {{"t", 128}}}, {"waves", {2, 1}}};
  expect_rejected(d, "/window/tiles/waves", "empty range");
  w["tiles"] = {{"per", {{"t", 128}}}};
  expect_rejected(d, "/window/tiles", "waves");
  w["tiles"] = {{"per", {{"t", 128}}}, {"waves", {0, 1}}, {"wave", 1}};
  expect_rejected(d, "/window/tiles", "unknown member 'wave'");
  w["tiles"] = {{"per", {{"t", 128}}}, {"waves", {0, nullptr}}};
  EXPECT_EQ(load(d)->route("fx.op")->candidates[0].window.tiles.per.at("t"), 128);
}

TEST(Registry, BadParams) {
  auto d = fixture_registry();
  d["programs"][0]["params"] = json::array();
  expect_rejected(d, "/programs/0/params", "expected an object");
  d["programs"][0]["params"] = {{"counters", -1}};
  expect_rejected(d, "/programs/0/params/counters", "must be 0..1024 int32 words, got -1");
  d["programs"][0]["params"] = {{"counters", 1 << 20}};
  expect_rejected(d, "/programs/0/params/counters", "got 1048576");
  d["programs"][0]["params"] = {{"counters", "two"}};
  expect_rejected(d, "/programs/0/params/counters", "expected an integer, got string");
  d["programs"][0]["params"] = {{"counters", 2}, {"threads", 256}};
  EXPECT_EQ(load(d)->program("p1")->params->at("counters"), 2);
  d["programs"][0]["params"] = {{"workspace_per_sm", -8}};
  expect_rejected(d, "/programs/0/params/workspace_per_sm", "must be 0..1048576 bytes, got -8");
  d["programs"][0]["params"] = {{"workspace_per_sm", 1 << 21}};
  expect_rejected(d, "/programs/0/params/workspace_per_sm", "got 2097152");
  d["programs"][0]["params"] = {{"workspace_per_sm", 1.5}};
  expect_rejected(d, "/programs/0/params/workspace_per_sm", "expected an integer");
  d["programs"][0]["params"] = {{"workspace_per_sm", 131072}};
  EXPECT_EQ(load(d)->program("p1")->params->at("workspace_per_sm"), 131072);
}

TEST(Registry, UserRegistryGoesOnTop) {
  auto d = fixture_registry();
  json user = {{"routes", {{{"op", "fx.op"}, {"candidates", {{{"name", "mine"}, {"stages", {{{"program", "p2"}}}}}}}}}}};
  auto r = Registry::from_sources({{"fx.json", d.dump()}, {"user.json", user.dump()}});
  const auto& c = r->route("fx.op")->candidates;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].name, "mine");
  EXPECT_EQ(c[0].origin.file(), "user.json");
  EXPECT_EQ(c[0].origin.path, "/routes/0/candidates/0");
  EXPECT_EQ(c[1].name, "c1");
}

TEST(Registry, EnvironmentAddsUserRegistry) {
  test::TempDir dir;
  json user = {{"routes",
                {{{"op", "elementwise.add"},
                  {"candidates", {{{"name", "user_first"}, {"stages", {{{"program", "ew_add_f32_v1"}}}}}}}}}}};
  auto path = dir.write("user.json", user.dump());
  ::setenv("CAKE_REGISTRY", path.c_str(), 1);
  auto r = Registry::load_default();
  ::unsetenv("CAKE_REGISTRY");
  EXPECT_EQ(r->route("elementwise.add")->candidates.front().name, "user_first");
  EXPECT_EQ(r->files().back(), path.string());
}

TEST(Registry, MissingUserFileIsAnError) {
  EXPECT_THROW(Registry::load_default({"/nonexistent/cake.json"}), RegistryError);
}

}  // namespace
}  // namespace cake

namespace cake {
namespace {

// Inputs the fuzzers found (tests/fuzz/findings): each must be a clean cake::Error.
TEST(FuzzFindings, ReplayAsCleanErrors) {
  const std::filesystem::path dir = std::filesystem::path(CAKE_SOURCE_DIR) / "tests/fuzz/findings";
  int replayed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = e.path().filename().string();
    if (name.rfind("registry_", 0) == 0) {
      try {
        Registry::from_sources({{"finding.json", data}});
      } catch (const Error&) {
      }
      ++replayed;
    } else if (name.rfind("manifest_", 0) == 0) {
      test::TempDir d;
      d.write("manifest.json", data);
      EXPECT_THROW(AotManifest::read(d.path()), Error) << name;
      ++replayed;
    }
  }
  EXPECT_GE(replayed, 3);
}

TEST(FuzzFindings, CeilDivScratchNearInt64MaxHasNoOverflow) {
  auto reg = Registry::load_default();
  Planner pl(reg, test::all_jit(reg));
  Problem p;
  p.op = "rmsnorm.bwd";
  p.dims = {{"t", INT64_MAX}, {"h", 256}};
  p.dtypes = {{"w", DType::bf16}, {"rstd", DType::f32}};
  auto r = pl.plan(p, Device{*Arch::parse("sm_90a"), 132});  // UBSan watches the arithmetic
  EXPECT_FALSE(r.ok());  // the scratch size does not fit in 64 bits
}

}  // namespace
}  // namespace cake
