// grouped_gemm: ragged BF16 grouped GEMM for MoE experts, groups given by device offsets.
// Ops grouped_gemm.fwd (y = x w^T), .dgrad (dx = g w), .wgrad (dw = g^T x, bf16 or f32 out,
// optionally accumulating). Per op and (out dtype, accumulate): a Hopper program (sm_90a: TMA +
// wgmma, persistent, one CTA per SM) and a portable one (sm_80+: mma.sync), one kernel each, so
// a first call compiles only the kernel it runs (a cold NVRTC compile is per program). Tile
// shapes live in "params" and in the program names, so tuning adds programs and windows here.
// Launch geometry (threads, smem, kind) comes from "params" too (the binder reads it), computed
// by the contract the kernels share (gemm_contract.h); "smem" also lets the planner pass
// over a program that needs more shared memory than the device allows.
#include "family.hpp"
#include "gemm_programs.hpp"

namespace cake::codegen {
namespace {

using nlohmann::json;
using namespace gemm_programs;

using OpSpec = GemmOpArgs;
const OpSpec kOps[] = {{{"fwd", gemm::kOpFwd}, "x", "w", "y"},
                       {{"dgrad", gemm::kOpDgrad}, "g", "w", "dx"},
                       {{"wgrad", gemm::kOpWgrad}, "g", "x", "dw"}};

// Every tensor's dtype, N and K multiples of 8, 16-byte aligned operands (the ops reject
// anything else; the window says so too, for user registries and `cakec plan`).
json window(const OpSpec& op, const std::string& arch, const std::string& out) {
  json dtypes = {{op.a, "bf16"}, {op.b, "bf16"}, {op.out, out}, {"offs", "i32"}};
  return {{"archs", {arch}},
          {"dtypes", dtypes},
          {"divisible", {{"n", 8}, {"k", 8}}},
          {"align", {{op.a, 16}, {op.b, 16}, {op.out, 16}}}};
}

json gemm_stage(const std::string& program, const OpSpec& op, const std::string& out) {
  return {{"program", program},
          {"kernel", 0},
          {"bind", {{"a", op.a}, {"b", op.b}, {"out", out}, {"offs", "offs"}}}};
}

}  // namespace

FamilySpec family_spec_grouped_gemm() {
  FamilySpec f;
  f.name = "grouped_gemm";
  // Hopper: 128 x 256 tiles, 4 stages, raster bands of 16 row blocks, clusters of 1 with the
  // dynamic tile schedule; portable 128 x 128 x 32 (the measured choices: docs/decisions.md).
  const Sm90Tile sm90;
  const PortableTile portable;
  for (const OpSpec& op : kOps) {
    json candidates = json::array();
    for (const auto& [out, acc] : out_kinds(op)) {
      const ProgramSpec hp = sm90_program("gg", op, sm90, out, acc);
      const ProgramSpec pp = portable_program("gg", op, portable, out, acc);
      // A cold compile of an sm90 program takes about 1 s on a slow host CPU; its compact
      // stand-in (the epilogue k blocks rolled, for wgrad the epilogue not overlapped; same
      // bits) compiles faster and serves a first call meanwhile (docs/decisions.md, stand-ins).
      add_sm90_with_stand_in(f.programs, "gg", op, sm90, out, acc);
      f.programs.push_back(pp);
      // wgrad names carry the out dtype (and accumulate); fwd and dgrad have one.
      std::string prefix = std::string(op.name) + (op.index == gemm::kOpWgrad ? (acc ? "_acc_" : "_") + out : "") +
                           (acc ? "_fused" : "");
      json hopper = {{"name", prefix + "_sm90_" + sm90.tag()},
                     {"stages", {gemm_stage(hp.name, op, op.out)}},
                     {"window", window(op, "sm_90a", out)},
                     {"note", acc ? "out += dW in the epilogue, rounded once to f32" : "TMA + wgmma, persistent"}};
      json port = {{"name", prefix + "_portable_" + portable.tag()},
                   {"stages", {gemm_stage(pp.name, op, op.out)}},
                   {"window", window(op, "sm_80+", out)},
                   {"note", acc ? "out += dW in the epilogue (mma.sync)" : "mma.sync, any sm_80+ part"}};
      if (acc) hopper["accumulate"] = "fused", port["accumulate"] = "fused";
      candidates.push_back(hopper);
      candidates.push_back(port);
    }
    if (op.index == gemm::kOpWgrad) {
      // Composed accumulate: dW into a scratch of dw's dtype (the non-accumulating kernel,
      // which writes zeros for empty groups), then dw = dw + scratch. For f32 this is
      // bitwise the fused result; it serves when no fused candidate can. bf16 accumulates
      // only composed: a fused bf16 epilogue would round dw + dW once from f32, the composed
      // route rounds dW to bf16 first, and every route of a problem must agree.
      for (const std::string out : {"f32", "bf16"}) {
        const std::string add = out == "bf16" ? "ew_add_bf16_v8" : "ew_add_f32_v4";
        for (const auto& [tag, prog, arch] :
             {std::tuple{"sm90", sm90_program("gg", op, sm90, out, false).name, "sm_90a"},
              std::tuple{"portable", portable_program("gg", op, portable, out, false).name, "sm_80+"}}) {
          candidates.push_back(
              {{"name", "wgrad_acc_" + out + "_composed_" + tag},
               {"stages",
                {gemm_stage(prog, op, "scratch"),
                 {{"program", add}, {"bind", {{"out", "dw"}, {"a", "dw"}, {"b", "scratch"}}}}}},
               {"window", window(op, arch, out)},
               {"accumulate", "composed"},
               {"scratch", {{"dims", {"e", "n", "k"}}, {"dtype_of", "dw"}}},
               {"note", out == "bf16" ? "bf16 accumulates composed only: dW is rounded to bf16, then added "
                                        "(a fused epilogue would round once from f32)"
                                      : "fallback: dW -> scratch, add (bitwise the fused result)"}});
        }
      }
    }
    f.routes.push_back({{"op", std::string("grouped_gemm.") + op.name}, {"candidates", candidates}});
  }
  return f;
}

}  // namespace cake::codegen
