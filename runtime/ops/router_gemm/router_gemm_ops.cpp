// router_gemm ops: the checks, the problem, and the binder of the family's stages: its own
// split and sum kernels (templates/router_gemm/router_gemm_contract.h) and the shared GEMM
// kernels (gemm_kernels.hpp) over the parts the splits leave in the scratch.
#include <algorithm>
#include <climits>

#include "error.hpp"
#include "gemm_kernels.hpp"
#include "router_gemm_contract.h"

namespace cake::ops {
namespace {

// Each op's tensors (output first) with their dims as the GEMM checks name them: T tokens,
// N = E experts, K = H hidden.
std::vector<OperandSpec> specs(int op) {
  const std::vector<DType> f32 = {DType::f32}, bf16 = {DType::bf16}, any = {DType::bf16, DType::f32};
  if (op == gemm::kOpFwd) return {{"logits", "TN", f32}, {"x", "TK", bf16}, {"w", "NK", any}};
  if (op == gemm::kOpDgrad) return {{"dx", "TK", any}, {"dlogits", "TN", f32}, {"w", "NK", any}};
  return {{"dw", "NK", f32}, {"dlogits", "TN", f32}, {"x", "TK", bf16}};
}

// E and H by the router's names before the shared checks (which call them N and K).
void check_e_h(int op, const OpCall& call) {
  const TensorView& w = call.at(op == gemm::kOpWgrad ? "dw" : "w");
  if (w.shape.size() != 2) return;  // the shared checks name the rank
  for (const auto& [name, v] : {std::pair{"E", w.shape[0]}, std::pair{"H", w.shape[1]}})
    if (v < 8 || v % 8 != 0)
      throw ArgumentError(w.name, std::string(name) + " = " + std::to_string(v) +
                                      " must be a positive multiple of 8 (w and dw are [E, H])");
}

// The parts a dgrad lays along E: 3 for a bf16 w (dlogits' three against w), 6 for an f32 w.
int dgrad_parts(DType w) { return w == DType::f32 ? 6 : 3; }

// Which part of its input each block of a split holds (SplitArgs::pattern), by the split's
// input and the op: dgrad pairs dlogits' parts {0,0,0,1,1,2} with w's {0,1,2,0,1,0} (f32 w),
// or {0,1,2} with w thrice (bf16 w); fwd's w and wgrad's dlogits split into {0,1,2}.
std::vector<int> split_pattern(int op, bool of_w, DType w) {
  if (op != gemm::kOpDgrad) return {0, 1, 2};
  if (w == DType::f32) return of_w ? std::vector<int>{0, 1, 2, 0, 1, 0} : std::vector<int>{0, 0, 0, 1, 1, 2};
  return of_w ? std::vector<int>{0, 0, 0} : std::vector<int>{0, 1, 2};
}

struct Call {
  int op = gemm::kOpFwd;
  int64_t t = 0, e = 0, h = 0;
  DType w = DType::bf16;
};

// wgrad's chunks of rows (router_gemm_contract.h, kWgradChunk).
int64_t wgrad_chunks(int64_t t) { return (t + router::kWgradChunk - 1) / router::kWgradChunk; }

unsigned grid_for(int64_t vecs, int sms) {
  const int64_t blocks = (vecs + router::kThreads - 1) / router::kThreads;
  return unsigned(std::clamp<int64_t>(blocks, 1, int64_t(sms) * 8));
}

uintptr_t arg(const PlannedStage& s, const ArgMap& args, const char* param) {
  const auto b = s.bind.find(param);
  if (b == s.bind.end()) throw Error("program " + s.program->name + ": the stage binds no '" + param + "'");
  const auto a = args.find(b->second);
  if (a == args.end()) throw Error("program " + s.program->name + ": no argument '" + b->second + "'");
  return a->second;
}

// A split or a sum stage.
void bind_parts(const Call& c, const PlannedStage& s, const ArgMap& args, int sms, LaunchStage& ls) {
  const uintptr_t in = arg(s, args, "in"), out = arg(s, args, "out");
  ls.block[0] = router::kThreads;
  if (s.kernel >= 2) {  // sum: wgrad's three [E, H] products of each chunk into dw
    router::SumArgs k{};
    k.parts = reinterpret_cast<const float*>(in);
    k.out = reinterpret_cast<float*>(out);
    k.n = c.e * c.h;
    k.blocks = int(3 * wgrad_chunks(c.t));
    ls.args.add(k);
    ls.grid[0] = grid_for(k.n / router::kSumVec, sms);
    return;
  }
  const bool of_w = s.bind.at("in") == "w";
  const std::vector<int> pattern = split_pattern(c.op, of_w, c.w);
  router::SplitArgs k{};
  k.in = reinterpret_cast<const void*>(in);
  k.out = reinterpret_cast<void*>(out);
  if (s.bind.count("offs")) {  // wgrad's chunks of rows: their ends, for the GEMM's groups
    k.offs = reinterpret_cast<int*>(arg(s, args, "offs"));
    k.chunk = router::kWgradChunk;
  }
  k.blocks = int(pattern.size());
  for (size_t i = 0; i < pattern.size(); ++i) k.pattern[i] = static_cast<unsigned char>(pattern[i]);
  if (of_w) {  // w [E, H]: blocks one after another ([P, E, H], i.e. [P E, H])
    k.rows = c.e, k.cols = c.h, k.ld_out = c.h, k.block_stride = c.e * c.h;
  } else {  // dlogits [T, E]: blocks side by side in each row ([T, P E])
    k.rows = c.t, k.cols = c.e, k.ld_out = k.blocks * c.e, k.block_stride = c.e;
  }
  ls.args.add(k);
  ls.grid[0] = grid_for(k.rows * (k.cols / router::kSplitVec), sms);
}

OpPlan make_plan(int op, const char* op_name, const OpCall& call) {
  check_e_h(op, call);
  GemmOperands g = check_operands(call, specs(op));
  Call c{op, g.dims.at('T'), g.dims.at('N'), g.dims.at('K'), DType::bf16};
  if (op != gemm::kOpWgrad) c.w = call.at("w").dtype;
  const OpOptions& opt = call.options;
  const TensorView& out = g.tensors[0];
  if (c.t == 0) return no_rows_plan(op, out, opt, "T = 0: dw is the sum over no tokens, zeros");
  OpPlan p;
  p.device = out.device;
  // The split's parts and the GEMMs' reduction widths multiply E by up to 6, and T rows of
  // 6 E parts must stay int-indexed for the kernels.
  if (c.t > INT_MAX / 6 / std::max<int64_t>(c.e, 1))
    throw ArgumentError(g.tensors[1].name, "T x E = " + std::to_string(c.t) + " x " + std::to_string(c.e) +
                                               " is larger than cake supports (T x 6 E < 2^31)");
  p.problem = gemm_problem(op_name, {{"t", c.t}, {"e", c.e}, {"h", c.h}}, g.tensors, opt);
  for (const auto& t : g.tensors) p.args[t.name] = t.data;
  // The GEMM every route runs (its operands come from the stages' bind maps).
  GemmCall gemm{op, c.t, c.e, c.h, 1, "", "", "", ""};
  if (op == gemm::kOpDgrad) gemm.n = dgrad_parts(c.w) * c.e;
  if (op == gemm::kOpWgrad) gemm.n = 3 * c.e, gemm.e = wgrad_chunks(c.t), gemm.offs = "offs";
  p.binder = [c, gemm, opt](Runtime& rt, const DeviceContext& dc) -> Binder {
    const int sms = grid_sms(dc, opt);
    Binder gemm_bind = gemm_binder(rt, gemm, sms, dc.info->sm_count);
    return [c, sms, gemm_bind](const Plan& plan, const PlannedStage& s, const ArgMap& args, LaunchStage& ls) {
      if (s.program->params->value("kind", "") == "router_parts") return bind_parts(c, s, args, sms, ls);
      if (c.op != gemm::kOpFwd || c.w != DType::f32) return gemm_bind(plan, s, args, ls);
      // fwd's three GEMMs read w's parts, [3, E, H] bf16 in the scratch's first buffer.
      ArgMap with_parts = args;
      const uintptr_t parts = args.at("scratch.0"), bytes = uintptr_t(c.e * c.h * 2);
      with_parts["w_hi"] = parts, with_parts["w_mid"] = parts + bytes, with_parts["w_lo"] = parts + 2 * bytes;
      gemm_bind(plan, s, with_parts, ls);
    };
  };
  return p;
}

}  // namespace

const FamilyOps& op_family_router_gemm() {
  const std::vector<DType> f32 = {DType::f32}, bf16 = {DType::bf16}, any = {DType::bf16, DType::f32};
  static const FamilyOps family{
      "router_gemm",
      {{"router_gemm.fwd",
        {{"logits", f32, true}, {"x", bf16}, {"w", any}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpFwd, "router_gemm.fwd", c); }},
       {"router_gemm.dgrad",
        {{"dx", any, true}, {"dlogits", f32}, {"w", any}},
        false, false, [](const OpCall& c) { return make_plan(gemm::kOpDgrad, "router_gemm.dgrad", c); }},
       {"router_gemm.wgrad",
        {{"dw", f32, true}, {"dlogits", f32}, {"x", bf16}},
        true, false, [](const OpCall& c) { return make_plan(gemm::kOpWgrad, "router_gemm.wgrad", c); }}},
      {},
      [](const Program& program, int kernel) -> KernelArgs {
        if (program.params->value("kind", "") != "router_parts") return gemm_kernel_args(program, kernel);
        if (kernel >= 2) return {"cake::router::SumArgs", sizeof(router::SumArgs)};
        return {"cake::router::SplitArgs", sizeof(router::SplitArgs)};
      },
      {}};
  return family;
}

}  // namespace cake::ops
