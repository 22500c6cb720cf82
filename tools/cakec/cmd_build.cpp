// cakec render (family specs -> registry/*.json, build.json) and cakec build (prebuild
// every build the local NVRTC can serve into aot/).
#include <iostream>
#include <set>
#include <thread>

#include "cli_common.hpp"
#include "driver.hpp"
#include "env.hpp"
#include "error.hpp"
#include "nvrtc.hpp"
#include "prebuild.hpp"
#include "render_files.hpp"
#include "shapes_cli.hpp"

namespace cakec {
namespace {

struct RenderArgs {
  std::string root = ".";
  bool check = false;
};

int run_render(const RenderArgs& a) {
  auto files = cake::codegen::generated_files(cake::codegen::all_families());
  if (a.check) {
    int stale = cake::codegen::check_generated(a.root, files, std::cout);
    if (stale > 0) {
      std::cout << stale << " generated file(s) are stale: run `cakec render --root " << a.root << "`\n";
      return kFailure;
    }
    std::cout << "generated files are current (" << files.size() << " files)\n";
    return kOk;
  }
  int changed = cake::codegen::write_generated(a.root, files, std::cout);
  std::cout << changed << " file(s) changed, " << files.size() - std::min<size_t>(files.size(), changed)
            << " unchanged\n";
  return kOk;
}

struct BuildArgs {
  std::vector<std::string> archs;
  std::string out = "aot";
  int jobs = 0;
  std::string filter;
  bool force = false;
  bool for_device = false;
  ShapesArgs shapes;
};

int run_build(const Globals& g, const BuildArgs& a) {
  cake::PrebuildOptions opt;
  for (const auto& s : a.archs) opt.archs.push_back(parse_arch_arg("--arch", s));
  if (a.jobs < 0) throw UsageError("-j: must be >= 0");
  opt.filter = parse_filter_arg("--filter", a.filter);
  opt.out = a.out;
  opt.jobs = a.jobs > 0 ? a.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  opt.force = a.force;
  opt.jit_enabled = cake::env::jit_enabled();
  opt.progress = &std::cout;
  if (!a.shapes.file.empty()) {
    if (a.for_device || a.archs.size() > 1) throw UsageError("--shapes takes at most one --arch and no --for-device");
    ShapesArgs s = a.shapes;
    if (!a.archs.empty()) s.arch = a.archs.front();
    return build_for_shapes(g, s, opt);
  }
  if (a.shapes.sms != 0) throw UsageError("--sms goes with --shapes");
  if (a.for_device) {
    if (!a.archs.empty()) throw UsageError("--for-device and --arch exclude each other");
    opt.archs = {cake::Driver::instance().device(0).arch};  // throws without a GPU
  }
  auto registry = cake::Registry::load_default(g.registries);
  if (opt.archs.empty()) {
    std::set<cake::Arch> all;
    for (const auto& b : registry->builds()) all.insert(b.arch);
    opt.archs.assign(all.begin(), all.end());
  }
  const auto& nvrtc = cake::Nvrtc::instance();
  std::string archs;
  for (const auto& x : opt.archs) archs += (archs.empty() ? "" : " ") + x.str();
  std::cout << "cakec build: archs " << archs << " -> " << a.out << "/, " << opt.jobs << " jobs, NVRTC "
            << (nvrtc.info().present ? nvrtc.info().version.str() : "absent") << "\n";
  auto s = cake::prebuild(*registry, nvrtc, opt);
  for (const auto& [key, reason] : s.skipped) std::cout << "skipped  " << key << ": " << reason << "\n";
  for (const auto& [key, err] : s.failures) std::cout << "failed   " << key << ":\n" << err << "\n";
  std::printf("summary: %d built, %d up to date, %zu skipped, %d failed; %.2f s wall, %.2f s compiling\n",
              s.built, s.up_to_date, s.skipped.size(), s.failed, s.wall_s, s.compile_s);
  return s.failed > 0 ? kFailure : kOk;
}

}  // namespace

void add_build_commands(CLI::App& app, Globals& g, int& exit_code) {
  auto r = std::make_shared<RenderArgs>();
  auto* rc = app.add_subcommand("render", "Render the family specs into registry/*.json and build.json");
  rc->add_option("--root", r->root, "source tree root (default .)")->type_name("DIR");
  rc->add_flag("--check", r->check, "write nothing; fail with a diff if a generated file is stale");
  rc->callback([&exit_code, r] { exit_code = run_render(*r); });

  auto b = std::make_shared<BuildArgs>();
  auto* bc = app.add_subcommand("build", "Prebuild every build the local NVRTC can serve into aot/");
  bc->add_option("--arch", b->archs, "arch to build (repeat; default every arch in the registry)");
  bc->add_option("--out", b->out, "output folder (default aot)")->type_name("DIR");
  bc->add_option("-j,--jobs", b->jobs, "parallel compiles (default: one per core)");
  bc->add_option("--filter", b->filter, "only programs whose name matches this regex");
  bc->add_flag("--force", b->force, "rebuild even when the cubin is current");
  bc->add_flag("--for-device", b->for_device, "every program registered for GPU 0's arch");
  bc->add_option("--shapes", b->shapes.file,
                 "a JSON of the problems a job runs: build exactly what the planner picks for them")
      ->type_name("FILE");
  bc->add_option("--sms", b->shapes.sms, "with --shapes: the device's SM count (default the file's, else GPU 0's)");
  bc->callback([&g, &exit_code, b] { exit_code = run_build(g, *b); });
}

}  // namespace cakec
