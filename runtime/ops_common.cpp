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

Launch build_launch(Runtime& rt, const DeviceContext& dc, const PlanResult* plan,
                    ArgMap args, const Binder& bind, std::optional<CUstream> one_call_stream) {
  ContextGuard guard(dc.ctx);
  const Plan& p = *plan->plan;
  DeviceBuffer scratch = one_call_stream ? DeviceBuffer(size_t(p.scratch_bytes), *one_call_stream)
                                         : DeviceBuffer(size_t(p.scratch_bytes));
  if (p.scratch_bytes > 0) args["scratch"] = scratch.get();
  std::vector<LaunchStage> stages;
  for (const auto& s : p.stages) {
    LaunchStage ls;
    ls.function = rt.loader().function(*s.program, *s.build, s.kernel, dc.ctx);
    bind(p, s, args, ls);
    // Kernels above the 48 KiB default opt in once; the planner has already passed over
    // programs that need more than the device allows.
    if (ls.function && ls.smem > 0) rt.loader().ensure_dynamic_smem(ls.function, int(ls.smem));
    stages.push_back(std::move(ls));
  }
  return Launch(dc.ctx, plan, std::move(stages), std::move(scratch));
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
