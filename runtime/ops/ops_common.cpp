#include "ops_common.hpp"

#include <iterator>

#include "driver.hpp"
#include "error.hpp"

namespace cake::ops {

void check_options(const OpOptions& opt) {
  if (opt.max_sms < 0) throw ArgumentError("max_sms", "must be >= 0 (0: every SM), got " + std::to_string(opt.max_sms));
}

int grid_sms(const DeviceContext& dc, const OpOptions& opt) {
  check_options(opt);
  const int sms = dc.info->sm_count;
  return opt.max_sms > 0 && opt.max_sms < sms ? opt.max_sms : sms;
}

const PlanResult* plan_or_throw(Runtime& rt, const Problem& problem, const DeviceContext& dc) {
  const PlanResult* plan = &rt.plan(problem, dc.device());
  if (!plan->ok()) {
    std::string reasons;
    for (const auto& r : plan->rejections) reasons += "\n  " + r.candidate + ": " + r.reason + " - " + r.detail;
    throw Error(plan->error + reasons);
  }
  return plan;
}

int resident_blocks(Runtime& rt, CUfunction fn, int threads, int smem) {
  return loader_of(rt).resident_blocks(fn, threads, smem);
}

int64_t int_param_or_zero(const PlannedStage& s, const char* name) {
  const auto it = s.program->params->find(name);
  return it == s.program->params->end() ? 0 : it->get<int64_t>();
}

namespace {

struct PointerFacts {
  unsigned memory_type = 0;  // 0: not memory CUDA knows (pageable host memory, or nothing yet)
  int ordinal = -1;
  unsigned managed = 0, mapped = 0;  // int-sized, though the header calls them boolean
  CUdeviceptr range_start = 0, device_pointer = 0;
  size_t range_size = 0;
};

PointerFacts pointer_facts(uintptr_t address) {
  PointerFacts f;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_MAPPED,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&f.memory_type, &f.ordinal, &f.managed, &f.mapped, &f.range_start, &f.range_size};
  // Unlike cuPointerGetAttribute, this one succeeds for an address CUDA does not know and
  // leaves its outputs at their defaults.
  CAKE_CU(cuPointerGetAttributes(unsigned(std::size(attrs)), attrs, data, CUdeviceptr(address)));
  // Asked apart: for memory the current context cannot reach it fails the whole call.
  if (f.memory_type == CU_MEMORYTYPE_HOST) {
    CUpointer_attribute dp[] = {CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    void* dd[] = {&f.device_pointer};
    if (Driver::instance().api().cuPointerGetAttributes(1, dp, dd, CUdeviceptr(address)) != CUDA_SUCCESS)
      f.device_pointer = 0;
  }
  return f;
}

// Why the device cannot read `address` as the tensor's memory, or "" when it can.
std::string unreachable(const PointerFacts& f, uintptr_t address, int device) {
  const std::string dev = "cuda:" + std::to_string(device);
  if (f.managed) return "";
  if (f.memory_type == CU_MEMORYTYPE_HOST)
    return f.device_pointer == CUdeviceptr(address) ? "" : "pinned host memory not mapped for " + dev;
  if (f.memory_type != CU_MEMORYTYPE_DEVICE) return "host memory (or no allocation), not on " + dev;
  if (f.ordinal != device) return "memory of cuda:" + std::to_string(f.ordinal) + ", not on " + dev;
  if (!f.mapped) return "an address range with no memory mapped at it";
  return "";
}

bool capturing(std::optional<CUstream> stream) {
  if (!stream) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return Driver::instance().api().cuStreamIsCapturing(*stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace

void check_memory(const DeviceContext& dc, const std::vector<const TensorView*>& tensors,
                  std::optional<CUstream> one_call_stream) {
  ContextGuard guard(dc.ctx);
  const bool in_capture = capturing(one_call_stream);
  for (const TensorView* t : tensors) {
    if (t == nullptr || t->numel() == 0) continue;
    const PointerFacts first = pointer_facts(t->data);
    // In a stream capture a graph's own allocation (cuMemAllocAsync captured as a memory
    // node) has no memory behind it until the graph runs: nothing to ask about yet.
    if (first.memory_type == 0 && in_capture) continue;
    if (std::string why = unreachable(first, t->data, t->device); !why.empty()) throw ArgumentError(t->name, why);
    const uintptr_t end = t->end();
    if (first.range_size > 0 && end > first.range_start + first.range_size)
      throw ArgumentError(t->name, "extends past its allocation (by " +
                                       std::to_string(end - (first.range_start + first.range_size)) + " bytes)");
    // A reserved range (cuMemAddressReserve, as torch's expandable segments use) may be
    // mapped only in part: the last byte must be reachable too.
    const PointerFacts last = pointer_facts(end - 1);
    if (std::string why = unreachable(last, end - 1, t->device); !why.empty())
      throw ArgumentError(t->name, "extends past its allocation (its last byte: " + why + ")");
  }
}

namespace {

// Zeroed counters for a launch: on the one-call stream in its order, else on a stream of their
// own that is waited for here, so no stream the launch may later run on can overtake the fill.
DeviceBuffer zeroed_counters(int64_t words, std::optional<CUstream> one_call_stream) {
  const size_t bytes = size_t(words) * 4;
  if (one_call_stream) {
    DeviceBuffer b(bytes, *one_call_stream);
    CAKE_CU(cuMemsetD32Async(b.get(), 0u, size_t(words), *one_call_stream));
    return b;
  }
  DeviceBuffer b(bytes);
  CUstream s;
  CAKE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUresult r = Driver::instance().api().cuMemsetD32Async(b.get(), 0u, size_t(words), s);
  if (r == CUDA_SUCCESS) r = Driver::instance().api().cuStreamSynchronize(s);
  Driver::instance().api().cuStreamDestroy(s);
  if (r != CUDA_SUCCESS) throw_driver_error("cuMemsetD32Async (launch counters)", r);
  return b;
}

}  // namespace

void scratch_args(ArgMap& args, const Plan& plan, CUdeviceptr scratch) {
  if (plan.scratch_bytes <= 0) return;
  args["scratch"] = scratch;
  for (size_t i = 0; i < plan.scratch_offsets.size(); ++i)
    args["scratch." + std::to_string(i)] = scratch + CUdeviceptr(plan.scratch_offsets[i]);
}

void stage_memory_args(ArgMap& args, const PlannedStage& s, int64_t sms, CUdeviceptr counters,
                       int64_t& counter_offset, CUdeviceptr workspace, int64_t& workspace_offset) {
  if (const int64_t w = int_param_or_zero(s, "counters"); w > 0) {
    args["counters"] = counters + CUdeviceptr(counter_offset * 4);
    counter_offset += w;
  } else {
    args.erase("counters");
  }
  if (const int64_t b = int_param_or_zero(s, "workspace_per_sm") * sms; b > 0) {
    args["workspace"] = workspace + CUdeviceptr(workspace_offset);
    workspace_offset += b;
  } else {
    args.erase("workspace");
  }
}

Launch build_launch(Runtime& rt, const DeviceContext& dc, const PlanResult* plan,
                    ArgMap args, const Binder& bind, std::optional<CUstream> one_call_stream, bool external_memory) {
  ContextGuard guard(dc.ctx);
  const Plan& p = *plan->plan;
  int64_t words = 0, ws_bytes = 0;
  const int64_t sms = dc.info->sm_count;
  for (const auto& s : p.stages) {
    words += int_param_or_zero(s, "counters");
    ws_bytes += int_param_or_zero(s, "workspace_per_sm") * sms;
  }
  const LaunchMemory needs{size_t(p.scratch_bytes), size_t(ws_bytes), size_t(words) * 4};
  DeviceBuffer scratch, counters, workspace;
  if (!external_memory) {
    scratch = one_call_stream ? DeviceBuffer(needs.scratch, *one_call_stream) : DeviceBuffer(needs.scratch);
    if (words > 0) counters = zeroed_counters(words, one_call_stream);
    if (ws_bytes > 0)
      workspace = one_call_stream ? DeviceBuffer(needs.workspace, *one_call_stream) : DeviceBuffer(needs.workspace);
  }
  const CUdeviceptr scratch_at = external_memory ? 0 : scratch.get();
  const CUdeviceptr counters_at = external_memory ? CUdeviceptr(needs.counters_at()) : counters.get();
  const CUdeviceptr workspace_at = external_memory ? CUdeviceptr(needs.workspace_at()) : workspace.get();
  scratch_args(args, p, scratch_at);
  std::vector<LaunchStage> stages;
  int64_t counter_offset = 0, ws_offset = 0;
  for (const auto& s : p.stages) {
    stage_memory_args(args, s, sms, counters_at, counter_offset, workspace_at, ws_offset);
    LaunchStage ls;
    // A program with a stand-in that would have to compile first runs the stand-in (the same
    // bits) until it has compiled in the background.
    const Program* stand_in = s.program->stand_in.empty() ? nullptr : rt.registry().program(s.program->stand_in);
    const Build* stand_in_build = stand_in ? rt.registry().build(stand_in->name, s.build->arch) : nullptr;
    bool stood_in = false;
    ls.function = loader_of(rt).function(*s.program, *s.build, s.kernel, dc.ctx, stand_in, stand_in_build, &stood_in);
    if (stood_in) ls.stand_in = stand_in->name;
    bind(p, s, args, ls);
    // Kernels above the 48 KiB default opt in once; the planner has already passed over
    // programs that need more than the device allows.
    if (ls.function && ls.smem > 0) loader_of(rt).ensure_dynamic_smem(ls.function, int(ls.smem));
    // Launches after the program has compiled run it instead.
    if (stood_in) ls.swap = loader_of(rt).swap_when_ready(*s.program, *s.build, s.kernel, dc.ctx, int(ls.smem));
    stages.push_back(std::move(ls));
  }
  if (external_memory) return Launch::external(dc.ctx, plan, std::move(stages), needs);
  return Launch(dc.ctx, plan, std::move(stages), std::move(scratch), std::move(counters), std::move(workspace));
}

Launch prepare_planned(Runtime& rt, const DeviceContext& dc, const Problem& problem, ArgMap args,
                       const Binder& bind, std::optional<CUstream> one_call_stream, bool external_memory) {
  for (;;) {
    const PlanResult* plan = plan_or_throw(rt, problem, dc);
    try {
      return build_launch(rt, dc, plan, args, bind, one_call_stream, external_memory);
    } catch (const CompileError& e) {
      rt.mark_failed(e.program() + "@" + e.arch(), std::string(e.what()).substr(0, 300));
    }
  }
}

}  // namespace cake::ops
