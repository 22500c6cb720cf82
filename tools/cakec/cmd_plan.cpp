// cakec plan: the planner's choice for a problem given on the command line, and why every
// earlier candidate was passed over.
#include <iostream>
#include <optional>

#include "cli_common.hpp"
#include "plan_args.hpp"
#include "op_family.hpp"
#include "plan_json.hpp"
#include "planner.hpp"
#include "shapes.hpp"

namespace cakec {
namespace {

int run_plan(const Globals& g, const PlanArgs& a) {
  cake::Device device{parse_device_arch_arg("--arch", a.arch), a.sms, a.max_smem};
  if (a.sms < 1) throw UsageError("--sms: must be >= 1");
  if (a.max_smem < 0) throw UsageError("--max-smem: must be >= 0");
  cake::Problem problem = build_problem(a);
  const std::string assumed = cake::ops::complete_problem(problem);
  Context ctx = load_context(g);
  cake::Planner planner(ctx.registry, [&](const cake::Program& p, const cake::Arch& arch) {
    return ctx.rule->check(p, arch);
  });
  cake::PlanResult r = planner.plan(problem, device);
  const std::vector<std::string> notes =
      r.ok() ? cake::ops::plan_notes(problem, *r.plan, device) : std::vector<std::string>{};
  if (a.json) {
    nlohmann::json j = cake::plan_json(r);
    j["assumed"] = assumed;
    j["notes"] = notes;
    std::cout << j.dump(2) << "\n";
  }
  else {
    if (!assumed.empty()) std::cout << "assumed (the op's first dtypes, 256-byte aligned): " << assumed << "\n";
    std::cout << cake::format_plan(r, problem, device);
    for (const std::string& n : notes) std::cout << "note: " << n << "\n";
  }
  return r.ok() ? kOk : kFailure;
}

}  // namespace

void add_plan_command(CLI::App& app, Globals& g, int& exit_code) {
  auto a = std::make_shared<PlanArgs>();
  auto* c = app.add_subcommand("plan", "Show the route the planner picks for a problem, and why");
  c->add_option("--op", a->op, "op, family.op as `cakec list-routes` shows it")->required();
  c->add_option("--arch", a->arch, "device arch, e.g. sm_90a")->required();
  c->add_option("--sms", a->sms, "device SM count, e.g. 132")->required();
  c->add_option("--dim", a->dims, "problem dim NAME=VALUE (repeat)")->type_name("NAME=VALUE");
  c->add_option("--dtype", a->dtypes, "argument dtype ARG=DTYPE (repeat)")->type_name("ARG=DTYPE");
  c->add_option("--align", a->aligns, "pointer alignment ARG=BYTES (default 256)")->type_name("ARG=BYTES");
  c->add_flag("--accumulate", a->accumulate, "the call accumulates into out (out += ...)");
  c->add_flag("--nondeterministic", a->nondeterministic, "allow non-deterministic candidates");
  c->add_option("--candidate", a->candidate, "consider only this candidate (as list-routes names it)");
  c->add_option("--max-smem", a->max_smem,
                "the device's opt-in shared memory per block in bytes, e.g. 232448 (H100/H200); default: not checked");
  c->add_flag("--json", a->json, "machine-readable output");
  c->callback([&g, &exit_code, a] { exit_code = run_plan(g, *a); });
}

}  // namespace cakec
