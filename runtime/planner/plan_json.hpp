// A plan as data, for callers that read it rather than print it (`cakec plan --json`, the C
// ABI's cake_plan, the Python package). format_plan is the same plan as text.
#pragma once
#include <nlohmann/json.hpp>

#include "planner.hpp"

namespace cake {

// With a route: {"ok": true, "op", "route", "accumulate", "deterministic", "scratch_bytes",
// "why", "stages": [{"program", "kernel", "arch", "build", "served_by", "bind", and for an
// instance of a parametric program "instance": {"of", "values"}}], "passed_over":
// [{"candidate", "reason", "detail"}]}. Without: {"ok": false, "error", "passed_over"}.
nlohmann::json plan_json(const PlanResult& result);

}  // namespace cake
