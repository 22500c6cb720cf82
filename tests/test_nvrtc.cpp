// Label nvrtc: real NVRTC compiles, no GPU needed.
#include <gtest/gtest.h>

#include "aot_manifest.hpp"
#include "cake_c.h"
#include "compile_worker.hpp"

#include <chrono>
#include "cubin_params.hpp"
#include "error.hpp"
#include "file_util.hpp"
#include "nvrtc.hpp"
#include "op_family.hpp"
#include "prebuild.hpp"
#include "registry.hpp"
#include "renderer.hpp"
#include "sha256.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

const Nvrtc& nvrtc_or_skip() {
  const Nvrtc& n = Nvrtc::instance();
  if (!n.info().present) ADD_FAILURE() << "NVRTC is required for this label: " << n.info().missing_reason;
  return n;
}

bool is_elf(const std::string& bin) { return bin.size() > 4 && bin.compare(0, 4, "\x7f" "ELF") == 0; }

// Compiles `b` and checks what the loader relies on: a cubin (PTX text for a virtual arch),
// one lowered name per kernel, and each kernel taking the one struct its family's binder packs
// (the family's contract).
void expect_compiles(const Nvrtc& n, const Registry& reg, const Build& b) {
  RenderedProgram r = render(*reg.program(b.program));
  ASSERT_EQ(r.source_hash, b.source_hash) << b.key();
  CompiledBinary bin = n.compile(r, b.arch, b.options);
  EXPECT_EQ(is_elf(bin.cubin), !b.arch.virt) << b.key();
  if (b.arch.virt)
    EXPECT_NE(bin.cubin.find(".target sm_" + std::to_string(b.arch.number())), std::string::npos) << b.key();
  ASSERT_EQ(bin.lowered_names.size(), r.name_expressions.size());
  for (const auto& l : bin.lowered_names) EXPECT_EQ(l.rfind("_Z", 0), 0u) << l;
  const Program& program = *reg.program(b.program);
  const ops::FamilyOps* family = ops::find_family(program.family);
  ASSERT_NE(family, nullptr) << b.key() << ": family " << program.family;
  for (size_t k = 0; k < bin.lowered_names.size(); ++k) {
    const ops::KernelArgs want = family->kernel_args(program, int(k));
    EXPECT_FALSE(want.type.empty()) << b.key() << " kernel " << k;
    // Where the one parameter sits in the block is the compiler's business (alignment: see
    // KernelParamsAreReadFromTheCubin); its count and size are the contract.
    const std::vector<test::KernelParam> got = b.arch.virt ? test::ptx_kernel_params(bin.cubin, bin.lowered_names[k])
                                                           : test::kernel_params(bin.cubin, bin.lowered_names[k]);
    ASSERT_EQ(got.size(), 1u) << b.key() << " kernel " << k << " should take one " << want.type;
    EXPECT_EQ(got[0].size, want.bytes) << b.key() << " kernel " << k << " should take one " << want.type;
  }
}

TEST(Nvrtc, EveryBuildCompiles) {
  const Nvrtc& n = nvrtc_or_skip();
  auto reg = Registry::load_default();
  int compiled = 0, ptx = 0;
  // Parametric programs compile as their prebuild instances (their kernels name placeholders).
  for (const Build* b : reg->concrete_builds()) {
    if (n.info().version < b->min_cuda) continue;
    expect_compiles(n, *reg, *b);
    ++compiled;
    ptx += b->arch.virt;
  }
  EXPECT_GT(compiled, 0);
  EXPECT_GT(ptx, 0);  // the portable programs' PTX
}

// A parametric program's instances compile across its domain, not only the prebuilt values:
// each end, the middle, and a value just inside the low end (odd multiples of the divisor).
TEST(Nvrtc, ParametricProgramsCompileAcrossTheirDomain) {
  const Nvrtc& n = nvrtc_or_skip();
  auto reg = Registry::load_default();
  const Arch hopper = *Arch::parse("sm_90a");
  int compiled = 0;
  for (const Program& p : reg->programs()) {
    if (!p.parametric()) continue;
    ASSERT_EQ(p.instance_dims.size(), 1u) << p.name << ": this test walks one dim";
    const InstanceDim& d = p.instance_dims[0];
    const int64_t lo = (d.range.lo + d.divisible - 1) / d.divisible * d.divisible, hi = d.range.hi / d.divisible * d.divisible;
    for (int64_t v : {lo, lo + 3 * d.divisible, (lo + hi) / 2 / d.divisible * d.divisible, hi - 5 * d.divisible, hi}) {
      const Program* inst = reg->instance(p, {{d.dim, v}});
      ASSERT_NE(inst, nullptr) << p.name << " " << d.dim << "=" << v;
      const Build* b = reg->build(inst->name, hopper);
      ASSERT_NE(b, nullptr) << inst->name;
      expect_compiles(n, *reg, *b);
      ++compiled;
    }
  }
  EXPECT_GT(compiled, 0);
}

// The portable programs as `cakec build --arch` makes them for archs the registry does not
// list: a cubin for each device's own arch.
TEST(Nvrtc, PortableProgramsCompileForLaterArchs) {
  const Nvrtc& n = nvrtc_or_skip();
  auto reg = Registry::load_default();
  for (std::string device : {"sm_100a", "sm_120a"}) {
    if (!n.info().supports(*Arch::parse(device))) GTEST_SKIP() << "NVRTC " << n.info().version.str() << " has no " << device;
    int compiled = 0;
    for (const Build* b : builds_for_archs(*reg, {*Arch::parse(device)})) {
      EXPECT_EQ(b->arch, Arch::parse(device)->plain()) << b->key();
      expect_compiles(n, *reg, *b);
      ++compiled;
    }
    EXPECT_GE(compiled, 10) << device;
  }
}

// The reader of the cubin's parameter table, on a kernel whose layout is known: each
// parameter at its type's alignment. The 64-byte aligned struct lands at 32, not 64: the
// block does not start 64-byte aligned in the constant bank, and the compiler aligns the
// parameter's address there (cuLaunchKernel copies each argument to its place from its own
// pointer, so ArgPack's host offsets need not match).
TEST(Nvrtc, KernelParamsAreReadFromTheCubin) {
  const Nvrtc& n = nvrtc_or_skip();
  RenderedProgram r;
  r.name = "param_probe";
  r.source =
      "struct alignas(64) Desc { unsigned long long w[16]; };\n"
      "extern \"C\" __global__ void probe(int a, void* p, Desc d, char c, double x) {\n"
      "  if (a == 7) *static_cast<double*>(p) = d.w[3] + c + x;\n"
      "}\n";
  r.name_expressions = {"probe"};
  const Arch sm80 = *Arch::parse("sm_80");
  const CompiledBinary bin = n.compile(r, sm80, default_nvrtc_options(sm80));
  EXPECT_EQ(test::kernel_params(bin.cubin, "probe"),
            (std::vector<test::KernelParam>{{0, 0, 4}, {1, 8, 8}, {2, 32, 128}, {3, 160, 1}, {4, 168, 8}}));
  EXPECT_THROW(test::kernel_params(bin.cubin, "absent"), std::runtime_error);
  EXPECT_THROW(test::kernel_params("not an elf", "probe"), std::runtime_error);
}

TEST(Nvrtc, CompileErrorCarriesLogOptionsAndHash) {
  const Nvrtc& n = nvrtc_or_skip();
  RenderedProgram r;
  r.name = "broken";
  r.source = "__global__ void k() { this_is_not_declared = 1; }\n";
  r.name_expressions = {"k"};
  r.source_hash = sha256_hex(r.source);
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a"};
  try {
    n.compile(r, *Arch::parse("sm_90a"), opts);
    FAIL() << "compiled a broken program";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("this_is_not_declared"), std::string::npos) << e.log();
    EXPECT_EQ(e.options(), opts);
    EXPECT_EQ(e.source_hash(), r.source_hash);
    EXPECT_EQ(e.program(), "broken");
    EXPECT_NE(std::string(e.what()).find("[program broken, sm_90a, source"), std::string::npos);
  }
}

TEST(Prebuild, IncrementalAndSelfHealing) {
  const Nvrtc& n = nvrtc_or_skip();
  auto reg = Registry::load_default();
  test::TempDir dir;
  PrebuildOptions opt;
  opt.archs = {*Arch::parse("sm_90a")};
  opt.out = dir.path() / "aot";
  opt.jobs = 2;
  opt.filter = std::regex("^ew_add_");
  auto first = prebuild(*reg, n, opt);
  EXPECT_EQ(first.built, 4);
  EXPECT_EQ(first.failed, 0);
  auto second = prebuild(*reg, n, opt);
  EXPECT_EQ(second.built, 0);
  EXPECT_EQ(second.up_to_date, 4);
  // A damaged cubin is noticed (sha256) and rebuilt.
  auto cubin = opt.out / "sm_90a/ew_add_f32_v4.cubin";
  auto data = *read_file(cubin);
  data[data.size() / 2] ^= 0x5a;
  write_file_atomic(cubin, data);
  auto third = prebuild(*reg, n, opt);
  EXPECT_EQ(third.built, 1);
  EXPECT_EQ(third.up_to_date, 3);
  auto m = AotManifest::read(opt.out);
  EXPECT_EQ(m.entries().size(), 4u);
  const AotEntry* e = m.find("ew_add_f32_v4", *Arch::parse("sm_90a"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(sha256_hex(*read_file(opt.out / e->file)), e->sha256);
  // A corrupt manifest costs a rebuild, not a failure.
  write_file_atomic(opt.out / "manifest.json", "{not json");
  auto fourth = prebuild(*reg, n, opt);
  EXPECT_EQ(fourth.built, 4);
}

TEST(Prebuild, CakecBuildCli) {
  test::TempDir dir;
  auto out = (dir.path() / "aot").string();
  auto r = test::run(std::string(CAKEC_PATH) + " build --arch sm_90a -j 2 --filter cast --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("summary: 6 built, 0 up to date, 0 skipped, 0 failed"), std::string::npos) << r.out;
  r = test::run(std::string(CAKEC_PATH) + " build --arch sm_90a --filter cast --out " + out);
  EXPECT_NE(r.out.find("summary: 0 built, 6 up to date"), std::string::npos) << r.out;
  // Only the cast programs are prebuilt: strict mode still lists the add route.
  r = test::run(std::string(CAKEC_PATH) + " --aot " + out + " doctor --strict --arch sm_90a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("cast_bf16_to_f32_vec8 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("add_f32_vec4"), std::string::npos) << r.out;
  // The planner now sees those builds as served from aot/.
  r = test::run(std::string(CAKEC_PATH) + " --aot " + out + " list-programs --arch sm_90a");
  EXPECT_NE(r.out.find("ew_cast_acc_f32_bf16_v8"), std::string::npos);
  EXPECT_NE(r.out.find("aot"), std::string::npos) << r.out;
}

// `cakec build --arch` for a device arch the registry does not list (a cubin made for it) and
// for the virtual arch (PTX); then, with JIT off, a device newer than NVRTC knows is served the
// PTX from aot/, and sm_120a its own cubin.
TEST(Prebuild, CakecBuildForLaterArchsAndPtx) {
  test::TempDir dir;
  const std::string cakec = CAKEC_PATH, out = (dir.path() / "aot").string();
  auto r = test::run(cakec + " build --arch sm_120a --arch sm_86 --arch compute_80 --filter '^ew_add_f32_v4$' --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  for (std::string key : {"ew_add_f32_v4@sm_120 ", "ew_add_f32_v4@sm_80 ", "ew_add_f32_v4@compute_80 "})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;  // sm_86 is served by sm_80's cubin
  EXPECT_NE(r.out.find("summary: 3 built"), std::string::npos) << r.out;
  const AotManifest m = AotManifest::read(out);
  const AotEntry* ptx = m.find("ew_add_f32_v4", *Arch::parse("compute_80"));
  ASSERT_NE(ptx, nullptr);
  EXPECT_EQ(ptx->file, "compute_80/ew_add_f32_v4.ptx");
  EXPECT_NE(read_file(dir.path() / "aot" / ptx->file)->find(".entry "), std::string::npos);
  const std::string plan = " plan --op elementwise.add --sms 148 --dim n=64 --dtype out=f32 --dtype a=f32 --dtype b=f32";
  r = test::run("CAKE_JIT=0 " + cakec + " --aot " + out + plan + " --arch sm_130");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ew_add_f32_v4 [compute_80, aot]"), std::string::npos) << r.out;
  r = test::run("CAKE_JIT=0 " + cakec + " --aot " + out + plan + " --arch sm_120a");
  EXPECT_NE(r.out.find("ew_add_f32_v4 [sm_120, aot]"), std::string::npos) << r.out;
  r = test::run(cakec + plan + " --arch compute_80");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("virtual arch"), std::string::npos) << r.out;
}

// Prebuilding for a job: `cakec build --shapes` builds exactly the chosen programs, after which
// `cakec doctor --strict --shapes` finds nothing left to compile; the C ABI compiles the same
// into a runtime once.
TEST(Prebuild, ForAJobsShapes) {
  test::TempDir dir;
  dir.write("job.json", R"({"arch": "sm_90a", "sms": 132, "problems": [
      {"op": "elementwise.cast", "dims": {"n": 4096}, "dtypes": {"out": "bf16", "in": "f32"}},
      {"op": "elementwise.cast", "dims": {"n": 1000000}, "dtypes": {"out": "bf16", "in": "f32"}},
      {"op": "elementwise.add", "dims": {"n": 1024}, "dtypes": {"out": "f32"}}]})");
  const std::string cakec = CAKEC_PATH, job = (dir.path() / "job.json").string(), out = (dir.path() / "aot").string();
  auto r = test::run(cakec + " build --shapes " + job + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("summary: 2 built, 0 up to date"), std::string::npos) << r.out;  // one cast, one add
  EXPECT_EQ(AotManifest::read(out).entries().size(), 2u);
  r = test::run(cakec + " --aot " + out + " doctor --strict --shapes " + job);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every problem's route is served from aot/"), std::string::npos) << r.out;
  r = test::run(cakec + " build --shapes " + job + " --out " + out);
  EXPECT_NE(r.out.find("summary: 0 built, 2 up to date"), std::string::npos) << r.out;

  cake_runtime* rt = nullptr;
  const std::string opts = R"({"aot_dir": "", "cache_dir": ")" + (dir.path() / "cache").string() + R"("})";
  ASSERT_EQ(cake_runtime_create(opts.c_str(), &rt), CAKE_OK) << cake_last_error();
  const std::string shapes = *read_file(job);
  const char* summary = nullptr;
  ASSERT_EQ(cake_prebuild_for(rt, shapes.c_str(), &summary), CAKE_OK) << cake_last_error();
  EXPECT_EQ(nlohmann::json::parse(summary).at("built"), 2) << summary;
  ASSERT_EQ(cake_prebuild_for(rt, shapes.c_str(), &summary), CAKE_OK) << cake_last_error();
  EXPECT_EQ(nlohmann::json::parse(summary).at("up_to_date"), 2) << summary;  // in memory
  cake_runtime_destroy(rt);
  ASSERT_EQ(cake_runtime_create(opts.c_str(), &rt), CAKE_OK) << cake_last_error();
  ASSERT_EQ(cake_prebuild_for(rt, shapes.c_str(), &summary), CAKE_OK) << cake_last_error();
  EXPECT_EQ(nlohmann::json::parse(summary).at("up_to_date"), 2) << summary;  // a new process: the disk cache
  cake_runtime_destroy(rt);
}

// The compile rows of cakec bench jit, where a user runs them (no GPU needed).
TEST(Prebuild, CakecBenchJitCompileRows) {
  const std::string bench = std::string(CAKEC_PATH) + " bench jit --compile-only --runs 4";
  auto r = test::run(bench + " --each --filter '^ew_add_f32_v1$'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ew_add_f32_v1  "), std::string::npos) << r.out;  // the --each table
  EXPECT_NE(r.out.find("1 programs, 3 compiles each"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a first call waits for, slowest (ew_add_f32_v1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new process: Runtime creation (registry, manifest)"), std::string::npos) << r.out;
  // A parametric program is compiled as its prebuild instances.
  r = test::run(bench + " --each --filter '^rms_fwd\\.h2048$'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rms_fwd.h2048  "), std::string::npos) << r.out;
  r = test::run(bench + " --filter '^gg_portable_fwd_'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("a first call waits for, slowest (gg_portable_fwd_128x128x32_s4_w2x2)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("PROGRAM"), std::string::npos) << r.out;  // no --each
  // A program with a stand-in: the stand-in is measured with it, and the target row is its.
  r = test::run(bench + " --filter '^gg_sm90_fwd_128x256_s4_r16_c1$'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 programs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a first call waits for, slowest (gg_sm90_fwd_128x256_s4_r16_c1_compact, stand-in of "
                       "gg_sm90_fwd_128x256_s4_r16_c1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("slowest program (gg_sm90_fwd_128x256_s4_r16_c1)"), std::string::npos) << r.out;
  r = test::run(bench + " --filter '('");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--filter: not a regular expression"), std::string::npos) << r.out;
  r = test::run(bench + " --filter nothing_is_called_this");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("matches --filter"), std::string::npos) << r.out;
}


}  // namespace
}  // namespace cake

namespace cake {
namespace {

RenderedProgram sample_program(const std::string& name = "ew_add_f32_v1") {
  return render(*Registry::load_default()->program(name));
}

TEST(CompileWorker, CompilesLikeInProcess) {
  std::string worker = find_compile_worker();
  ASSERT_FALSE(worker.empty()) << "cake_compile_worker not found";
  auto r = sample_program();
  auto b = compile_in_worker(worker, r, *Arch::parse("sm_90a"), {"--gpu-architecture=sm_90a"}, 60);
  EXPECT_TRUE(is_elf(b.cubin));
  ASSERT_EQ(b.lowered_names.size(), 1u);
  auto in_process = Nvrtc::instance().compile(r, *Arch::parse("sm_90a"), {"--gpu-architecture=sm_90a"});
  EXPECT_EQ(b.lowered_names, in_process.lowered_names);
}

TEST(CompileWorker, ACrashBecomesACompileErrorNamingTheSignal) {
  std::string worker = find_compile_worker();
  ::setenv("CAKE_TEST_WORKER_FAULT", "crash:ew_add_f32_v1", 1);
  try {
    compile_in_worker(worker, sample_program(), *Arch::parse("sm_90a"), {"--gpu-architecture=sm_90a"}, 60);
    ADD_FAILURE() << "a crashing compile succeeded";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("killed by signal SIGSEGV"), std::string::npos) << e.what();
    EXPECT_EQ(e.program(), "ew_add_f32_v1");
  }
  ::unsetenv("CAKE_TEST_WORKER_FAULT");
}

TEST(CompileWorker, AHangIsKilledAtTheTimeout) {
  std::string worker = find_compile_worker();
  ::setenv("CAKE_TEST_WORKER_FAULT", "hang:ew_add_f32_v1", 1);
  auto t0 = std::chrono::steady_clock::now();
  try {
    compile_in_worker(worker, sample_program(), *Arch::parse("sm_90a"), {"--gpu-architecture=sm_90a"}, 1.0);
    ADD_FAILURE() << "a hanging compile returned";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 1 s"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  ::unsetenv("CAKE_TEST_WORKER_FAULT");
}

TEST(CompileWorker, CompilerErrorsKeepTheirLog) {
  RenderedProgram r;
  r.name = "broken";
  r.source = "__global__ void k() { undeclared_thing = 1; }\n";
  r.name_expressions = {"k"};
  r.source_hash = std::string(64, '0');
  try {
    compile_in_worker(find_compile_worker(), r, *Arch::parse("sm_90a"), {"--gpu-architecture=sm_90a"}, 60);
    ADD_FAILURE();
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undeclared_thing"), std::string::npos) << e.log();
  }
}

TEST(CompileWorker, CakecBuildReportsACrashAndGoesOn) {
  test::TempDir dir;
  auto r = test::run("CAKE_TEST_WORKER_FAULT=crash:ew_add_f32_v1 " + std::string(CAKEC_PATH) +
                     " build --arch sm_90a --filter ew_add_f32 --out " + (dir.path() / "aot").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("killed by signal SIGSEGV"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 built"), std::string::npos) << r.out;  // the other build went through
}

// A cakec with no worker beside it: by default it compiles in process (one warning); with
// CAKE_COMPILE_ISOLATION=required the compile fails instead, and doctor says which it is.
TEST(CompileWorker, RequiredIsolationRefusesToCompileInProcess) {
  test::TempDir dir;
  const auto lonely = dir.path() / "bin" / "cakec";
  std::filesystem::create_directories(lonely.parent_path());
  std::filesystem::copy_file(CAKEC_PATH, lonely);
  const std::string build = " build --arch sm_90a --filter '^ew_add_f32_v1$' --out " + (dir.path() / "aot").string();
  const std::string env = "env -u CAKE_COMPILE_WORKER ";
  auto r = test::run(env + "CAKE_COMPILE_ISOLATION=required " + lonely.string() + build);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cake_compile_worker not found next to " + lonely.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not compiling in process"), std::string::npos) << r.out;
  r = test::run(env + "CAKE_COMPILE_ISOLATION=required " + lonely.string() + " doctor");
  EXPECT_NE(r.out.find("NOT FOUND beside " + lonely.string() + ": compiles fail"), std::string::npos) << r.out;
  // A CAKE_COMPILE_WORKER that is not an executable file is no worker either.
  r = test::run("CAKE_COMPILE_WORKER=" + (dir.path() / "nope").string() + " CAKE_COMPILE_ISOLATION=required " +
                lonely.string() + build);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is not an executable file"), std::string::npos) << r.out;
  r = test::run(env + lonely.string() + build);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compiling in process"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace cake
