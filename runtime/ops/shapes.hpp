// The problems a job will run (a shapes file: a model's hidden size, expert count, token
// counts) and the builds the planner picks for them, so that exactly those are compiled ahead
// of the first step: `cakec build --shapes` into aot/, `cakec doctor --strict --shapes` to
// see what would still compile, ops::prebuild_for into a running process.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ops.hpp"
#include "planner.hpp"

namespace cake::ops {

struct Shapes {
  std::optional<Arch> arch;  // "arch": the devices' arch, when the file says
  int sms = 0;               // "sms": their SM count (0: not said)
  int max_smem = 0;          // "max_smem": opt-in shared memory per block (0: not checked)
  std::vector<Problem> problems;
};

// {"arch": "sm_90a", "sms": 132, "problems": [{"op": "<family>.<op>", "dims": {"t": 65536,
// "h": 7168}, "dtypes": {"w": "bf16"}, "accumulate": false, "deterministic": true}, ...]};
// each problem completed by complete_problem (docs/design.md has an example). Throws
// cake::Error naming the file and the JSON path (an unknown op or member, a bad value).
Shapes parse_shapes(const std::string& text, const std::string& file);
Shapes read_shapes(const std::filesystem::path& file);

struct ShapePlans {
  std::vector<PlannedStage> stages;  // one per distinct build, in problem order
  // Per problem: its route ("" when it has none) and, when none, why (each candidate's reason).
  std::vector<std::string> routes, errors;
};

// What `planner` picks for each problem on `device`: the distinct builds their stages run.
ShapePlans plan_shapes(const Planner& planner, const std::vector<Problem>& problems, const Device& device);

}  // namespace cake::ops
