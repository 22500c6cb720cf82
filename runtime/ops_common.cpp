#include "ops_common.hpp"

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

int64_t int_param_or_zero(const PlannedStage& s, const char* name) {
  const auto it = s.program->params.find(name);
  return it == s.program->params.end() ? 0 : it->get<int64_t>();
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

Launch build_launch(Runtime& rt, const DeviceContext& dc, const PlanResult* plan,
                    ArgMap args, const Binder& bind, std::optional<CUstream> one_call_stream) {
  ContextGuard guard(dc.ctx);
  const Plan& p = *plan->plan;
  DeviceBuffer scratch = one_call_stream ? DeviceBuffer(size_t(p.scratch_bytes), *one_call_stream)
                                         : DeviceBuffer(size_t(p.scratch_bytes));
  if (p.scratch_bytes > 0) args["scratch"] = scratch.get();
  int64_t words = 0, ws_bytes = 0;
  const int64_t sms = dc.info->sm_count;
  for (const auto& s : p.stages) {
    words += int_param_or_zero(s, "counters");
    ws_bytes += int_param_or_zero(s, "workspace_per_sm") * sms;
  }
  DeviceBuffer counters = words > 0 ? zeroed_counters(words, one_call_stream) : DeviceBuffer();
  DeviceBuffer workspace;
  if (ws_bytes > 0)
    workspace = one_call_stream ? DeviceBuffer(size_t(ws_bytes), *one_call_stream) : DeviceBuffer(size_t(ws_bytes));
  std::vector<LaunchStage> stages;
  int64_t counter_offset = 0, ws_offset = 0;
  for (const auto& s : p.stages) {
    if (const int64_t w = int_param_or_zero(s, "counters"); w > 0) {  // this stage's own counters
      args["counters"] = counters.get() + CUdeviceptr(counter_offset * 4);
      counter_offset += w;
    } else {
      args.erase("counters");
    }
    if (const int64_t b = int_param_or_zero(s, "workspace_per_sm") * sms; b > 0) {  // and workspace
      args["workspace"] = workspace.get() + CUdeviceptr(ws_offset);
      ws_offset += b;
    } else {
      args.erase("workspace");
    }
    LaunchStage ls;
    // A program with a stand-in that would have to compile first runs the stand-in (the same
    // bits) until it has compiled in the background.
    const Program* stand_in = s.program->stand_in.empty() ? nullptr : rt.registry().program(s.program->stand_in);
    const Build* stand_in_build = stand_in ? rt.registry().build(stand_in->name, s.build->arch) : nullptr;
    bool stood_in = false;
    ls.function = rt.loader().function(*s.program, *s.build, s.kernel, dc.ctx, stand_in, stand_in_build, &stood_in);
    if (stood_in) ls.stand_in = stand_in->name;
    bind(p, s, args, ls);
    // Kernels above the 48 KiB default opt in once; the planner has already passed over
    // programs that need more than the device allows.
    if (ls.function && ls.smem > 0) rt.loader().ensure_dynamic_smem(ls.function, int(ls.smem));
    // Launches after the program has compiled run it instead.
    if (stood_in) ls.swap = rt.loader().swap_when_ready(*s.program, *s.build, s.kernel, dc.ctx, int(ls.smem));
    stages.push_back(std::move(ls));
  }
  return Launch(dc.ctx, plan, std::move(stages), std::move(scratch), std::move(counters), std::move(workspace));
}

Launch prepare_planned(Runtime& rt, const DeviceContext& dc, const Problem& problem, ArgMap args,
                       const Binder& bind, std::optional<CUstream> one_call_stream) {
  for (;;) {
    const PlanResult* plan = plan_or_throw(rt, problem, dc);
    try {
      return build_launch(rt, dc, plan, args, bind, one_call_stream);
    } catch (const CompileError& e) {
      rt.mark_failed(e.program() + "@" + e.arch(), std::string(e.what()).substr(0, 300));
    }
  }
}

}  // namespace cake::ops
