// elementwise ops: add and cast (with accumulate), on top of the registry's routes.
#include <algorithm>

#include "error.hpp"
#include "elementwise_ops.hpp"
#include "ops_common.hpp"

namespace cake::ops {
namespace {

// Kernel parameters, in order, of each elementwise template (smxx_elementwise.cuh); every
// kernel ends with the element count n.
const std::map<std::string, std::vector<std::string>> kParams = {
    {"add", {"out", "a", "b"}}, {"cast", {"out", "in"}}, {"cast_accumulate", {"out", "in"}}};

}  // namespace

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

namespace {

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

}  // namespace

namespace {

Launch make_add(Runtime& rt, const DLTensor& out_t, const DLTensor& a_t, const DLTensor& b_t,
                const OpOptions& opt, std::optional<CUstream> one_call) {
  check_options(opt);
  TensorView out = view(out_t, "out"), a = view(a_t, "a"), b = view(b_t, "b");
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
  int64_t n = out.numel();
  DeviceContext dc = rt.context_for(out.device);
  check_memory(dc, {&out, &a, &b}, one_call);
  if (n == 0) return Launch(dc.ctx, nullptr, {}, DeviceBuffer());
  return prepare_planned(rt, dc, base_problem("elementwise.add", {&out, &a, &b}, n, opt),
                         {{"out", out.data}, {"a", a.data}, {"b", b.data}},
                         elementwise_binder(n, grid_sms(dc, opt)), one_call);
}

Launch make_cast(Runtime& rt, const DLTensor& out_t, const DLTensor& in_t, bool accumulate,
                 const OpOptions& opt, std::optional<CUstream> one_call) {
  check_options(opt);
  TensorView out = view(out_t, "out"), in = view(in_t, "in");
  require_dtype(out, {DType::f32, DType::bf16});
  require_dtype(in, {DType::f32, DType::bf16});
  if (!accumulate && out.dtype == in.dtype)
    throw ArgumentError("out", "a cast needs different dtypes (out and in are both " +
                                   std::string(dtype_name(out.dtype)) + ")");
  require_same_device(out, in);
  require_same_numel(out, in);
  require_contiguous(out);
  require_contiguous(in);
  require_no_overlap(out, in);
  int64_t n = out.numel();
  DeviceContext dc = rt.context_for(out.device);
  check_memory(dc, {&out, &in}, one_call);
  if (n == 0) return Launch(dc.ctx, nullptr, {}, DeviceBuffer());
  Problem p = base_problem("elementwise.cast", {&out, &in}, n, opt);
  p.accumulate = accumulate;
  return prepare_planned(rt, dc, p, {{"out", out.data}, {"in", in.data}},
                         elementwise_binder(n, grid_sms(dc, opt)), one_call);
}

}  // namespace

Launch prepare_add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b,
                   const OpOptions& opt) {
  return make_add(rt, out, a, b, opt, std::nullopt);
}

Launch prepare_cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate,
                    const OpOptions& opt) {
  return make_cast(rt, out, in, accumulate, opt, std::nullopt);
}

void add(Runtime& rt, const DLTensor& out, const DLTensor& a, const DLTensor& b, CUstream stream,
         const OpOptions& opt) {
  make_add(rt, out, a, b, opt, stream).launch(stream);
}

void cast(Runtime& rt, const DLTensor& out, const DLTensor& in, bool accumulate, CUstream stream,
          const OpOptions& opt) {
  make_cast(rt, out, in, accumulate, opt, stream).launch(stream);
}

}  // namespace cake::ops
