// The public C++ ops API: prepare -> launch, one entry point for every op of every family.
// prepare() checks the tensors against the op's schema and every argument (an ArgumentError
// naming it, before anything is launched or written), plans, loads the kernels and allocates
// the scratch the plan needs; Launch::launch(stream) then only enqueues. run() does both on a
// stream. Each family's typed wrappers and the semantics of its ops are in its own header
// (runtime/ops/<family>/<family>_ops.hpp); docs/families.md lists them.
#pragma once
#include <cuda.h>
#include <dlpack/dlpack.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch.hpp"
#include "prebuild.hpp"
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
  // For ops that accumulate (out += result); an ArgumentError for any other op.
  bool accumulate = false;
  // For ops that take an epsilon (they need one); an ArgumentError for any other op.
  std::optional<float> eps;
  // The launch allocates no scratch, counters or workspace: Launch::memory_bytes() says how
  // large a block they need, and the caller gives one (from its own allocator) with every
  // rebind, before launching. Prepared launches only (not ops::run).
  bool external_memory = false;
};

// The tensors of a call by argument name, as the op's schema names them (`cakec plan` and
// docs/families.md list them). An optional argument is left out, not given as null.
using NamedTensors = std::vector<std::pair<std::string, const DLTensor*>>;

// Validates, plans, loads and allocates: the Launch replays the call with no allocation, no
// compile and no host synchronisation (capture it in a CUDA graph).
Launch prepare(Runtime& rt, const std::string& op, const NamedTensors& tensors, const OpOptions& opt = {});

// Binds a prepared launch to new tensors of the same problem (a training step's next batch):
// the names, views, the family's checks and the memory checks run as in prepare, and the
// problem they make (shapes, dtypes, alignments, options, device) must be the launch's; the
// plan, the loaded kernels and the launch's scratch are reused, so nothing is planned, loaded
// or allocated. An ArgumentError (the launch unchanged) when a check fails or the problem
// differs. Launches already enqueued keep the tensors they were enqueued with; one Launch's
// launches still run in stream order (they share its scratch).
// `memory`: with external memory, the block of at least launch.memory_bytes() bytes (256-byte
// aligned, on the tensors' device) the launches from now on use; 0 otherwise.
void rebind(Launch& launch, const NamedTensors& tensors, CUdeviceptr memory = 0);

// rebind's fast form, for a caller that vouches that its new tensors are laid out as those of
// the launch's last checked bind (prepare's or rebind's): the same names in the same order,
// shapes, strides, dtypes and device; a framework that keys its launches on that layout.
// `data[i]` is the i-th tensor's address (with any byte offset added). Checked: the count,
// null addresses, each address's alignment against the one the problem was planned with, and
// that an output meets another tensor only as it did then (apart, or the very same tensor);
// `memory` as rebind takes it (null and alignment only). Not checked, unlike rebind: that the
// memory is the device's and spans the tensor, so a broken promise is a wrong address in a
// kernel. Nothing is planned, loaded or allocated on the device; the binders pack again.
// An ArgumentError, the launch unchanged, when a check fails.
void rebind_data(Launch& launch, const CUdeviceptr* data, size_t n, CUdeviceptr memory = 0);

// One call: prepare and launch on `stream`; scratch is allocated and freed in stream order.
void run(Runtime& rt, const std::string& op, const NamedTensors& tensors, CUstream stream,
         const OpOptions& opt = {});

// Completes a problem as a call with ordinary tensors would make it: a required tensor whose
// dtype is not given has that of the first given tensor when the argument takes it (f32
// everywhere once out=f32), else the argument's first dtype; every tensor is 256-byte aligned,
// as allocators give. Optional tensors stay out. Returns what it assumed ("y=bf16, rstd=f32"),
// or "" for an op no family declares (a user registry's).
std::string complete_problem(Problem& p);

// Compiles (or loads from aot/ and the disk cache) every program the planner picks for
// `problems` on `device` (default: device 0), in parallel, so that their first calls compile
// nothing: call it once before the first step with the shapes the job will run. A problem
// names its op, dims and dtypes as `cakec plan` takes them; tensors not given take the op's
// usual dtypes, 256-byte aligned (complete_problem). `built`: compiled by this call;
// `up_to_date`: served from aot/, the disk cache or memory; `skipped`: problems with no route
// and why; a build that fails is reported and passed over by later plans.
PrebuildSummary prebuild_for(Runtime& rt, std::vector<Problem> problems, std::optional<Device> device = {});

}  // namespace cake::ops
