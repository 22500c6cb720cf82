// elementwise ops: add and cast (with accumulate), and the stage binder other families'
// composed routes use for their elementwise second stage.
#include <algorithm>

#include "elementwise_contract.h"
#include "error.hpp"
#include "op_family.hpp"

namespace cake::ops {
namespace {

// The tensors each elementwise kernel reads, by parameter name: they fill ElementwiseArgs'
// `a` and `b` (elementwise_contract.h).
const std::map<std::string, std::vector<std::string>> kInputs = {
    {"add", {"a", "b"}}, {"cast", {"in"}}, {"cast_accumulate", {"in"}}};

// A stage of an elementwise program over n elements. Kernel parameters are resolved through
// the stage's bind map ("out" -> "scratch", ...), so the same binding serves other
// families' composed routes.
Binder elementwise_binder(int64_t n, int sm_count) {
  return [n, sm_count](const Plan&, const PlannedStage& s, const ArgMap& args, LaunchStage& ls) {
    const auto& params = s.program->params;
    const std::string op = params->at("op").get<std::string>();
    const int vec = params->at("vec").get<int>();
    auto bound = [&](const std::string& param) {
      auto it = s.bind.find(param);
      return args.at(it == s.bind.end() ? param : it->second);
    };
    const std::vector<std::string>& inputs = kInputs.at(op);
    ew::ElementwiseArgs k{};
    k.out = reinterpret_cast<void*>(bound("out"));
    k.a = reinterpret_cast<const void*>(bound(inputs[0]));
    k.b = inputs.size() > 1 ? reinterpret_cast<const void*>(bound(inputs[1])) : nullptr;
    k.n = n;
    ls.args.add(k);
    // A grid-stride loop: enough blocks to fill the chip a few times over, no more.
    const int64_t threads = ew::kThreads;
    const int64_t groups = n / vec;
    const int64_t blocks = std::clamp<int64_t>((groups + threads - 1) / threads, 1, int64_t(sm_count) * 8);
    ls.grid[0] = unsigned(blocks);
    ls.block[0] = unsigned(threads);
  };
}

KernelArgs kernel_args(const Program& program, int) {
  if (!kInputs.count(program.params->value("op", ""))) return {};
  return {"cake::ew::ElementwiseArgs", sizeof(ew::ElementwiseArgs)};
}

Problem base_problem(const std::string& op, const std::vector<const TensorView*>& args, int64_t n,
                     const OpOptions& opt) {
  Problem p;
  p.op = op;
  p.dims["n"] = n;
  p.deterministic = opt.deterministic;
  p.candidate = opt.candidate;
  for (const TensorView* t : args) {
    p.dtypes[t->name] = t->dtype;
    p.align[t->name] = t->alignment();
  }
  return p;
}

OpPlan check_add(const OpCall& call) {
  const TensorView &out = call.at("out"), &a = call.at("a"), &b = call.at("b");
  require_dtype(out, {DType::f32, DType::bf16});
  for (const TensorView* t : {&a, &b}) {
    if (t->dtype != out.dtype)
      throw ArgumentError(t->name, std::string("dtype ") + dtype_name(t->dtype) + " differs from out's " +
                                       dtype_name(out.dtype));
    require_same_device(out, *t);
    require_same_numel(out, *t);
  }
  for (const TensorView* t : {&out, &a, &b}) require_contiguous(*t);
  require_no_overlap(out, a, /*allow_exact_alias=*/true);
  require_no_overlap(out, b, /*allow_exact_alias=*/true);
  const int64_t n = out.numel();
  OpPlan p;
  p.device = out.device;
  p.noop = n == 0;
  p.problem = base_problem("elementwise.add", {&out, &a, &b}, n, call.options);
  p.args = {{"out", out.data}, {"a", a.data}, {"b", b.data}};
  p.binder = [n, opt = call.options](Runtime&, const DeviceContext& dc) { return elementwise_binder(n, grid_sms(dc, opt)); };
  return p;
}

OpPlan check_cast(const OpCall& call) {
  const TensorView &out = call.at("out"), &in = call.at("in");
  require_dtype(out, {DType::f32, DType::bf16});
  require_dtype(in, {DType::f32, DType::bf16});
  if (!call.options.accumulate && out.dtype == in.dtype)
    throw ArgumentError("out", "a cast needs different dtypes (out and in are both " +
                                   std::string(dtype_name(out.dtype)) + ")");
  require_same_device(out, in);
  require_same_numel(out, in);
  require_contiguous(out);
  require_contiguous(in);
  require_no_overlap(out, in);
  const int64_t n = out.numel();
  OpPlan p;
  p.device = out.device;
  p.noop = n == 0;
  p.problem = base_problem("elementwise.cast", {&out, &in}, n, call.options);
  p.problem.accumulate = call.options.accumulate;
  p.args = {{"out", out.data}, {"in", in.data}};
  p.binder = [n, opt = call.options](Runtime&, const DeviceContext& dc) { return elementwise_binder(n, grid_sms(dc, opt)); };
  return p;
}

}  // namespace

const FamilyOps& op_family_elementwise() {
  static const FamilyOps family{
      "elementwise",
      {{"elementwise.add",
        {{"out", {DType::f32, DType::bf16}, true}, {"a", {DType::f32, DType::bf16}}, {"b", {DType::f32, DType::bf16}}},
        false, false, check_add},
       {"elementwise.cast",
        {{"out", {DType::bf16, DType::f32}, true}, {"in", {DType::f32, DType::bf16}}},
        true, false, check_cast}},
      // The second half of other families' composed routes: out += scratch over their output.
      [](const Plan& plan, const PlannedStage& s, const ArgMap& args, int64_t elements, int sms, LaunchStage& ls) {
        elementwise_binder(elements, sms)(plan, s, args, ls);
      },
      kernel_args};
  return family;
}

}  // namespace cake::ops
