// The arguments of `cakec plan` and their conversion to a planner problem; a function of
// its own so the fuzzer can drive it without a process per input.
#pragma once
#include <string>
#include <vector>

#include "planner.hpp"

namespace cakec {

struct PlanArgs {
  std::string op, arch;
  int sms = 0;
  std::vector<std::string> dims, dtypes, aligns;
  bool accumulate = false, nondeterministic = false, json = false;
};

// Throws UsageError (naming the option) on a malformed --dim, --dtype or --align.
cake::Problem build_problem(const PlanArgs& a);

}  // namespace cakec
