// elementwise ops: add and cast (with accumulate), and the stage binder other families'
// composed routes use for their elementwise second stage.
#include <algorithm>

#include "error.hpp"
#include "op_family.hpp"

namespace cake::ops {
namespace {

// Kernel parameters, in order, of each elementwise template (smxx_elementwise.cuh); every
// kernel ends with the element count n.
const std::map<std::string, std::vector<std::string>> kParams = {
    {"add", {"out", "a", "b"}}, {"cast", {"out", "in"}}, {"cast_accumulate", {"out", "in"}}};

// A stage of an elementwise program over n elements. Kernel parameters are resolved through
// the stage's bind map ("out" -> "scratch", ...), so the same binding serves other
// families' composed routes.
Binder elementwise_binder(int64_t n, int sm_count) {
  return [n, sm_count](const Plan&, const PlannedStage& s, const ArgMap& args, LaunchStage& ls) {
    const auto& params = s.program->params;
    const std::string op = params.at("op").get<std::string>();
    const int vec = params.at("vec").get<int>();
    for (const auto& param : kParams.at(op)) {
      auto bound = s.bind.find(param);
      const std::string& arg = bound == s.bind.end() ? param : bound->second;
      ls.args.add(reinterpret_cast<void*>(args.at(arg)));
    }
    ls.args.add(static_cast<long long>(n));
    // A grid-stride loop: enough blocks to fill the chip a few times over, no more.
    const int64_t threads = 256;
    const int64_t groups = n / vec;
    const int64_t blocks = std::clamp<int64_t>((groups + threads - 1) / threads, 1, int64_t(sm_count) * 8);
    ls.grid[0] = unsigned(blocks);
    ls.block[0] = unsigned(threads);
  };
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
      }};
  return family;
}

}  // namespace cake::ops
