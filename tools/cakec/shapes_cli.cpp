#include "shapes_cli.hpp"

#include <iostream>

#include "driver.hpp"
#include "nvrtc.hpp"
#include "planner.hpp"
#include "shapes.hpp"

namespace cakec {
namespace {

struct Job {
  cake::ops::Shapes shapes;
  cake::Device device;
};

Job read_job(const ShapesArgs& a) {
  Job j;
  try {
    j.shapes = cake::ops::read_shapes(a.file);
  } catch (const cake::Error& e) {
    throw UsageError(std::string("--shapes: ") + e.what());
  }
  j.device.arch = !a.arch.empty() ? parse_device_arch_arg("--arch", a.arch) : j.shapes.arch.value_or(cake::Arch{});
  j.device.sm_count = a.sms > 0 ? a.sms : j.shapes.sms;
  j.device.max_smem_optin = j.shapes.max_smem;
  if (j.device.arch.major == 0 || j.device.sm_count == 0) {
    auto& drv = cake::Driver::instance();
    if (!drv.available() || drv.device_count() == 0)
      throw UsageError("--shapes: the problems' device is not known: give \"arch\" and \"sms\" in " + a.file +
                       " or --arch and --sms (no GPU here: " + drv.missing_reason() + ")");
    const cake::DeviceInfo& d = drv.device(0);
    if (j.device.arch.major == 0) j.device.arch = d.arch;
    if (j.device.sm_count == 0) j.device.sm_count = d.sm_count;
    if (j.device.max_smem_optin == 0) j.device.max_smem_optin = d.max_smem_per_block_optin;
  }
  return j;
}

void print_routes(const Job& j, const cake::ops::ShapePlans& plans) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < j.shapes.problems.size(); ++i)
    rows.push_back({j.shapes.problems[i].describe(), plans.routes[i].empty() ? "-" : plans.routes[i]});
  std::cout << format_table({"PROBLEM", "ROUTE"}, rows);
  for (size_t i = 0; i < j.shapes.problems.size(); ++i)
    if (!plans.errors[i].empty()) std::cout << "no route: " << j.shapes.problems[i].describe() << ": " << plans.errors[i] << "\n";
}

}  // namespace

int build_for_shapes(const Globals& g, const ShapesArgs& a, cake::PrebuildOptions opt) {
  const Job j = read_job(a);
  auto registry = cake::Registry::load_default(g.registries);
  const auto& nvrtc = cake::Nvrtc::instance();
  cake::AvailabilityRule rule(*registry, nullptr, nvrtc.info(), opt.jit_enabled);
  cake::Planner planner(registry, [&](const cake::Program& p, const cake::Arch& arch) { return rule.check(p, arch); });
  const cake::ops::ShapePlans plans = cake::ops::plan_shapes(planner, j.shapes.problems, j.device);
  std::cout << "cakec build --shapes " << a.file << ": " << j.shapes.problems.size() << " problems on "
            << j.device.describe() << " -> " << opt.out.string() << "/, NVRTC "
            << (nvrtc.info().present ? nvrtc.info().version.str() : "absent") << "\n";
  print_routes(j, plans);
  for (const auto& s : plans.stages)
    if (!opt.filter || std::regex_search(s.build->program, *opt.filter)) opt.builds.push_back(s.build);
  if (opt.builds.empty()) {
    std::cout << "nothing to build\n";
    return plans.stages.empty() ? kFailure : kOk;
  }
  auto s = cake::prebuild(*registry, nvrtc, opt);
  for (const auto& [key, reason] : s.skipped) std::cout << "skipped  " << key << ": " << reason << "\n";
  for (const auto& [key, err] : s.failures) std::cout << "failed   " << key << ":\n" << err << "\n";
  std::printf("summary: %d built, %d up to date, %zu skipped, %d failed; %.2f s wall, %.2f s compiling\n", s.built,
              s.up_to_date, s.skipped.size(), s.failed, s.wall_s, s.compile_s);
  const bool unplanned = std::any_of(plans.errors.begin(), plans.errors.end(), [](auto& e) { return !e.empty(); });
  return s.failed > 0 || unplanned ? kFailure : kOk;
}

int strict_for_shapes(const Globals& g, const ShapesArgs& a) {
  const Job j = read_job(a);
  Context ctx = load_context(g);
  // The process's own view (aot/ first, JIT allowed): a stage it would serve by JIT compiles.
  cake::Planner planner(ctx.registry, [&](const cake::Program& p, const cake::Arch& arch) { return ctx.rule->check(p, arch); });
  std::cout << "strict: " << j.shapes.problems.size() << " problems from " << a.file << " on " << j.device.describe()
            << ", aot " << (ctx.aot_dir.empty() ? "(none)" : ctx.aot_dir) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const cake::Problem& p : j.shapes.problems) {
    cake::PlanResult r = planner.plan(p, j.device);
    if (!r.ok()) {
      rows.push_back({p.describe(), "-", "no route: " + r.error});
      continue;
    }
    std::string jit;
    for (const auto& s : r.plan->stages)
      if (s.served_by != cake::ServedBy::aot) jit += (jit.empty() ? "" : ", ") + s.build->key();
    if (!jit.empty()) rows.push_back({p.describe(), r.plan->route, jit});
  }
  if (rows.empty()) {
    std::cout << "every problem's route is served from aot/: no compile at the first calls\n";
    return kOk;
  }
  std::cout << format_table({"PROBLEM", "ROUTE", "NEEDS JIT FOR"}, rows);
  std::cout << rows.size() << " of " << j.shapes.problems.size()
            << " problems would compile at their first call (prebuild: cakec build --shapes " << a.file << ")\n";
  return kFailure;
}

}  // namespace cakec
