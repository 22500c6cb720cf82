// cakec bench jit: what the JIT layer costs, as medians over many runs. Cold NVRTC compile
// per program; first call in a new process with the cubin in the disk cache, and served
// from aot/; in-memory hit; cached plan lookup; host time of launch() against a raw
// cuLaunchKernel of the same kernel.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "cli_common.hpp"
#include "compile_worker.hpp"
#include "driver.hpp"
#include "error.hpp"
#include "jit_probe.hpp"
#include "prebuild.hpp"
#include "renderer.hpp"

namespace cakec {
namespace {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double us_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

struct BenchArgs {
  int runs = 20;
  bool compile_only = false, each = false;
  std::string filter;
  std::string child_mode, child_cache, child_aot;
};

CUcontext make_primary_current() {
  CUdevice dev;
  CAKE_CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CAKE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CAKE_CU(cuCtxSetCurrent(ctx));
  return ctx;
}

// The child of a first-call measurement, a new process: after the context and the tensors
// exist (the application's cost), it times the Runtime's creation (registry, aot manifest)
// and then the first call (prepare + launch) of each of the probe's programs.
int run_child(const BenchArgs& a) {
  if (a.child_mode == "runtime") {  // the Runtime's creation alone, as the environment sets it up: no GPU needed
    cake::RuntimeOptions o;
    const auto t0 = clock_type::now();
    cake::Runtime rt(o);
    std::printf("%.1f 1\n", us_since(t0));
    return kOk;
  }
  make_primary_current();
  auto probe = make_jit_probe();
  const int calls = probe->calls();
  cake::RuntimeOptions o;
  o.cache_dir = a.child_cache;
  o.aot_dir = a.child_aot;
  if (a.child_mode == "aot") o.jit = false;
  auto t0 = clock_type::now();
  cake::Runtime rt(o);
  std::printf("%.1f", us_since(t0));
  for (int i = 0; i < calls; ++i) {
    t0 = clock_type::now();
    probe->prepare(rt, i).launch(nullptr);
    std::printf(" %.1f", us_since(t0));
  }
  CAKE_CU(cuCtxSynchronize());
  const auto& s = rt.load_stats();
  bool served_right = (a.child_mode == "aot" ? s.aot_loads : s.disk_hits) == calls && s.compiles == 0;
  std::printf(" %d\n", served_right ? 1 : 0);
  return served_right ? kOk : kFailure;
}

struct FirstCalls {
  std::vector<double> runtime_us, call_us;
  bool all_served = true;
};

// Each child prints the Runtime's creation, then `calls` first calls, then 1 if they were
// served as the mode says.
FirstCalls spawn_children(const std::string& mode, const std::string& cache, const std::string& aot, int runs,
                          int calls) {
  FirstCalls out;
  std::string self = fs::read_symlink("/proc/self/exe").string();
  for (int i = 0; i < runs; ++i) {
    std::string cmd = "'" + self + "' bench jit --child " + mode + " --child-cache '" + cache +
                      "' --child-aot '" + aot + "'";
    FILE* f = ::popen(cmd.c_str(), "r");
    std::vector<double> v(size_t(calls) + 1, 0.0);
    int ok = 0, read = 0;
    for (double& x : v) read += f != nullptr && std::fscanf(f, "%lf", &x) == 1;
    read += f != nullptr && std::fscanf(f, "%d", &ok) == 1;
    if (read != calls + 2) out.all_served = false;
    if (f) ::pclose(f);
    out.all_served = out.all_served && ok == 1;
    out.runtime_us.push_back(v[0]);
    for (int k = 1; k <= calls; ++k) out.call_us.push_back(v[size_t(k)]);
  }
  return out;
}

int run_bench_jit(const BenchArgs& a) {
  if (!a.child_mode.empty()) return run_child(a);
  auto& drv = cake::Driver::instance();
  const bool gpu = drv.available() && drv.device_count() > 0;
  if (!gpu && !a.compile_only)
    throw cake::Error("cakec bench jit needs a GPU (--compile-only measures the compiles alone): " +
                      drv.missing_reason());
  const auto& nvrtc = cake::Nvrtc::instance();
  if (!nvrtc.info().present) throw cake::Error("cakec bench jit needs NVRTC: " + nvrtc.info().missing_reason);
  const cake::Arch arch = gpu ? drv.device(0).arch : *cake::Arch::parse("sm_90a");
  const std::optional<std::regex> filter = parse_filter_arg("--filter", a.filter);
  auto reg = cake::Registry::load_default();
  std::vector<std::vector<std::string>> rows;
  char buf[64];
  auto fmt = [&](double v, const char* unit) {
    std::snprintf(buf, sizeof(buf), "%.3g %s", v, unit);
    return std::string(buf);
  };

  // 1. Cold NVRTC compile of each program for this arch, in process and in the worker
  // process that JIT and cakec build use by default (its cost: spawn + loading libnvrtc).
  // The target is for the largest GEMM program (TARGETS.md); the slowest of all is shown too.
  // A program with a stand-in compiles in the background while its stand-in serves the first
  // call, so what a first call waits for is the stand-in's compile (measured with the
  // program whenever the program is).
  std::vector<double> per_program, worker_extra;
  std::vector<std::vector<std::string>> each;
  std::string slowest, slowest_first;
  double slowest_ms = 0, slowest_first_ms = -1;
  std::map<std::string, double> median_of;
  // The programs as a device of this arch compiles them: declared programs, and parametric
  // programs as their prebuild instances (their own kernels name placeholders).
  std::vector<std::pair<const cake::Program*, const cake::Build*>> compiled;
  for (const cake::Build* b : cake::builds_for_archs(*reg, {arch})) compiled.emplace_back(reg->program(b->program), b);
  std::set<std::string> wanted;
  for (const auto& [prog, b] : compiled)
    if (!filter || std::regex_search(prog->name, *filter)) {
      wanted.insert(prog->name);
      if (!prog->stand_in.empty()) wanted.insert(prog->stand_in);
    }
  const std::string worker = cake::find_compile_worker();
  for (const auto& [prog, b] : compiled) {
    if (!wanted.count(prog->name)) continue;
    cake::RenderedProgram r = cake::render(*prog);
    std::vector<double> t, tw;
    for (int i = 0; i < std::max(3, a.runs / 4); ++i) {
      auto t0 = clock_type::now();
      nvrtc.compile(r, b->arch, b->options);
      t.push_back(us_since(t0) / 1000);
      if (!worker.empty()) {
        t0 = clock_type::now();
        cake::compile_in_worker(worker, r, b->arch, b->options, 600);
        tw.push_back(us_since(t0) / 1000);
      }
    }
    double m = median(t);
    median_of[prog->name] = m;
    per_program.push_back(m);
    if (!tw.empty()) worker_extra.push_back(median(tw) - m);
    if (m > slowest_ms) slowest_ms = m, slowest = prog->name;
    each.push_back({prog->name, std::to_string(prog->kernels.size()), fmt(m, "ms")});
  }
  // What a first call waits for: a program's compile, or its stand-in's where it has one.
  std::set<std::string> standing_in;  // stand-ins of measured programs: counted with their program
  for (const auto& [prog, b] : compiled)
    if (median_of.count(prog->name) && !prog->stand_in.empty()) standing_in.insert(prog->stand_in);
  for (const auto& [prog, b] : compiled) {
    if (!median_of.count(prog->name) || standing_in.count(prog->name)) continue;
    const bool stood_in = !prog->stand_in.empty() && median_of.count(prog->stand_in);
    const double first = stood_in ? median_of[prog->stand_in] : median_of[prog->name];
    if (first > slowest_first_ms)
      slowest_first_ms = first, slowest_first = stood_in ? prog->stand_in + ", stand-in of " + prog->name : prog->name;
  }
  if (per_program.empty()) throw cake::Error("cakec bench jit: no program for " + arch.str() + " matches --filter");
  rows.push_back({"cold NVRTC compile, median over programs", fmt(median(per_program), "ms"), "", ""});
  rows.push_back({"cold NVRTC compile, slowest program (" + slowest + ")", fmt(slowest_ms, "ms"), "", ""});
  rows.push_back({"cold NVRTC compile a first call waits for, slowest (" + slowest_first + ")",
                  fmt(slowest_first_ms, "ms"), "<= 1 s", slowest_first_ms <= 1000 ? "ok" : "MISS"});
  rows.push_back({"compile worker process: extra time per compile", worker.empty() ? "no worker" : fmt(median(worker_extra), "ms"), "", ""});
  if (a.each) std::cout << format_table({"PROGRAM", "KERNELS", "COLD COMPILE"}, each) << "\n";
  if (!gpu || a.compile_only) {
    // A new process's Runtime as the environment sets it up (CAKE_AOT_DIR, CAKE_CACHE_DIR).
    const auto created = spawn_children("runtime", "", "", a.runs, 0);
    const double us = median(created.runtime_us);
    rows.push_back({"new process: Runtime creation (registry, manifest)", fmt(us / 1000, "ms"), "<= 1 ms",
                    us <= 1000 ? "ok" : "MISS"});
    std::cout << "cakec bench jit --compile-only: " << arch.str() << (gpu ? "" : " (no GPU)") << ", NVRTC "
              << nvrtc.info().version.str() << ", " << per_program.size() << " programs, " << std::max(3, a.runs / 4) << " compiles each\n";
    std::cout << format_table({"MEASURE", "MEDIAN", "TARGET", ""}, rows);
    return kOk;
  }
  make_primary_current();
  const auto& dev = drv.device(0);

  // 2. First call in a new process: disk cache, then aot/.
  std::string tmp = (fs::temp_directory_path() / ("cake-bench-" + std::to_string(::getpid()))).string();
  fs::create_directories(tmp);
  {
    cake::RuntimeOptions o;
    o.cache_dir = tmp + "/cache";
    o.aot_dir = "";
    cake::Runtime warm(o);
    auto probe = make_jit_probe();
    for (int i = 0; i < probe->calls(); ++i) probe->prepare(warm, i);  // fills the disk cache
  }
  auto probe = make_jit_probe();
  const int calls = probe->calls();
  cake::PrebuildOptions po;
  po.archs = {dev.arch};
  po.out = tmp + "/aot";
  po.filter = probe->programs();
  cake::prebuild(*reg, nvrtc, po);
  auto disk = spawn_children("disk", tmp + "/cache", "", a.runs, calls);
  auto aot = spawn_children("aot", tmp + "/empty-cache", tmp + "/aot", a.runs, calls);
  double disk_us = median(disk.call_us), aot_us = median(aot.call_us);
  const double created_us = median(disk.runtime_us);
  rows.push_back({"new process: Runtime creation (registry, manifest)", fmt(created_us / 1000, "ms"), "<= 1 ms",
                  created_us <= 1000 ? "ok" : "MISS"});
  rows.push_back({"first call per program, cubin in disk cache", fmt(disk_us, "us"), "<= 1 ms per program", disk_us <= 1000 ? "ok" : "MISS"});
  std::vector<double> first_of_process;
  for (size_t i = 0; i < disk.call_us.size(); i += size_t(calls)) first_of_process.push_back(disk.call_us[i]);
  rows.push_back({"  first program of a process (also loads libnvrtc: the key has its version)",
                  fmt(median(first_of_process), "us"), "", ""});
  rows.push_back({"first call per program, cubin from aot/", fmt(aot_us, "us"), "<= 1 ms per program", aot_us <= 1000 ? "ok" : "MISS"});
  if (!disk.all_served || !aot.all_served) rows.push_back({"WARNING: a child was not served the expected way", "", "", "MISS"});

  // 3. In-memory hit, plan lookup and launch cost in this process.
  cake::RuntimeOptions o;
  o.cache_dir = tmp + "/cache";
  o.aot_dir = "";
  cake::Runtime rt(o);
  cake::Launch launch = probe->prepare(rt, 0);
  std::vector<double> prep;
  for (int i = 0; i < 200; ++i) {
    auto t0 = clock_type::now();
    probe->prepare(rt, 0);
    prep.push_back(us_since(t0));
  }
  rows.push_back({"prepare, everything in memory (validate, plan, kernel)", fmt(median(prep), "us"), "", ""});

  const cake::Problem prob = probe->problem();
  cake::Device device{dev.arch, dev.sm_count};
  std::vector<double> lookup;
  for (int rep = 0; rep < 21; ++rep) {
    const int k = 10000;
    auto t0 = clock_type::now();
    for (int i = 0; i < k; ++i) rt.plan(prob, device);
    lookup.push_back(us_since(t0) / k);
  }
  double lookup_us = median(lookup);
  rows.push_back({"plan lookup (cached)", fmt(lookup_us, "us"), "<= 0.2 us", lookup_us <= 0.2 ? "ok" : "MISS"});

  CUstream s;
  CAKE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // The same kernel and arguments as the prepared launch, launched raw.
  CUfunction fn = launch.stage_function(0);
  std::vector<double> raw, ours;
  for (int rep = 0; rep < 21; ++rep) {
    const int k = 500;
    auto t0 = clock_type::now();
    for (int i = 0; i < k; ++i) probe->launch_raw(fn, s, dev.sm_count);
    raw.push_back(us_since(t0) / k);
    CAKE_CU(cuStreamSynchronize(s));
    t0 = clock_type::now();
    for (int i = 0; i < k; ++i) launch.launch(s);
    ours.push_back(us_since(t0) / k);
    CAKE_CU(cuStreamSynchronize(s));
  }
  double raw_us = median(raw), ours_us = median(ours);
  rows.push_back({"raw cuLaunchKernel (host time per call)", fmt(raw_us, "us"), "", ""});
  rows.push_back({"Launch::launch (host time per call)", fmt(ours_us, "us"), "", ""});
  rows.push_back({"launch overhead over raw", fmt(ours_us - raw_us, "us"), "<= 1 us", ours_us - raw_us <= 1.0 ? "ok" : "MISS"});
  CAKE_CU(cuStreamDestroy(s));
  std::error_code ec;
  fs::remove_all(tmp, ec);

  std::cout << "cakec bench jit: " << dev.name << " (" << dev.arch.str() << ", " << dev.sm_count
            << " SMs), NVRTC " << nvrtc.info().version.str() << ", " << a.runs << " runs per first-call row\n";
  std::cout << format_table({"MEASURE", "MEDIAN", "TARGET", ""}, rows);
  return kOk;
}

}  // namespace

void add_bench_command(CLI::App& app, Globals&, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (need a GPU, but for jit --compile-only and summarize)");
  bench->require_subcommand(1);
  auto a = std::make_shared<BenchArgs>();
  auto* jit = bench->add_subcommand("jit", "What the JIT layer costs: compile, first call, cache hits, launch");
  jit->add_option("--runs", a->runs, "processes per first-call measurement (default 20)");
  jit->add_flag("--compile-only", a->compile_only, "only the compile rows (works without a GPU)");
  jit->add_option("--filter", a->filter, "compile rows: only programs whose name matches this regex");
  jit->add_flag("--each", a->each, "compile rows: print each program's median too");
  jit->add_option("--child", a->child_mode)->group("");  // internal: one first-call measurement
  jit->add_option("--child-cache", a->child_cache)->group("");
  jit->add_option("--child-aot", a->child_aot)->group("");
  jit->callback([&exit_code, a] { exit_code = run_bench_jit(*a); });
  add_family_benches(*bench, exit_code);
}

}  // namespace cakec
