// The public C++ ops API: prepare -> launch. A prepare validates every argument (an
// ArgumentError naming it, before anything is launched or written), plans, loads the
// kernels and allocates the scratch the plan needs; Launch::launch(stream) then only
// enqueues. Each family's typed prepare functions are in its own header
// (runtime/ops/<family>/<family>_ops.hpp).
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include <string>

#include "launch.hpp"
#include "runtime.hpp"

namespace cake::ops {

struct OpOptions {
  bool deterministic = true;  // false admits non-deterministic routes
  // Empty: the planner's choice. Otherwise only the route candidate of this name (as
  // `cakec list-routes` shows it) is considered; if it cannot serve the call, the error
  // says why. Tests use it to run the portable programs on a Hopper part.
  std::string candidate;
  // > 0: kernels get at most this many SMs' worth of blocks (persistent and grid-stride
  // kernels), leaving the rest of the GPU to concurrent work (communication kernels, say).
  // Results do not depend on it: every route's bits are the same for any grid.
  int max_sms = 0;
};

}  // namespace cake::ops
