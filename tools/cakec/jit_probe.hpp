// The small calls `cakec bench jit` times on a GPU: first calls of a few programs in a new
// process, an in-memory prepare, a cached plan lookup, and a prepared launch against a raw
// cuLaunchKernel of the same kernel. One family folder provides them (make_jit_probe), so this
// command stays generic.
#pragma once
#include <cuda.h>

#include <memory>
#include <regex>
#include <vector>

#include "ops.hpp"
#include "planner.hpp"

namespace cakec {

class JitProbe {
 public:
  virtual ~JitProbe() = default;
  // How many calls there are; each runs another program.
  virtual int calls() const = 0;
  // Prepares call i (0 <= i < calls()) on device tensors the probe owns.
  virtual cake::Launch prepare(cake::Runtime& rt, int i) = 0;
  // The planner problem of call 0, as prepare() poses it.
  virtual cake::Problem problem() const = 0;
  // The programs the calls run, for a prebuild into aot/.
  virtual std::regex programs() const = 0;
  // Launches call 0's kernel `fn` raw, with the arguments and geometry its Launch uses.
  virtual void launch_raw(CUfunction fn, CUstream stream, int sm_count) = 0;
};

// Device tensors in the current context.
std::unique_ptr<JitProbe> make_jit_probe();

}  // namespace cakec
