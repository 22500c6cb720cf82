// dense_gemm ops: the BF16 projection GEMM (fwd, dgrad, wgrad with BF16 or FP32 output and
// accumulate), over T tokens or a batch of B heads of T tokens each. The programs are the GEMM
// kernels of templates/common/ with uniform groups (no offsets: B groups of T rows), checked
// and bound by runtime/ops/gemm_kernels.hpp.
#include <climits>
#include <optional>
#include <utility>

#include "error.hpp"
#include "gemm_kernels.hpp"

namespace cake::ops {
namespace {

// Each op's tensors (output, then the operands) with their dims by letter: T tokens, N, K, and
// B heads when batched. The weight (dw for wgrad) is stored [N, K], or [K, N] (`kn`: given as
// the transposed view of a contiguous [K, N] tensor, checked as that tensor). Contiguity also
// rules out an expanded or self-overlapping dw, which accumulate would read and write through
// several aliases. The token operands may be strided views (rows apart, heads anywhere: a
// [T, B, K] tensor's heads as x_tbk.transpose(0, 1)).
std::vector<OperandSpec> specs(int op, bool batched, bool kn) {
  const std::vector<DType> bf16 = {DType::bf16}, dw_types = {DType::bf16, DType::f32};
  const std::string b = batched ? "B" : "", w = b + (kn ? "KN" : "NK");
  auto rows = [](const char* name, std::string dims, std::vector<DType> types) {
    return OperandSpec{name, std::move(dims), std::move(types), true, true};
  };
  if (op == gemm::kOpFwd)
    return {rows("y", b + "TN", {DType::bf16, DType::f32}), rows("x", b + "TK", bf16), {"w", w, bf16}};
  if (op == gemm::kOpDgrad) return {rows("dx", b + "TK", bf16), rows("dy", b + "TN", bf16), {"w", w, bf16}};
  return {{"dw", w, dw_types}, rows("dy", b + "TN", bf16), rows("x", b + "TK", bf16)};
}

// The storage of a weight given as the transposed view of a contiguous [K, N] ([B, K, N])
// tensor: strides (1, N) (and N K for the batch). Null for any other layout.
std::optional<TensorView> kn_storage(const TensorView& t) {
  const size_t r = t.shape.size();
  if (r < 2 || r > 3 || t.strides.size() != r) return std::nullopt;
  const int64_t n = t.shape[r - 2], k = t.shape[r - 1];
  if (n < 2 || k < 2 || t.strides[r - 2] != 1 || t.strides[r - 1] != n) return std::nullopt;
  if (r == 3 && t.shape[0] > 1 && t.strides[0] != n * k) return std::nullopt;
  TensorView v = t;
  std::swap(v.shape[r - 2], v.shape[r - 1]);
  v.strides[r - 1] = 1, v.strides[r - 2] = n;
  if (r == 3) v.strides[0] = n * k;
  return v;
}

struct Checked {
  std::vector<TensorView> tensors;  // output first
  int64_t t = 0, n = 0, k = 0, b = 1;
  bool batched = false, kn = false;
  std::map<std::string, RowLayout> rows;  // the strided token operands
};

// The first input's rank says whether the call is batched, the weight's (dw's) strides
// whether it is stored [K, N]; the shared checks do the rest.
Checked check(int op, const OpCall& call) {
  const TensorView& first = call.at(specs(op, false, false)[1].name);
  const bool batched = first.shape.size() == 3;
  if (first.shape.size() != 2 && !batched) {
    const char* dims = op == gemm::kOpFwd ? "[T, K] or 3-D [B, T, K]" : "[T, N] or 3-D [B, T, N]";
    throw ArgumentError(first.name, std::string("must be 2-D ") + dims + " (a batch of heads), got " +
                                        std::to_string(first.shape.size()) + "-D");
  }
  const char* weight = op == gemm::kOpWgrad ? "dw" : "w";
  const std::optional<TensorView> kn = kn_storage(call.at(weight));
  OpCall storage = call;
  if (kn) storage.tensors[weight] = *kn;
  GemmOperands g = check_operands(storage, specs(op, batched, kn.has_value()));
  Checked c{std::move(g.tensors), g.dims.at('T'), g.dims.at('N'), g.dims.at('K'), batched ? g.dims.at('B') : 1,
            batched, kn.has_value(), std::move(g.rows)};
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
  if (c.t == 0 || c.b == 0) return no_rows_plan(op, out, opt, "T = 0: dw is the sum over no tokens, zeros");
  OpPlan p;
  p.device = out.device;
  p.problem = gemm_problem(op_name, {{"t", c.t}, {"n", c.n}, {"k", c.k}, {"b", c.b}, {"kn", c.kn ? 1 : 0}},
                           c.tensors, opt);
  for (const auto& t : c.tensors) p.args[t.name] = t.data;
  p.composed_elements = c.b * c.n * c.k;  // a composed accumulate adds over dw
  // The kernel a [K, N] weight runs (the routes' kn candidates): x w is dgrad's form, dy w^T
  // fwd's, x^T dy wgrad's with x and dy exchanged; N and K trade places.
  GemmCall gemm{op, c.b * c.t, c.n, c.k, c.b, "", "", "", "", c.rows};
  if (op == gemm::kOpFwd) gemm.a = "x", gemm.b = "w", gemm.out = "y";
  if (op == gemm::kOpDgrad) gemm.a = "dy", gemm.b = "w", gemm.out = "dx";
  if (op == gemm::kOpWgrad) gemm.a = c.kn ? "x" : "dy", gemm.b = c.kn ? "dy" : "x", gemm.out = "dw";
  if (c.kn) {
    std::swap(gemm.n, gemm.k);
    if (op != gemm::kOpWgrad) gemm.op = op == gemm::kOpFwd ? gemm::kOpDgrad : gemm::kOpFwd;
  }
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
        {{"y", {DType::bf16, DType::f32}, true}, {"x", bf16}, {"w", bf16}},
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
        for (const char* dim : {"t", "n", "k", "b", "kn"})  // `cakec plan` may leave some out
          if (!p.dims.count(dim)) return std::vector<std::string>{};
        const bool kn = p.dims.at("kn") == 1;  // the kernel's N and K trade places
        return gemm_split_notes(plan, p.dims.at("t"), p.dims.at("b"), p.dims.at(kn ? "k" : "n"),
                                p.dims.at(kn ? "n" : "k"), d.sm_count);
      }};
  return family;
}

}  // namespace cake::ops
