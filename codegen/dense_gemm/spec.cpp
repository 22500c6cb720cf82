// dense_gemm: the BF16 projection GEMM of a training step, y = x w^T over T tokens, and the
// same over a batch of heads. Ops dense_gemm.fwd (y = x w^T), .dgrad (dx = dy w), .wgrad
// (dw = dy^T x, bf16 or f32 out, optionally accumulating into dw). The programs are the GEMM
// kernels of templates/common/ with one group of T rows (a batch: B groups of T rows, w and
// dw [B, N, K]).
// Every route is deterministic: a tile is reduced in one fixed order, and the last wave's
// split along the reduction sums its parts in a fixed order too.
#include "family.hpp"
#include "gemm_programs.hpp"

namespace cake::codegen {
namespace {

using nlohmann::json;
using namespace gemm_programs;

using OpSpec = GemmOpArgs;
const OpSpec kOps[] = {{{"fwd", gemm::kOpFwd}, "x", "w", "y"},
                       {{"dgrad", gemm::kOpDgrad}, "dy", "w", "dx"},
                       {{"wgrad", gemm::kOpWgrad}, "dy", "x", "dw"}};

json window(const OpSpec& op, const std::string& arch, const std::string& out) {
  return {{"archs", {arch}},
          {"dtypes", {{op.a, "bf16"}, {op.b, "bf16"}, {op.out, out}}},
          {"divisible", {{"n", 8}, {"k", 8}}},
          {"align", {{op.a, 16}, {op.b, 16}, {op.out, 16}}}};
}

json gemm_stage(const std::string& program, const OpSpec& op, const std::string& out) {
  return {{"program", program}, {"kernel", 0}, {"bind", {{"a", op.a}, {"b", op.b}, {"out", out}}}};
}

std::string route_prefix(const OpSpec& op, const std::string& out, bool acc) {
  if (op.index != gemm::kOpWgrad) return op.name;
  return std::string(op.name) + (acc ? "_acc_" : "_") + out + (acc ? "_fused" : "");
}

}  // namespace

FamilySpec family_spec_dense_gemm() {
  FamilySpec f;
  f.name = "dense_gemm";
  // The grouped GEMM's measured tiles. A skinny fwd (N <= 128) computes zeros past N in its
  // 256-column tile; a narrower tile for it waits for a measurement on the H200.
  const Sm90Tile sm90;
  const PortableTile portable;
  for (const OpSpec& op : kOps) {
    json candidates = json::array();
    for (const auto& [out, acc] : out_kinds(op)) {
      const std::string prefix = route_prefix(op, out, acc);
      ProgramSpec hp = sm90_program("dense", op, sm90, out, acc);
      // The compact stand-in serves a first call while the full program compiles (same bits).
      const ProgramSpec compact = sm90_program("dense", op, sm90, out, acc, true);
      hp.stand_in = compact.name;
      f.programs.push_back(compact);
      f.programs.push_back(hp);
      json hopper = {{"name", prefix + "_sm90_" + sm90.tag()},
                     {"stages", {gemm_stage(hp.name, op, op.out)}},
                     {"window", window(op, "sm_90a", out)},
                     {"note", acc ? "out += dW in the epilogue, rounded once to f32" : "TMA + wgmma, persistent"}};
      if (acc) hopper["accumulate"] = "fused";
      candidates.push_back(hopper);
      const ProgramSpec pp = portable_program("dense", op, portable, out, acc);
      f.programs.push_back(pp);
      json port = {{"name", prefix + "_portable_" + portable.tag()},
                   {"stages", {gemm_stage(pp.name, op, op.out)}},
                   {"window", window(op, "sm_80+", out)},
                   {"note", acc ? "out += dW in the epilogue (mma.sync)" : "mma.sync, any sm_80+ part"}};
      if (acc) port["accumulate"] = "fused";
      candidates.push_back(port);
    }
    if (op.index == gemm::kOpWgrad) {
      // Composed accumulate: dW into a scratch of dw's dtype, then dw = dw + scratch. For f32
      // it is bitwise the fused result and serves when no fused candidate can; bf16
      // accumulates only composed (dW rounded to bf16 first, as every route must agree).
      for (const std::string out : {"f32", "bf16"}) {
        const std::string add = out == "bf16" ? "ew_add_bf16_v8" : "ew_add_f32_v4";
        for (const auto& [tag, prog, arch] :
             {std::tuple{"sm90", sm90_program("dense", op, sm90, out, false).name, "sm_90a"},
              std::tuple{"portable", portable_program("dense", op, portable, out, false).name, "sm_80+"}}) {
          candidates.push_back(
              {{"name", "wgrad_acc_" + out + "_composed_" + tag},
               {"stages",
                {gemm_stage(prog, op, "scratch"),
                 {{"program", add}, {"bind", {{"out", "dw"}, {"a", "dw"}, {"b", "scratch"}}}}}},
               {"window", window(op, arch, out)},
               {"accumulate", "composed"},
               {"scratch", {{"dims", {"b", "n", "k"}}, {"dtype_of", "dw"}}},
               {"note", out == "bf16" ? "bf16 accumulates composed only: dW is rounded to bf16, then added"
                                      : "fallback: dW -> scratch, add (bitwise the fused result)"}});
        }
      }
    }
    f.routes.push_back({{"op", std::string("dense_gemm.") + op.name}, {"candidates", candidates}});
  }
  return f;
}

}  // namespace cake::codegen
