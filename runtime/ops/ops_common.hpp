// What every op's prepare shares: turning a plan into a Launch. The op supplies, per stage,
// how to pack the kernel's arguments and its geometry (a Binder); scratch is allocated here.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch.hpp"
#include "ops.hpp"
#include "runtime.hpp"
#include "tensor.hpp"

namespace cake {
// The Runtime's loader, for the ops layer only (binders and the generic prepare).
Loader& loader_of(Runtime& rt);
}  // namespace cake

namespace cake::ops {

// Call arguments by name ("out", "a", ...), plus "scratch" once it is allocated, and for a
// stage whose program has "counters" in its params, "counters": that many int32 words, zero at
// every launch (the kernel must leave them zero when it finishes); for one with
// "workspace_per_sm", "workspace": that many bytes per SM of the device, not zeroed.
using ArgMap = std::map<std::string, uintptr_t>;

// Packs one stage's kernel arguments and sets its geometry; it sees the whole plan, since a
// later stage can depend on an earlier one's kernel (a finalize on the chunking it used).
using Binder = std::function<void(const Plan& plan, const PlannedStage& stage, const ArgMap& args,
                                  LaunchStage& out)>;

}  // namespace cake::ops

namespace cake {
// One tensor of a launch's last checked bind (prepare's or ops::rebind's), as
// ops::rebind_data checks new addresses against it.
struct BoundTensor {
  std::string name;
  bool output = false;
  uintptr_t data = 0;   // its address then: which tensors were one and the same
  uintptr_t bytes = 0;  // its extent from data (0: no elements)
  int align = 1;        // the alignment the problem was planned with
};

// The call a prepared launch serves, kept with it so that ops::rebind can bind it to new
// tensors of the same problem, and what its last checked bind made, so that
// ops::rebind_data can bind new addresses of the same tensors without the checks again.
struct LaunchOrigin {
  Runtime* rt = nullptr;
  std::string op;
  ops::OpOptions options;
  Problem problem;
  int device = 0;
  std::vector<BoundTensor> tensors;  // in the order the call gave them
  ops::ArgMap args;                  // the family's kernel arguments, each tensor's address by its name
  ops::Binder bind;
  int64_t sms = 0;                   // the device's, for the per-SM workspace
  enum class Kind { kernels, noop, zero_fill } kind = Kind::kernels;
  std::string zero_fill_arg;         // the tensor a zero fill clears
  size_t zero_fill_bytes = 0;        // and how many bytes of it
};
}  // namespace cake

namespace cake::ops {

// An integer in a stage's program params (checked at registry load), 0 where absent:
// "counters" (int32 words the kernels keep in global memory), "workspace_per_sm" (bytes per SM).
int64_t int_param_or_zero(const PlannedStage& s, const char* name);

// Every tensor's memory, checked once at prepare (cuPointerGetAttributes), so a launch never
// reads an address its device cannot: device memory of the tensor's device, or managed or
// mapped pinned host memory the device reaches at that address; the whole extent
// [data, end) inside the allocation. An ArgumentError names the tensor otherwise. Empty
// tensors are not checked (nothing is read or written through them); nor, for a one-call op
// on a capturing stream, an address CUDA does not know yet (a graph's own allocation).
void check_memory(const DeviceContext& dc, const std::vector<const TensorView*>& tensors,
                  std::optional<CUstream> one_call_stream = {});

// The options' own checks (an ArgumentError naming the option), before anything else.
void check_options(const OpOptions& opt);
// The SM count a launch may fill: the device's, or opt.max_sms when smaller.
int grid_sms(const DeviceContext& dc, const OpOptions& opt);

// How many blocks of `fn` (threads, dynamic shared memory bytes) one SM holds at once, for
// persistent kernels; the shared-memory opt-in comes first, since the answer depends on it.
int resident_blocks(Runtime& rt, CUfunction fn, int threads, int smem);

// Plans `problem` on the context's device (ArgumentError-free inputs assumed), throws a
// cake::Error listing every candidate's reason when there is no route.
const PlanResult* plan_or_throw(Runtime& rt, const Problem& problem, const DeviceContext& dc);

// The scratch's arguments: "scratch" (its start) and "scratch.i", the i-th buffer's (Scratch).
void scratch_args(ArgMap& args, const Plan& plan, CUdeviceptr scratch);

// Sets a stage's "counters" and "workspace" arguments: its share of the launch's counters
// (int32 words from `counters`) and workspace (bytes per SM from `workspace`), after the
// shares of the stages before it (`counter_offset`, `workspace_offset`, advanced here); erased
// for a stage that has none.
void stage_memory_args(ArgMap& args, const PlannedStage& s, int64_t sms, CUdeviceptr counters,
                       int64_t& counter_offset, CUdeviceptr workspace, int64_t& workspace_offset);

// Plans and builds the launch. A stage whose build fails to compile (error, crash,
// timeout) marks that build unavailable and the call is planned again, so the next
// candidate (or the composed route) serves it; with none left, the no-route error lists why.
Launch prepare_planned(Runtime& rt, const DeviceContext& dc, const Problem& problem, ArgMap args,
                       const Binder& bind, std::optional<CUstream> one_call_stream = {},
                       bool external_memory = false);

// `one_call_stream`: set by the one-call forms, whose scratch is allocated and freed in
// stream order on that stream; prepared launches own a plain allocation instead.
// `external_memory`: no allocation; the stages are bound to a block at address 0 (its offsets)
// until ops::rebind gives the caller's (OpOptions::external_memory).
Launch build_launch(Runtime& rt, const DeviceContext& dc, const PlanResult* plan,
                    ArgMap args, const Binder& bind, std::optional<CUstream> one_call_stream = {},
                    bool external_memory = false);

}  // namespace cake::ops
