// cakec as a user runs it: output and exit codes (0 ok, 1 failure, 2 usage).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "driver.hpp"
#include "registry.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

using test::run;
const std::string kCakec = CAKEC_PATH;

TEST(Cli, HelpOnEveryCommand) {
  for (std::string cmd : {"", "list-routes", "list-programs", "plan", "render", "build", "doctor"}) {
    auto r = run(kCakec + " " + cmd + " --help");
    EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run(kCakec).code, 2);
  EXPECT_EQ(run(kCakec + " frobnicate").code, 2);
  EXPECT_EQ(run(kCakec + " plan --op elementwise.add").code, 2);  // --arch, --sms missing
  auto r = run(kCakec + " plan --op elementwise.add --arch sm90 --sms 132");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--arch: 'sm90' is not an arch"), std::string::npos) << r.out;
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--dim: expected NAME=VALUE, got 'n'"), std::string::npos) << r.out;
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n=-4");
  EXPECT_EQ(r.code, 2);
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dtype a=f8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("'f8' is not a dtype"), std::string::npos) << r.out;
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --align a=3");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(run(kCakec + " build --filter '('").code, 2);
}

TEST(Cli, ListRoutesTableAndFilters) {
  auto r = run(kCakec + " list-routes");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OP"), std::string::npos);
  EXPECT_NE(r.out.find("cast_acc_bf16_to_f32_composed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ew_cast_f32_bf16_v1 -> ew_add_f32_v1"), std::string::npos) << r.out;
  r = run(kCakec + " list-routes --op elementwise.add");
  EXPECT_EQ(r.out.find("elementwise.cast"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 candidates in 1 routes"), std::string::npos) << r.out;
  r = run(kCakec + " list-routes --family nothing");
  EXPECT_NE(r.out.find("0 candidates in 0 routes"), std::string::npos) << r.out;
  r = run(kCakec + " list-routes --arch sm_90a");
  EXPECT_NE(r.out.find("SERVED(sm_90a)"), std::string::npos) << r.out;
  r = run(kCakec + " list-routes --arch sm_75");  // no window admits it
  EXPECT_NE(r.out.find("0 candidates"), std::string::npos) << r.out;
}

// An arch the registry does not list (Blackwell): every family's portable programs are
// served, as cubins JIT-compiled for the device's own arch.
TEST(Cli, PlansOnAnArchTheRegistryDoesNotList) {
  const std::string plan = kCakec + " plan --arch sm_100a --sms 148";
  for (std::string args : {" --op grouped_gemm.fwd --dim m=4096 --dim n=512 --dim k=256 --dim e=8 --dtype x=bf16"
                           " --dtype w=bf16 --dtype y=bf16 --dtype offs=i32",
                           " --op rmsnorm.fwd --dim t=65536 --dim h=7168 --dim residual=0 --dtype w=bf16",
                           " --op rmsnorm.bwd --dim t=65536 --dim h=7168 --dtype w=bf16",
                           " --op elementwise.cast --dim n=64 --dtype out=bf16 --dtype in=f32"}) {
    auto r = run(plan + args);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("chosen:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[sm_100, jit]"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("no_build"), std::string::npos) << r.out;
  }
  auto r = run(kCakec + " list-routes --op elementwise.add --arch sm_100a");
  EXPECT_NE(r.out.find("jit sm_100"), std::string::npos) << r.out;
  EXPECT_EQ(run(kCakec + " list-routes --arch compute_80").code, 2);
}

TEST(Cli, ListRoutesJsonParses) {
  auto r = run(kCakec + " list-routes --json --op elementwise.cast");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["op"], "elementwise.cast");
  EXPECT_EQ(j[0]["candidates"][6]["accumulate"], "composed");
  EXPECT_EQ(j[0]["candidates"][6]["scratch"][0]["dtype_of"], "out");
}

TEST(Cli, ListPrograms) {
  auto r = run(kCakec + " list-programs --arch sm_90a");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ew_add_f32_v4"), std::string::npos);
  EXPECT_EQ(r.out.find("sm_80 "), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(run(kCakec + " list-programs --json").out);
  size_t builds = 0;
  auto reg = Registry::load_default();
  for (const auto& p : reg->programs()) builds += p.archs.size();
  EXPECT_EQ(j.size(), builds);
  EXPECT_EQ(j[0]["source_hash"].get<std::string>().size(), 64u);
  // The programs with a stand-in name it, in the table and the JSON.
  r = run(kCakec + " list-programs --family grouped_gemm --arch sm_90a");
  const size_t row = r.out.find("\ngg_sm90_fwd_128x256_s4_r16_c1 ");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find(" gg_sm90_fwd_128x256_s4_r16_c1_compact "), std::string::npos) << line;
  bool named = false;
  for (const auto& b : j)
    if (b["program"] == "gg_sm90_dgrad_128x256_s4_r16_c1")
      named = b.value("stand_in", "") == "gg_sm90_dgrad_128x256_s4_r16_c1_compact";
  EXPECT_TRUE(named);
}

TEST(Cli, PlanExplainsTheChoice) {
  auto r = run(kCakec + " plan --op elementwise.cast --arch sm_90a --sms 132 --dim n=1001"
                        " --dtype out=f32 --dtype in=bf16 --accumulate");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("passed over cast_bf16_to_f32: accumulate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("passed over cast_acc_bf16_to_f32_fused_vec8: divisible - n=1001 is not a multiple of 8"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  cast_acc_bf16_to_f32_fused  (accumulate fused"), std::string::npos) << r.out;
}

TEST(Cli, PlanComposesWhereNoFusedCandidateServes) {
  auto r = run(kCakec + " plan --op elementwise.cast --arch sm_90a --sms 132 --dim n=64"
                        " --dtype out=bf16 --dtype in=f32 --accumulate");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("passed over cast_acc_bf16_to_f32_fused_vec8: dtype - in is f32, needs bf16"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  cast_acc_f32_to_bf16_composed  (accumulate composed, deterministic, scratch 128 bytes)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("composed because the fused candidates were passed over"), std::string::npos) << r.out;
}

TEST(Cli, PlanPassesOverAnUnservableUserCandidate) {
  // A user registry puts on top a fused program built for CUDA 99.0: the plan says why it
  // was passed over and takes the next candidate.
  test::TempDir dir;
  nlohmann::json prog = {{"name", "future_fused"}, {"template", "smxx_elementwise.cuh"},
                         {"kernels", {"cake::ew::cast_accumulate<float, cake::bf16, 1>"}},
                         {"archs", {"sm_90a"}}};
  nlohmann::json user = {
      {"programs", {prog}},
      {"builds", {{{"program", "future_fused"}, {"arch", "sm_90a"}, {"min_cuda", "99.0"},
                   {"options", {"--gpu-architecture=sm_90a"}}, {"source_hash", std::string(64, 'c')}}}},
      {"routes", {{{"op", "elementwise.cast"},
                   {"candidates", {{{"name", "future_fused_acc"}, {"accumulate", "fused"},
                                    {"stages", {{{"program", "future_fused"}}}},
                                    {"window", {{"dtypes", {{"out", "f32"}, {"in", "bf16"}}}}}}}}}}}};
  auto path = dir.write("user.json", user.dump());
  auto r = run(kCakec + " --registry " + path.string() +
               " plan --op elementwise.cast --arch sm_90a --sms 132 --dim n=64 --dtype out=f32"
               " --dtype in=bf16 --accumulate");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("passed over future_fused_acc: unavailable:min_cuda"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  cast_acc_bf16_to_f32_fused_vec8"), std::string::npos) << r.out;
}

TEST(Cli, PlanNamesTheInstanceOfAParametricProgram) {
  // A user registry's program takes the vector width from the problem's dim v.
  test::TempDir dir;
  const nlohmann::json user = nlohmann::json::parse(R"({
    "programs": [{"name": "vadd", "template": "smxx_elementwise.cuh", "archs": ["sm_90a"],
                  "kernels": ["cake::ew::add<float, float, float, {v}>"],
                  "instance": {"dims": {"v": {"range": [1, 8]}}}}],
    "builds": [{"program": "vadd", "arch": "sm_90a", "min_cuda": "12.0",
                "options": ["--gpu-architecture=sm_90a"], "source_hash": ")" + std::string(64, 'c') + R"("}],
    "routes": [{"op": "user.vadd", "candidates": [{"name": "vadd_any", "stages": [{"program": "vadd"}]}]}]})");
  auto path = dir.write("user.json", user.dump());
  const std::string plan = kCakec + " --registry " + path.string() + " plan --op user.vadd --arch sm_90a --sms 132";
  auto r = run(plan + " --dim n=64 --dim v=4");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("stage 1: vadd.v4 [sm_90a, jit] cake::ew::add<float, float, float, 4>"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("instance of vadd: v=4"), std::string::npos) << r.out;
  r = run(plan + " --dim n=64 --dim v=2 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stages"][0]["program"], "vadd.v2");
  EXPECT_EQ(j["stages"][0]["instance"]["of"], "vadd");
  EXPECT_EQ(j["stages"][0]["instance"]["values"]["v"], 2);
  r = run(plan + " --dim n=64 --dim v=9");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("passed over vadd_any: instance - v=9 is outside program vadd's instances (v in [1, 8])"),
            std::string::npos) << r.out;
  r = run(kCakec + " --registry " + path.string() + " list-routes --op user.vadd");
  EXPECT_NE(r.out.find("vadd[v]"), std::string::npos) << r.out;
}

TEST(Cli, WindowsOnWavesShowAndDecide) {
  // A user route whose first candidate holds while n's tiles of 64 make one wave.
  test::TempDir dir;
  const nlohmann::json user = nlohmann::json::parse(R"({
    "routes": [{"op": "user.add", "candidates": [
      {"name": "one_wave", "stages": [{"program": "ew_add_f32_v1"}],
       "window": {"tiles": {"per": {"n": 64}, "waves": [0, 1]}}},
      {"name": "any", "stages": [{"program": "ew_add_f32_v1"}]}]}]})");
  auto path = dir.write("user.json", user.dump());
  const std::string cakec = kCakec + " --registry " + path.string();
  auto r = run(cakec + " list-routes --op user.add");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("waves(n/64)[0, 1]"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(run(cakec + " list-routes --op user.add --json").out);
  EXPECT_EQ(j[0]["candidates"][0]["window"]["tiles"]["per"]["n"], 64);
  const std::string plan = cakec + " plan --op user.add --arch sm_90a --sms 132 --dtype out=f32";
  r = run(plan + " --dim n=8448");  // 132 tiles
  EXPECT_NE(r.out.find("chosen:  one_wave"), std::string::npos) << r.out;
  r = run(plan + " --dim n=8449");
  EXPECT_NE(r.out.find("passed over one_wave: tiles - tiles of n/64 make 2 waves on 132 SMs, outside [0, 1]"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  any"), std::string::npos) << r.out;
}

TEST(Cli, PlanFillsWhatWasNotGivenFromTheOpsSchema) {
  auto r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n=64");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("assumed (the op's first dtypes, 256-byte aligned): out=f32, a=f32, b=f32"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("chosen:  add_f32_vec4"), std::string::npos) << r.out;
  // A given dtype carries to the others that take it.
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n=64 --dtype out=bf16 --json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("assumed"), "a=bf16, b=bf16") << r.out;
  // What was given stays: bf16 everywhere, and a 2-byte aligned a rules out the vector form.
  r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n=64 --dtype out=bf16 --dtype a=bf16" +
          " --dtype b=bf16 --align a=2");
  EXPECT_EQ(r.out.find("assumed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen:  add_bf16 "), std::string::npos) << r.out;
}

TEST(Cli, PlanNoRouteExitsOne) {
  auto r = run(kCakec + " plan --op elementwise.add --arch sm_90a --sms 132 --dim n=8 --dtype out=f64");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no route"), std::string::npos) << r.out;
  r = run(kCakec + " plan --op nothing.here --arch sm_90a --sms 132");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown op 'nothing.here'"), std::string::npos) << r.out;
}

// A family's plan notes (FamilyOps::plan_notes) print under the plan and go into the JSON:
// here how the dense wgrad at T = 16173 splits its last wave and runs its FP32 sums, the same
// with or without --nondeterministic at N 64 (every candidate is deterministic).
TEST(Cli, PlanPrintsTheFamilysNotes) {
  // The issue's wgrad at T = 16173: the deterministic tail split, or with --nondeterministic
  // the split over T, each with its why.
  const std::string wgrad = kCakec + " plan --op dense_gemm.wgrad --arch sm_90a --sms 132 --dim t=16173 --dim n=64"
                                     " --dim k=4096 --dim b=1 --dim kn=0 --dtype dw=f32 --accumulate";
  auto det = run(wgrad);
  ASSERT_EQ(det.code, 0) << det.out;
  EXPECT_NE(det.out.find("chosen:  wgrad_acc_f32_fused_sm90_128x64  (accumulate fused, deterministic"),
            std::string::npos) << det.out;
  EXPECT_NE(det.out.find("note: tail split: the last 64 tiles run as 2 parts each"), std::string::npos) << det.out;
  EXPECT_NE(det.out.find("note: FP32 sums: one run (16173 rows, at most 16384 a run)"), std::string::npos) << det.out;
  // N 64: the split over T is not offered (its window starts past the 128-column tiles).
  auto nondet = run(wgrad + " --nondeterministic");
  ASSERT_EQ(nondet.code, 0) << nondet.out;
  EXPECT_NE(nondet.out.find("chosen:  wgrad_acc_f32_fused_sm90_128x64  (accumulate fused, deterministic"),
            std::string::npos) << nondet.out;
  EXPECT_NE(nondet.out.find("passed over wgrad_acc_f32_reduce_sm90_128x256: dim - n=64 outside [136, 256]"),
            std::string::npos) << nondet.out;
  // N 256: 32 tiles of 128 x 256, the split over T.
  std::string wide = wgrad;
  wide.replace(wide.find("n=64"), 4, "n=256");
  auto split = run(wide + " --nondeterministic");
  ASSERT_EQ(split.code, 0) << split.out;
  EXPECT_NE(split.out.find("chosen:  wgrad_acc_f32_reduce_sm90_128x256  (accumulate fused, non-deterministic"),
            std::string::npos) << split.out;
  EXPECT_NE(split.out.find("note: split over T: 16173 rows in 4 parts of up to 4044"), std::string::npos)
      << split.out;
  EXPECT_EQ(split.out.find("FP32 sums"), std::string::npos) << split.out;  // its parts: one run each
  // Dims the windows do not read may be left out: then there are no notes.
  auto partial = run(kCakec + " plan --op dense_gemm.fwd --arch sm_90a --sms 132 --dim n=64 --dim k=64 --dim kn=0");
  ASSERT_EQ(partial.code, 0) << partial.out;
  EXPECT_EQ(partial.out.find("note:"), std::string::npos) << partial.out;
  auto r = run(kCakec + " plan --json --op dense_gemm.fwd --arch sm_90a --sms 132 --dim t=131072 --dim n=1024"
                        " --dim k=4096 --dim b=1 --dim kn=0");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["notes"].size(), 2u) << r.out;
  EXPECT_EQ(j["notes"][1], "tail split: none (8 waves or more: the tail is a small share)");
}

TEST(Cli, PlanJson) {
  auto r = run(kCakec + " plan --json --op elementwise.add --arch sm_90a --sms 132 --dim n=4096"
                        " --dtype out=bf16 --dtype a=bf16 --dtype b=bf16");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["route"], "add_bf16_vec8");
  EXPECT_EQ(j["stages"][0]["program"], "ew_add_bf16_v8");
}

TEST(Cli, BrokenUserRegistryFailsWithFileAndPath) {
  test::TempDir dir;
  auto path = dir.write("bad.json", R"({"routes": [{"op": "x", "candidates": [{"name": "c", "stages": [{"program": "nope"}]}]}]})");
  auto r = run(kCakec + " --registry " + path.string() + " list-routes");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(path.string() + ": /routes/0/candidates/0/stages/0/program: unknown program 'nope'"),
            std::string::npos) << r.out;
  r = run("CAKE_REGISTRY=" + path.string() + " " + kCakec + " list-routes");
  EXPECT_EQ(r.code, 1);
}

TEST(Cli, RenderCheckDetectsDrift) {
  test::TempDir dir;
  EXPECT_EQ(run(kCakec + " render --root " + dir.path().string()).code, 0);
  auto r = run(kCakec + " render --check --root " + dir.path().string());
  EXPECT_EQ(r.code, 0) << r.out;
  dir.write("registry/elementwise.json", "{}\n");
  r = run(kCakec + " render --check --root " + dir.path().string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("+++ registry/elementwise.json (cakec render)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-{}"), std::string::npos) << r.out;
}

TEST(Cli, DoctorReports) {
  auto r = run(kCakec + " doctor");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* k : {"libcuda", "libnvrtc", "cache", "registry", "aot"})
    EXPECT_NE(r.out.find(k), std::string::npos) << k << "\n" << r.out;
  r = run("CAKE_NVRTC_PATH=/nonexistent/libnvrtc.so LD_LIBRARY_PATH=/nonexistent " + kCakec + " doctor");
  EXPECT_EQ(r.code, 0);
}

TEST(Cli, BuildWithoutNvrtcSkipsWithReason) {
  // A fake NVRTC path that fails, and no system one found: every build is skipped, not failed.
  test::TempDir dir;
  auto r = run("CAKE_JIT=0 " + kCakec + " build --arch sm_90a --out " + (dir.path() / "aot").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped  ew_add_f32_v4@sm_90a: jit_disabled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 built"), std::string::npos) << r.out;
}

TEST(Cli, DoctorStrictListsWhatNeedsJit) {
  test::TempDir dir;
  auto r = run(kCakec + " --aot " + dir.path().string() + " doctor --strict --arch sm_90a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("add_f32_vec4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ew_add_f32_v4 (jit_disabled)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ops have no candidate served without JIT"), std::string::npos) << r.out;
  EXPECT_EQ(run(kCakec + " doctor --strict --arch sm90").code, 2);
}

TEST(Cli, BuildForDeviceWithoutGpuSaysWhy) {
  auto& drv = Driver::instance();
  if (drv.available() && drv.device_count() > 0) GTEST_SKIP() << "a GPU is present";
  auto r = run(kCakec + " build --for-device --out /tmp/cake-never-written");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("libcuda"), std::string::npos) << r.out;
  EXPECT_EQ(run(kCakec + " build --for-device --arch sm_90a").code, 2);
}

TEST(Cli, CacheListAndClear) {
  test::TempDir dir;
  std::string env = "CAKE_CACHE_DIR=" + dir.path().string() + " ";
  auto r = run(env + kCakec + " cache list");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("0 entries"), std::string::npos) << r.out;
  dir.write("v1/ab/" + std::string(64, 'a') + ".cubin", "cake-cubin v1\n{\"program\": \"p\"}\nxx");
  r = run(env + kCakec + " cache list");
  EXPECT_NE(r.out.find("1 entries"), std::string::npos) << r.out;
  r = run(env + kCakec + " cache clear");
  EXPECT_NE(r.out.find("removed 1 entries"), std::string::npos) << r.out;
  EXPECT_EQ(run(env + kCakec + " cache").code, 2);  // a subcommand is required
}

TEST(Cli, BenchWithoutGpuSaysWhy) {
  auto& drv = Driver::instance();
  if (drv.available() && drv.device_count() > 0) GTEST_SKIP() << "a GPU is present: the bench would run";
  for (const std::string bench : {"jit", "rmsnorm", "grouped_gemm"}) {
    auto r = run(kCakec + " bench " + bench);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("cakec bench " + bench + " needs a GPU"), std::string::npos) << r.out;
  }
  EXPECT_EQ(run(kCakec + " bench grouped_gemm --op nope").code, 2);  // a usage error, GPU or not
  // dense_gemm's options: usage errors before any GPU is looked for.
  for (const std::string bad : {"--op nope", "--n 20", "--k 0", "--t 0", "--reps 0", "--n x"}) {
    auto d = run(kCakec + " bench dense_gemm " + bad);
    EXPECT_EQ(d.code, 2) << bad << ": " << d.out;
  }
  auto dn = run(kCakec + " bench dense_gemm --n 20");
  EXPECT_NE(dn.out.find("must be a positive multiple of 8, got 20"), std::string::npos) << dn.out;
  auto r = run(kCakec + " bench grouped_gemm --sustained --warm-ms 0 --window-ms 1 --rounds 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs a GPU"), std::string::npos) << r.out;
  r = run(kCakec + " bench grouped_gemm --order fixed");  // accepted; then the GPU is missing
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs a GPU"), std::string::npos) << r.out;
  r = run(kCakec + " bench grouped_gemm --cases models --sustained --op fwd dgrad");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs a GPU"), std::string::npos) << r.out;
}

TEST(Cli, BenchModelCasesHaveTheirOwnShapes) {  // usage errors, GPU or not: nothing runs
  for (const std::string opt : {"--shape down", "--m 4096", "--e 8", "--dist balanced"}) {
    auto r = run(kCakec + " bench grouped_gemm --cases models " + opt);
    EXPECT_EQ(r.code, 2) << opt << ": " << r.out;
    EXPECT_NE(r.out.find("is for --cases grid"), std::string::npos) << r.out;
  }
  auto r = run(kCakec + " bench grouped_gemm --cases moe");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(run(kCakec + " bench grouped_gemm --help").out.find("DeepSeek-V3/EP8 (7168, 2048, 32, 65536)"),
            std::string::npos);
}

TEST(Cli, BenchSustainedOptionsAreChecked) {  // usage errors, GPU or not: nothing runs
  auto r = run(kCakec + " bench grouped_gemm --warm-ms 100");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--warm-ms requires --sustained"), std::string::npos) << r.out;
  r = run(kCakec + " bench grouped_gemm --sustained --window-ms 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--window-ms"), std::string::npos) << r.out;
  EXPECT_EQ(run(kCakec + " bench grouped_gemm --sustained --rounds 0").code, 2);
  EXPECT_EQ(run(kCakec + " bench grouped_gemm --rounds 2").code, 2);
  r = run(kCakec + " bench grouped_gemm --sustained --reps 5");  // a window is timed by length
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
  r = run(kCakec + " bench grouped_gemm --order random");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--order"), std::string::npos) << r.out;
  EXPECT_EQ(run(kCakec + " bench grouped_gemm --sustained --order fixed").code, 2);
}

TEST(Cli, BenchSamplesPathIsCheckedFirst) {  // usage errors, GPU or not: nothing runs, nothing written
  test::TempDir dir;
  // One small row, so that on a GPU machine a check that came too late would cost seconds.
  const std::string bench = kCakec + " bench grouped_gemm --shape down --m 256 --e 1 --dist balanced --op fwd --reps 1";
  auto r = run(bench + " --samples " + (dir.path() / "no" / "s.csv").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--samples: no folder"), std::string::npos) << r.out;
  r = run(bench + " --samples " + dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--samples: '" + dir.path().string() + "' exists and is not a regular file"),
            std::string::npos)
      << r.out;
  r = run(bench + " --samples /dev/null");  // the rename would replace it
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is not a regular file"), std::string::npos) << r.out;
  r = run(bench + " --samples ''");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--samples: an empty path"), std::string::npos) << r.out;
  r = run(kCakec + " bench grouped_gemm --sustained --samples " + (dir.path() / "s.csv").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Two runs' --samples files of two rows each, with ratios chosen to give round figures.
TEST(Cli, BenchSummarizeTablesRunsFromTheirSamples) {
  test::TempDir dir;
  const std::string head = "row,shape,m,e,dist,op,rep,slot,contender,ms\n";
  std::string a = head, b = head;
  for (int rep = 0; rep < 3; ++rep) {
    const std::string r = std::to_string(rep);
    // Run 1: fwd's loop 1.1, 1.2, 1.3 x cake's time (grouped 2x): 1.200x; wgrad_acc's 0.9, 0.95, 1.0: 0.950x.
    a += "0,down,4096,4,balanced,fwd," + r + ",0,cake,1\n";
    a += "0,down,4096,4,balanced,fwd," + r + ",1,loop," + std::to_string(1.1 + 0.1 * rep) + "\n";
    a += "0,down,4096,4,balanced,fwd," + r + ",2,grouped,2\n";
    a += "1,down,4096,32,balanced,wgrad_acc," + r + ",1,cake,2\n";
    a += "1,down,4096,32,balanced,wgrad_acc," + r + ",0,loop," + std::to_string(1.8 + 0.1 * rep) + "\n";
    // Run 2: 1.050x and 1.100x.
    b += "0,down,4096,4,balanced,fwd," + r + ",0,cake,1\n0,down,4096,4,balanced,fwd," + r + ",1,loop,1.05\n";
    b += "1,down,4096,32,balanced,wgrad_acc," + r + ",0,cake,2\n1,down,4096,32,balanced,wgrad_acc," + r +
         ",1,loop,2.2\n";
  }
  const auto fa = dir.write("a.csv", a), fb = dir.write("b.csv", b);
  auto r = run(kCakec + " bench summarize " + fa.string() + " " + fb.string());
  ASSERT_EQ(r.code, 0) << r.out;
  auto has_line = [&](const std::string& words) {  // a table line: words split by runs of spaces
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream w(line);
      std::string joined, x;
      while (w >> x) joined += (joined.empty() ? "" : " ") + x;
      if (joined == words) return true;
    }
    return false;
  };
  EXPECT_NE(r.out.find("2 runs of `cakec bench grouped_gemm --samples`"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run 1: " + fa.string() + " (2 rows)"), std::string::npos) << r.out;
  EXPECT_TRUE(has_line("fwd 1.200x (1) 1.050x (1)")) << r.out;
  EXPECT_TRUE(has_line("wgrad_acc 0.950x (1) 1.100x (1)")) << r.out;
  EXPECT_TRUE(has_line("all 1.068x (2) 1.075x (2)")) << r.out;  // sqrt(1.2 * 0.95), sqrt(1.05 * 1.1)
  EXPECT_TRUE(has_line("E = 4 1.200x (1) 1.050x (1)")) << r.out;
  EXPECT_TRUE(has_line("E = 32 0.950x (1) 1.100x (1)")) << r.out;
  EXPECT_TRUE(has_line("min row 0.950x 1.050x")) << r.out;
  EXPECT_TRUE(has_line("rows < 1.00x 1 0")) << r.out;
  EXPECT_TRUE(has_line("ratio of the medians: min row 0.950x 1.050x")) << r.out;
  // Lowest first by the lowest run; the median of two is their geometric mean.
  const size_t low = r.out.find("the 2 lowest rows of 2");
  ASSERT_NE(low, std::string::npos) << r.out;
  EXPECT_TRUE(has_line("down M=4096 E=32 balanced wgrad_acc 2 0.950x 1.022x 1.100x 0.950x")) << r.out;
  EXPECT_TRUE(has_line("down M=4096 E=4 balanced fwd 2 1.050x 1.122x 1.200x 1.050x")) << r.out;
  EXPECT_LT(r.out.find("E=32 balanced wgrad_acc", low), r.out.find("E=4 balanced fwd", low)) << r.out;

  // A key a run repeats (--m 4096 4096) is a row of its own.
  const auto fc =
      dir.write("c.csv", a + "2,down,4096,4,balanced,fwd,0,0,cake,1\n2,down,4096,4,balanced,fwd,0,1,loop,0.5\n");
  r = run(kCakec + " bench summarize --lowest 1 " + fc.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has_line("down M=4096 E=4 balanced fwd #2 1 0.500x 0.500x 0.500x 0.500x")) << r.out;
  EXPECT_NE(r.out.find("the 1 lowest rows of 3"), std::string::npos) << r.out;
}

TEST(Cli, BenchSummarizeRefusesWhatIsNotASamplesFile) {
  test::TempDir dir;
  auto r = run(kCakec + " bench summarize");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run(kCakec + " bench summarize " + (dir.path() / "none.csv").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("none.csv: not a file"), std::string::npos) << r.out;
  r = run(kCakec + " bench summarize " + dir.path().string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(dir.path().string() + ": not a file"), std::string::npos) << r.out;
  const auto bad =
      dir.write("bad.csv", "row,shape,m,e,dist,op,rep,slot,contender,ms\n0,down,4096,4,balanced,fwd,0,0,cake,\n");
  r = run(kCakec + " bench summarize " + bad.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("bad.csv:2: ms '' is not a positive number"), std::string::npos) << r.out;
  r = run(kCakec + " bench summarize --lowest -1 " + bad.string());
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace cake
