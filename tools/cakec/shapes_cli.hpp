// `cakec build --shapes FILE` and `cakec doctor --strict --shapes FILE`: the builds the
// planner picks for a job's problems (runtime/ops/shapes.hpp), prebuilt into aot/ or checked
// against it.
#pragma once
#include <string>

#include "cli_common.hpp"
#include "prebuild.hpp"

namespace cakec {

struct ShapesArgs {
  std::string file;
  std::string arch;  // --arch, else the file's "arch", else GPU 0's
  int sms = 0;       // --sms, else the file's "sms", else GPU 0's
};

// Prebuilds into opt.out exactly what the planner picks for the file's problems on their
// device, with JIT allowed: what a process would compile at its first calls.
int build_for_shapes(const Globals& g, const ShapesArgs& a, cake::PrebuildOptions opt);
// Lists each problem whose chosen route would still compile (served by JIT, not aot/), or that
// has no route without JIT; exit 1 if any.
int strict_for_shapes(const Globals& g, const ShapesArgs& a);

}  // namespace cakec
