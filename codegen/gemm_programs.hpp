// Programs over the BF16 GEMM kernels of templates/common/ (sm90_gemm.cuh, smxx_gemm.cuh), for
// every family whose ops are GEMMs: the tile shapes, the kernel name expressions and the launch
// geometry in "params" (computed by gemm_contract.h, read by runtime/ops/gemm_kernels.hpp).
// A family names its programs with its own prefix and lays its routes over them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "family.hpp"
#include "gemm_contract.h"

namespace cake::codegen::gemm_programs {

// Hopper: 128-row tiles (two consumer warpgroups of 64 rows), kBN of 64, 128, 192 or 256, a stage
// ring, raster bands of row blocks, clusters of 1 (dynamic tile schedule) or 2; fwd may sum
// `b_parts` B operands stacked in one map (the kernel's kBParts).
struct Sm90Tile {
  int bm = 128, bn = 256, stages = 4, raster = 16, cluster = 1, b_parts = 1;
  int threads() const { return gemm::kSm90Threads; }
  int smem() const { return gemm::sm90_smem_bytes(bm, bn, stages, b_parts); }
  std::string tag() const { return std::to_string(bm) + "x" + std::to_string(bn); }
};

// Portable: 128 x 128 x 32 tiles, 4 stages, 2 x 2 warps (64 x 64 per warp: 2x4 reads shared
// memory ~1.4x more per mma; docs/decisions.md, portable tile).
struct PortableTile {
  int bm = 128, bn = 128, bk = 32, stages = 4, warps_m = 2, warps_n = 2;
  int threads() const { return warps_m * warps_n * 32; }
  int smem() const { return gemm::portable_smem_bytes(bm, bn, bk, stages); }
  std::string tag() const { return std::to_string(bm) + "x" + std::to_string(bn); }
};

// One op of a GEMM family: its name and the kernels' kOp.
struct GemmOp {
  const char* name;  // fwd, dgrad, wgrad
  int index;         // gemm::kOpFwd, ...
};

// An op with the call arguments of the kernel's operands.
struct GemmOpArgs : GemmOp {
  const char* a;
  const char* b;
  const char* out;
};

// The (out dtype, accumulate) kinds of each op: a program (and a route) each. fwd and dgrad
// write bf16; wgrad bf16 or f32, and accumulates into f32 (fused; bf16 composes).
inline std::vector<std::pair<std::string, bool>> out_kinds(const GemmOp& op) {
  if (op.index != gemm::kOpWgrad) return {{"bf16", false}};
  return {{"bf16", false}, {"f32", false}, {"f32", true}};
}

inline std::string ctype(const std::string& t) { return t == "bf16" ? "cake::bf16" : "float"; }
inline const char* cbool(bool b) { return b ? "true" : "false"; }

inline nlohmann::json kernel_list(const std::string& out, bool acc) {
  return nlohmann::json::array({{{"out", out}, {"accumulate", acc}}});
}

// wgrad program names carry the out dtype (and accumulate); fwd and dgrad name an out dtype
// other than bf16.
inline std::string kind_tag(const GemmOp& op, const std::string& out, bool acc) {
  return op.index == gemm::kOpWgrad || out != "bf16" ? "_" + out + (acc ? "_acc" : "") : "";
}

// `prefix`: the family's program prefix. `compact`: the template's kCompact, the same bits from
// a kernel that compiles faster and runs slower; it is the program's stand-in.
// `chain` (FP32 wgrad only): the program sums long groups in segments through a chain tile of
// workspace per SM (gemm_contract.h kChainRows); off where every group is short by design.
inline ProgramSpec sm90_program(const std::string& prefix, const GemmOp& op, const Sm90Tile& t,
                                const std::string& out, bool acc, bool compact = false, bool chain = true) {
  ProgramSpec p;
  p.name = prefix + "_sm90_" + op.name + kind_tag(op, out, acc) + "_" + t.tag() +
           (t.b_parts > 1 ? "_x" + std::to_string(t.b_parts) : "") + "_s" + std::to_string(t.stages) + "_r" +
           std::to_string(t.raster) + "_c" + std::to_string(t.cluster);
  p.templ = "sm90_gemm.cuh";
  p.archs = {"sm_90a"};
  p.min_cuda = "12.3";  // wgmma, setmaxnreg and TMA through NVRTC
  p.kernels.push_back("cake::gemm::sm90_gemm<" + std::to_string(op.index) + ", " + ctype(out) + ", " + cbool(acc) +
                      ", " + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " + std::to_string(t.stages) +
                      ", " + std::to_string(t.raster) + ", " + std::to_string(t.cluster) +
                      (compact ? ", true" : t.b_parts > 1 ? ", false" : "") +
                      (t.b_parts > 1 ? ", false, " + std::to_string(t.b_parts) : "") + ">");
  if (compact) p.name += "_compact";
  p.params = {{"kind", "sm90"},       {"op", op.name},          {"tile_m", t.bm},
              {"tile_n", t.bn},       {"stages", t.stages},     {"raster", t.raster},
              {"cluster", t.cluster}, {"threads", t.threads()}, {"smem", t.smem()},
              {"kernels", kernel_list(out, acc)}};
  if (t.b_parts > 1) p.params["b_parts"] = t.b_parts;
  // The dynamic tile schedule's two counters (tiles handed out, CTAs done); clusters of 2
  // walk round-robin and need none. The last wave's tiles split along the reduction
  // (deterministic stream-K; wgrad, and fwd / dgrad launches of few waves; docs/decisions.md,
  // tail split): the flags after the counters and an FP32 tile of workspace per SM; FP32
  // wgrad with `chain` a second one, the CTA's chain tile (gemm_contract.h kChainRows).
  if (t.cluster == 1) {
    const bool chained = chain && op.index == gemm::kOpWgrad && out == "f32";
    p.params["counters"] = gemm::kCounterInts;
    p.params["workspace_per_sm"] = gemm::sm90_workspace_per_sm(t.bm, t.bn, chained);
    if (chained) p.params["chain"] = true;
  }
  return p;
}

// An sm90 program and, listed before it, its compact stand-in, which serves a first call while
// the program compiles (same bits; docs/decisions.md, stand-ins).
inline void add_sm90_with_stand_in(std::vector<ProgramSpec>& programs, const std::string& prefix, const GemmOp& op,
                                   const Sm90Tile& t, const std::string& out, bool acc, bool chain = true) {
  ProgramSpec full = sm90_program(prefix, op, t, out, acc, false, chain);
  programs.push_back(sm90_program(prefix, op, t, out, acc, true, chain));
  full.stand_in = programs.back().name;
  programs.push_back(std::move(full));
}

// wgrad accumulating into FP32 with T's rows split into groups whose tiles all reduce-add into
// dw (the kernel's kReduceGroups; gemm_contract.h reduce_parts): the non-deterministic split.
// Dynamic schedule, no tail split (the binder sets the groups).
inline ProgramSpec sm90_reduce_program(const std::string& prefix, const Sm90Tile& t) {
  const GemmOp wgrad{"wgrad", gemm::kOpWgrad};
  ProgramSpec p = sm90_program(prefix, wgrad, t, "f32", true);
  p.name = prefix + "_sm90_wgrad_f32_acc_reduce_" + t.tag() + "_s" + std::to_string(t.stages) + "_r" +
           std::to_string(t.raster) + "_c" + std::to_string(t.cluster);
  std::string& kernel = p.kernels.back();
  kernel.insert(kernel.size() - 1, ", false, true");
  p.params["reduce_groups"] = true;
  p.params.erase("workspace_per_sm");
  p.params.erase("chain");  // its parts are at most kChainRows rows (reduce_parts): one run each
  return p;
}

// `chain` as for sm90_program: FP32 wgrad programs get chain tiles of workspace for long groups.
inline ProgramSpec portable_program(const std::string& prefix, const GemmOp& op, const PortableTile& t,
                                    const std::string& out, bool acc, bool chain = true) {
  ProgramSpec p;
  p.name = prefix + "_portable_" + op.name + kind_tag(op, out, acc) + "_" + t.tag() + "x" + std::to_string(t.bk) +
           "_s" + std::to_string(t.stages) + "_w" + std::to_string(t.warps_m) + "x" + std::to_string(t.warps_n);
  p.templ = "smxx_gemm.cuh";
  p.archs = kPortableArchs;
  p.min_cuda = "12.0";
  p.kernels.push_back("cake::gemm::portable_gemm<" + std::to_string(op.index) + ", " + ctype(out) + ", " +
                      cbool(acc) + ", " + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
                      std::to_string(t.bk) + ", " + std::to_string(t.stages) + ", " + std::to_string(t.warps_m) +
                      ", " + std::to_string(t.warps_n) + ">");
  p.params = {{"kind", "portable"},   {"op", op.name},        {"tile_m", t.bm},
              {"tile_n", t.bn},       {"tile_k", t.bk},       {"stages", t.stages},
              {"warps_m", t.warps_m}, {"warps_n", t.warps_n}, {"threads", t.threads()},
              {"smem", t.smem()},     {"kernels", kernel_list(out, acc)}};
  if (chain && op.index == gemm::kOpWgrad && out == "f32") {
    p.params["chain"] = true;
    p.params["workspace_per_sm"] = gemm::portable_workspace_per_sm(t.bm, t.bn);
  }
  return p;
}

}  // namespace cake::codegen::gemm_programs
