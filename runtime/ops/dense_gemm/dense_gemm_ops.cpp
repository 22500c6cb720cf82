// dense_gemm ops: the BF16 projection GEMM (fwd, dgrad, wgrad with BF16 or FP32 output and
// accumulate), over T tokens or a batch of B heads of T tokens each. The programs are the GEMM
// kernels of templates/common/ with uniform groups (no offsets: B groups of T rows), checked
// and bound by runtime/ops/gemm_kernels.hpp.
#include <climits>

#include "error.hpp"
#include "gemm_kernels.hpp"

namespace cake::ops {
namespace {

// Each op's tensors (output, then the kernel's operands a and b) with their dims by letter:
// T tokens, N, K, and B heads when batched. Contiguity also rules out an expanded or
// self-overlapping dw, which accumulate would read and write through several aliases.
const std::vector<OperandSpec>& specs(int op, bool batched) {
  const std::vector<DType> bf16 = {DType::bf16}, dw_types = {DType::bf16, DType::f32};
  static const std::vector<OperandSpec> fwd{{"y", "TN", bf16}, {"x", "TK", bf16}, {"w", "NK", bf16}};
  static const std::vector<OperandSpec> dgrad{{"dx", "TK", bf16}, {"dy", "TN", bf16}, {"w", "NK", bf16}};
  static const std::vector<OperandSpec> wgrad{{"dw", "NK", dw_types}, {"dy", "TN", bf16}, {"x", "TK", bf16}};
  static const std::vector<OperandSpec> bfwd{{"y", "BTN", bf16}, {"x", "BTK", bf16}, {"w", "BNK", bf16}};
  static const std::vector<OperandSpec> bdgrad{{"dx", "BTK", bf16}, {"dy", "BTN", bf16}, {"w", "BNK", bf16}};
  static const std::vector<OperandSpec> bwgrad{{"dw", "BNK", dw_types}, {"dy", "BTN", bf16}, {"x", "BTK", bf16}};
  if (op == gemm::kOpFwd) return batched ? bfwd : fwd;
  if (op == gemm::kOpDgrad) return batched ? bdgrad : dgrad;
  return batched ? bwgrad : wgrad;
}

struct Checked {
  std::vector<TensorView> tensors;  // output first
  int64_t t = 0, n = 0, k = 0, b = 1;
  bool batched = false;
};

// The first input's rank says whether the call is batched; the shared checks do the rest.
Checked check(int op, const OpCall& call) {
  const TensorView& first = call.at(specs(op, false)[1].name);
  const bool batched = first.shape.size() == 3;
  if (first.shape.size() != 2 && !batched) {
    const char* dims = op == gemm::kOpFwd ? "[T, K] or 3-D [B, T, K]" : "[T, N] or 3-D [B, T, N]";
    throw ArgumentError(first.name, std::string("must be 2-D ") + dims + " (a batch of heads), got " +
                                        std::to_string(first.shape.size()) + "-D");
  }
  GemmOperands g = check_operands(call, specs(op, batched));
  Checked c{std::move(g.tensors), g.dims.at('T'), g.dims.at('N'), g.dims.at('K'), batched ? g.dims.at('B') : 1,
            batched};
  // The kernels see B x T rows as one int.
  if (c.b > 0 && c.t > INT_MAX / c.b)
    throw ArgumentError(first.name, "B x T = " + std::to_string(c.b) + " x " + std::to_string(c.t) +
                                        " rows is larger than cake supports (2^31 - 1)");
  return c;
}

OpPlan make_plan(int op, const char* op_name, const OpCall& call) {
  const Checked c = check(op, call);
  const OpOptions& opt = call.options;
  const TensorView& out = c.tensors[0];
  OpPlan p;
  p.device = out.device;
  if (c.t == 0 || c.b == 0) {
    // No rows: fwd and dgrad have nothing to write; wgrad's sum over no tokens is zeros (or,
    // accumulating, leaves dw as it is). A zero fill needs no kernel and no plan.
    p.noop = op != gemm::kOpWgrad || opt.accumulate || out.numel() == 0;
    if (!p.noop) {
      p.zero_fill = out.data;
      p.zero_fill_bytes = size_t(out.numel()) * size_t(dtype_size(out.dtype));
      p.why = "T = 0: dw is the sum over no tokens, zeros";
    }
    return p;
  }
  p.problem = gemm_problem(op_name, {{"t", c.t}, {"n", c.n}, {"k", c.k}, {"b", c.b}}, c.tensors, opt);
  for (const auto& t : c.tensors) p.args[t.name] = t.data;
  p.composed_elements = c.b * c.n * c.k;  // a composed accumulate adds over dw
  const std::vector<OperandSpec>& names = specs(op, c.batched);
  const GemmCall gemm{op, c.b * c.t, c.n, c.k, c.b, names[1].name, names[2].name, names[0].name, ""};
  p.binder = [gemm, opt](Runtime& rt, const DeviceContext& dc) {
    return gemm_binder(rt, gemm, grid_sms(dc, opt), dc.info->sm_count);
  };
  return p;
}

}  // namespace

const FamilyOps& op_family_dense_gemm() {
  const std::vector<DType> bf16 = {DType::bf16};
  static const FamilyOps family{
      "dense_gemm",
      {{"dense_gemm.fwd",
        {{"y", bf16, true}, {"x", bf16}, {"w", bf16}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpFwd, "dense_gemm.fwd", c); }},
       {"dense_gemm.dgrad",
        {{"dx", bf16, true}, {"dy", bf16}, {"w", bf16}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpDgrad, "dense_gemm.dgrad", c); }},
       {"dense_gemm.wgrad",
        {{"dw", {DType::f32, DType::bf16}, true}, {"dy", bf16}, {"x", bf16}},
        true, false, [](const OpCall& c) { return make_plan(gemm::kOpWgrad, "dense_gemm.wgrad", c); }}},
      {},
      gemm_kernel_args,
      [](const Problem& p, const Plan& plan, const Device& d) {
        return gemm_split_notes(plan, p.dims.at("t"), p.dims.at("b"), p.dims.at("n"), p.dims.at("k"), d.sm_count);
      }};
  return family;
}

}  // namespace cake::ops
