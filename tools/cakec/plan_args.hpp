// The arguments of `cakec plan` and their conversion to a planner problem; a function of
// its own so the fuzzer can drive it without a process per input.
#pragma once
#include <string>
#include <vector>

#include "planner.hpp"

namespace cakec {

struct PlanArgs {
  std::string op, arch;
  std::string candidate;  // empty: the planner's choice
  int sms = 0;
  int max_smem = 0;  // opt-in dynamic smem per block; 0: not checked
  std::vector<std::string> dims, dtypes, aligns;
  bool accumulate = false, nondeterministic = false, json = false;
};

// Throws UsageError (naming the option) on a malformed --dim, --dtype or --align.
cake::Problem build_problem(const PlanArgs& a);

}  // namespace cakec
