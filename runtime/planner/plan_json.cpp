#include "plan_json.hpp"

namespace cake {

nlohmann::json plan_json(const PlanResult& r) {
  using nlohmann::json;
  json passed = json::array();
  for (const auto& x : r.ok() ? r.plan->passed_over : r.rejections)
    passed.push_back({{"candidate", x.candidate}, {"reason", x.reason}, {"detail", x.detail}});
  if (!r.ok()) return {{"ok", false}, {"error", r.error}, {"passed_over", passed}};
  const Plan& p = *r.plan;
  json stages = json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"program", s.program->name},
                      {"kernel", s.program->kernels[size_t(s.kernel)]},
                      {"arch", s.build->arch.str()},
                      {"build", s.build->key()},
                      {"served_by", served_by_name(s.served_by)},
                      {"bind", s.bind}});
    if (s.program->instance_of != nullptr)
      stages.back()["instance"] = {{"of", s.program->instance_of->name}, {"values", s.program->instance_values}};
  }
  return {{"ok", true},       {"op", p.op},
          {"route", p.route}, {"accumulate", accumulate_name(p.accumulate)},
          {"deterministic", p.deterministic}, {"scratch_bytes", p.scratch_bytes},
          {"stages", stages}, {"why", p.why},
          {"passed_over", passed}};
}

}  // namespace cake
