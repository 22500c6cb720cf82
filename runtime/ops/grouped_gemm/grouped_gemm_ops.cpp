// grouped_gemm ops: ragged BF16 grouped GEMM for MoE experts (fwd, dgrad, wgrad with BF16 or
// FP32 output and accumulate), groups given by device offsets and never read on the host.
// The programs are the GEMM kernels of templates/common/ (gemm_contract.h), bound by
// runtime/ops/gemm_kernels.hpp.
#include "error.hpp"
#include "gemm_kernels.hpp"

namespace cake::ops {
namespace {

// Each op's tensors: the output, then the kernel's operands a and b, then offs, with their
// dims by letter (M, N, K, E). Contiguity also rules out an expanded or self-overlapping dw,
// which accumulate would read and write through several aliases.
const std::vector<OperandSpec>& specs(int op) {
  const std::vector<DType> bf16 = {DType::bf16};
  const OperandSpec offs{"offs", "E", {DType::i32}, false};
  static const std::vector<OperandSpec> fwd{{"y", "MN", bf16}, {"x", "MK", bf16}, {"w", "ENK", bf16}, offs};
  static const std::vector<OperandSpec> dgrad{{"dx", "MK", bf16}, {"g", "MN", bf16}, {"w", "ENK", bf16}, offs};
  static const std::vector<OperandSpec> wgrad{
      {"dw", "ENK", {DType::bf16, DType::f32}}, {"g", "MN", bf16}, {"x", "MK", bf16}, offs};
  return op == gemm::kOpFwd ? fwd : op == gemm::kOpDgrad ? dgrad : wgrad;
}

// One checked problem: the tensors (output first) and the dims M, N, K, E.
struct Checked {
  std::vector<TensorView> tensors;
  int64_t m = 0, n = 0, k = 0, e = 0;
};

Checked check(int op, const OpCall& call) {
  GemmOperands g = check_operands(call, specs(op));
  return {std::move(g.tensors), g.dims.at('M'), g.dims.at('N'), g.dims.at('K'), g.dims.at('E')};
}

OpPlan make_plan(int op, const char* op_name, const OpCall& call) {
  const Checked c = check(op, call);
  const OpOptions& opt = call.options;
  const TensorView& out = c.tensors[0];
  if (c.m == 0) return no_rows_plan(op, out, opt, "M = 0: every group is empty, dw is zeros");
  OpPlan p;
  p.device = out.device;
  p.problem = gemm_problem(op_name, {{"m", c.m}, {"n", c.n}, {"k", c.k}, {"e", c.e}}, c.tensors, opt);
  for (const auto& t : c.tensors) p.args[t.name] = t.data;
  p.composed_elements = c.e * c.n * c.k;  // a composed accumulate adds over dw
  const std::vector<OperandSpec>& names = specs(op);
  const GemmCall gemm{op, c.m, c.n, c.k, c.e, names[1].name, names[2].name, names[0].name, "offs"};
  p.binder = [gemm, opt](Runtime& rt, const DeviceContext& dc) {
    return gemm_binder(rt, gemm, grid_sms(dc, opt), dc.info->sm_count);
  };
  return p;
}

}  // namespace

const FamilyOps& op_family_grouped_gemm() {
  const std::vector<DType> bf16 = {DType::bf16};
  const std::vector<DType> i32 = {DType::i32};
  static const FamilyOps family{
      "grouped_gemm",
      {{"grouped_gemm.fwd",
        {{"y", bf16, true}, {"x", bf16}, {"w", bf16}, {"offs", i32}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpFwd, "grouped_gemm.fwd", c); }},
       {"grouped_gemm.dgrad",
        {{"dx", bf16, true}, {"g", bf16}, {"w", bf16}, {"offs", i32}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpDgrad, "grouped_gemm.dgrad", c); }},
       {"grouped_gemm.wgrad",
        {{"dw", {DType::f32, DType::bf16}, true}, {"g", bf16}, {"x", bf16}, {"offs", i32}},
        true, false, [](const OpCall& c) { return make_plan(gemm::kOpWgrad, "grouped_gemm.wgrad", c); }}},
      {},
      gemm_kernel_args,
      [](const Problem& p, const Plan& plan, const Device& d) {
        for (const char* dim : {"n", "k", "e"})  // `cakec plan` may leave some out
          if (!p.dims.count(dim)) return std::vector<std::string>{};
        return gemm_split_notes(plan, 0, p.dims.at("e"), p.dims.at("n"), p.dims.at("k"), d.sm_count);
      }};
  return family;
}

}  // namespace cake::ops
