// router_gemm: the MoE router's gate in FP32. logits [T, E] (f32) = x [T, H] (bf16) w^T with w
// [E, H] bf16 or f32 (the master weight); dx = dlogits w (bf16 or f32) and dw = dlogits^T x
// (f32, optionally accumulating), with dlogits f32. Every FP32 operand is split exactly into
// three BF16 parts (hi + mid + lo, templates/router_gemm/) and the products that reach FP32
// accuracy run on the shared BF16 GEMM kernels of templates/common/ with FP32 accumulation:
//   fwd, w f32:  x w^T = x hi^T + x mid^T + x lo^T: on Hopper one GEMM whose B is the three
//                parts (each k step multiplies x's tile by all three into one accumulator, so
//                x is read once); elsewhere three GEMMs into logits (the last two accumulate);
//   dgrad:       the parts laid along the reduction (E): dlogits' [T, P E] x w' [P E, H], one
//                GEMM; w bf16: P = 3 (d_hi w + d_mid w + d_lo w), w f32: P = 6 (every product
//                of parts i + j <= 2 from 0, the rest is below FP32's rounding);
//   wgrad:       the parts of dlogits side by side as 3 E columns: dw' [3 E, H] = dlogits'^T x
//                per chunk of kWgradChunk rows (groups of the GEMM, so no sum runs longer),
//                one GEMM into scratch, then dw = the sum of the chunks' parts (+ dw).
// Every route is deterministic (fixed orders everywhere, the GEMMs' own included).
#include "family.hpp"
#include "gemm_programs.hpp"
#include "router_gemm_contract.h"

namespace cake::codegen {
namespace {

using nlohmann::json;
using namespace gemm_programs;

// The program of the family's own kernels: split<float>, split<bf16>, sum, sum accumulating.
constexpr const char* kParts = "router_parts_v8";
enum PartsKernel { kSplitF32 = 0, kSplitBf16 = 1, kSum = 2, kSumAccumulate = 3 };

ProgramSpec parts_program() {
  ProgramSpec p;
  p.name = kParts;
  p.templ = "smxx_router_gemm.cuh";
  p.archs = kPortableArchs;
  p.kernels = {"cake::router::split<float>", "cake::router::split<cake::bf16>", "cake::router::sum<false>",
               "cake::router::sum<true>"};
  p.params = {{"kind", "router_parts"}, {"threads", 256}};
  return p;
}

json window(const std::string& arch, json dtypes) {
  json align = json::object();
  for (const auto& [name, dt] : dtypes.items()) align[name] = 16;
  return {{"archs", {arch}}, {"dtypes", dtypes}, {"divisible", {{"e", 8}, {"h", 8}}}, {"align", align}};
}

json stage(const std::string& program, int kernel, json bind) {
  return {{"program", program}, {"kernel", kernel}, {"bind", bind}};
}

json buffer(std::vector<std::string> dims, const std::string& dtype_of, int times) {
  return {{"dims", dims}, {"dtype_of", dtype_of}, {"times", times}};
}

// A buffer with one copy per chunk of wgrad's rows.
json per_chunk(std::vector<std::string> dims, const std::string& dtype_of, int times) {
  json b = buffer(std::move(dims), dtype_of, times);
  b["ceil_div"] = {"t", router::kWgradChunk};
  return b;
}

const GemmOp kFwd{"fwd", gemm::kOpFwd}, kDgrad{"dgrad", gemm::kOpDgrad}, kWgrad{"wgrad", gemm::kOpWgrad};

// fwd's sm90 tiles (FP32 logits), narrowest first: E <= 64 fits one 64-column tile; wider E
// takes 128 columns (FP32 tiles are held whole, so 128 is the widest). max_e 0: any E.
struct FwdTile {
  Sm90Tile tile;
  int64_t max_e;
};
const FwdTile kFwdTiles[] = {{{128, 64, 8}, 64}, {{128, 128, 6}, 0}};
// The same with w's three parts as B: three B tiles a stage leave room for fewer stages
// (128 x 128: 231424 bytes of shared memory).
const FwdTile kFusedTiles[] = {{{128, 64, 4, 16, 1, 3}, 64}, {{128, 128, 3, 16, 1, 3}, 0}};

// dgrad with an f32 dx: FP32 tiles are held whole, so 128 columns (of H).
const Sm90Tile kDgradF32 = {128, 128, 6};

json fwd_window(const std::string& wt, int64_t max_e) {
  json w = window("sm_90a", {{"logits", "f32"}, {"x", "bf16"}, {"w", wt}});
  if (max_e > 0) w["dims"]["e"] = {8, max_e};
  return w;
}

}  // namespace

FamilySpec family_spec_router_gemm() {
  FamilySpec f;
  f.name = "router_gemm";
  const Sm90Tile sm90;
  const PortableTile portable;
  f.programs.push_back(parts_program());
  // The GEMMs: fwd writes f32 logits (sm90: w's parts summed in one GEMM, or one GEMM a part
  // with the later ones accumulating; portable: the latter), dgrad bf16 or f32 dx, wgrad f32.
  // No compact stand-ins for FP32 fwd and dgrad tiles: they roll nothing.
  for (const FwdTile& t : kFusedTiles) f.programs.push_back(sm90_program("router", kFwd, t.tile, "f32", false));
  for (const FwdTile& t : kFwdTiles)
    for (const bool acc : {false, true}) f.programs.push_back(sm90_program("router", kFwd, t.tile, "f32", acc));
  f.programs.push_back(portable_program("router", kFwd, portable, "f32", false));
  f.programs.push_back(portable_program("router", kFwd, portable, "f32", true));
  add_sm90_with_stand_in(f.programs, "router", kDgrad, sm90, "bf16", false);
  f.programs.push_back(sm90_program("router", kDgrad, kDgradF32, "f32", false));
  // wgrad's groups are T's chunks of at most kWgradChunk rows: no chain tile.
  static_assert(router::kWgradChunk <= gemm::kChainRows, "the router's wgrad groups are one run each");
  add_sm90_with_stand_in(f.programs, "router", kWgrad, sm90, "f32", false, /*chain=*/false);
  f.programs.push_back(portable_program("router", kDgrad, portable, "bf16", false));
  f.programs.push_back(portable_program("router", kDgrad, portable, "f32", false));
  f.programs.push_back(portable_program("router", kWgrad, portable, "f32", false, /*chain=*/false));

  const std::string fwd_f32 = portable_program("router", kFwd, portable, "f32", false).name;
  const std::string fwd_f32_acc = portable_program("router", kFwd, portable, "f32", true).name;

  // fwd
  json fwd = json::array();
  for (const FwdTile& t : kFusedTiles)
    fwd.push_back({{"name", "fwd_bf16x3_fused_sm90_" + t.tile.tag()},
                   {"stages",
                    {stage(kParts, kSplitF32, {{"in", "w"}, {"out", "scratch.0"}}),
                     stage(sm90_program("router", kFwd, t.tile, "f32", false).name, 0,
                           {{"a", "x"}, {"b", "scratch.0"}, {"out", "logits"}})}},
                   {"window", fwd_window("f32", t.max_e)},
                   {"scratch", json::array({buffer({"e", "h"}, "x", 3)})},
                   {"note", "f32 w = hi + mid + lo (bf16): one GEMM with the parts as B, x read once"}});
  for (const FwdTile& t : kFwdTiles)
    fwd.push_back({{"name", "fwd_bf16w_sm90_" + t.tile.tag()},
                   {"stages",
                    {stage(sm90_program("router", kFwd, t.tile, "f32", false).name, 0,
                           {{"a", "x"}, {"b", "w"}, {"out", "logits"}})}},
                   {"window", fwd_window("bf16", t.max_e)},
                   {"note", "bf16 w: one GEMM, exact products, f32 accumulation"}});
  for (const FwdTile& t : kFwdTiles) {
    const std::string first = sm90_program("router", kFwd, t.tile, "f32", false).name,
                      rest = sm90_program("router", kFwd, t.tile, "f32", true).name;
    fwd.push_back({{"name", "fwd_bf16x3_sm90_" + t.tile.tag()},
                   {"stages",
                    {stage(kParts, kSplitF32, {{"in", "w"}, {"out", "scratch.0"}}),
                     stage(first, 0, {{"a", "x"}, {"b", "w_hi"}, {"out", "logits"}}),
                     stage(rest, 0, {{"a", "x"}, {"b", "w_mid"}, {"out", "logits"}}),
                     stage(rest, 0, {{"a", "x"}, {"b", "w_lo"}, {"out", "logits"}})}},
                   {"window", fwd_window("f32", t.max_e)},
                   {"scratch", json::array({buffer({"e", "h"}, "x", 3)})},
                   {"note", "f32 w = hi + mid + lo (bf16): three GEMMs into logits (the fused route's fallback)"}});
  }
  fwd.push_back({{"name", "fwd_bf16w_portable_" + portable.tag()},
                 {"stages", {stage(fwd_f32, 0, {{"a", "x"}, {"b", "w"}, {"out", "logits"}})}},
                 {"window", window("sm_80+", {{"logits", "f32"}, {"x", "bf16"}, {"w", "bf16"}})},
                 {"note", "bf16 w: one GEMM, exact products, f32 accumulation"}});
  fwd.push_back({{"name", "fwd_bf16x3_portable_" + portable.tag()},
                 {"stages",
                  {stage(kParts, kSplitF32, {{"in", "w"}, {"out", "scratch.0"}}),
                   stage(fwd_f32, 0, {{"a", "x"}, {"b", "w_hi"}, {"out", "logits"}}),
                   stage(fwd_f32_acc, 0, {{"a", "x"}, {"b", "w_mid"}, {"out", "logits"}}),
                   stage(fwd_f32_acc, 0, {{"a", "x"}, {"b", "w_lo"}, {"out", "logits"}})}},
                 {"window", window("sm_80+", {{"logits", "f32"}, {"x", "bf16"}, {"w", "f32"}})},
                 {"scratch", json::array({buffer({"e", "h"}, "x", 3)})},
                 {"note", "f32 w = hi + mid + lo (bf16): three GEMMs into logits, exact products"}});
  f.routes.push_back({{"op", "router_gemm.fwd"}, {"candidates", fwd}});

  // dgrad: dlogits' [T, P E] and w' [P E, H] in scratch (P = 3 bf16 w, 6 f32 w), one GEMM.
  json dgrad = json::array();
  for (const std::string wt : {"bf16", "f32"}) {
    const int split_w = wt == "f32" ? kSplitF32 : kSplitBf16;
    // Bytes: T x P E and P E x H bf16 = T E x (P / 2) x 4 (f32) or x P x 2 (bf16).
    const json scratch = wt == "f32" ? json::array({buffer({"t", "e"}, "dlogits", 3), buffer({"e", "h"}, "w", 3)})
                                     : json::array({buffer({"t", "e"}, "w", 3), buffer({"e", "h"}, "w", 3)});
    const json splits = {stage(kParts, kSplitF32, {{"in", "dlogits"}, {"out", "scratch.0"}}),
                         stage(kParts, split_w, {{"in", "w"}, {"out", "scratch.1"}})};
    for (const std::string out : {"bf16", "f32"}) {
      std::vector<std::tuple<std::string, std::string, std::string>> gemms;
      const Sm90Tile& tile = out == "bf16" ? sm90 : kDgradF32;
      gemms.emplace_back("sm90_" + tile.tag(), sm90_program("router", kDgrad, tile, out, false).name, "sm_90a");
      gemms.emplace_back("portable_" + portable.tag(), portable_program("router", kDgrad, portable, out, false).name, "sm_80+");
      for (const auto& [tag, prog, arch] : gemms) {
        json stages = splits;
        stages.push_back(stage(prog, 0, {{"a", "scratch.0"}, {"b", "scratch.1"}, {"out", "dx"}}));
        dgrad.push_back({{"name", "dgrad_" + out + "_" + wt + "w_" + tag},
                         {"stages", stages},
                         {"window", window(arch, {{"dx", out}, {"dlogits", "f32"}, {"w", wt}})},
                         {"scratch", scratch},
                         {"note", wt == "f32" ? "6 products of bf16 parts along E, one GEMM"
                                              : "3 parts of dlogits along E, one GEMM"}});
      }
    }
  }
  f.routes.push_back({{"op", "router_gemm.dgrad"}, {"candidates", dgrad}});

  // wgrad: dlogits' [T, 3 E] in scratch (and the chunks' ends), dw' [chunks, 3 E, H] f32 =
  // dlogits'^T x chunk by chunk, then the sum.
  json wgrad = json::array();
  for (const bool acc : {false, true}) {
    for (const auto& [tag, prog, arch] :
         {std::tuple{"sm90_" + sm90.tag(), sm90_program("router", kWgrad, sm90, "f32", false).name, "sm_90a"},
          std::tuple{"portable_" + portable.tag(), portable_program("router", kWgrad, portable, "f32", false).name,
                     "sm_80+"}}) {
      json c = {{"name", std::string(acc ? "wgrad_acc_" : "wgrad_") + tag},
                {"stages",
                 {stage(kParts, kSplitF32, {{"in", "dlogits"}, {"out", "scratch.0"}, {"offs", "scratch.2"}}),
                  stage(prog, 0, {{"a", "scratch.0"}, {"b", "x"}, {"out", "scratch.1"}, {"offs", "scratch.2"}}),
                  stage(kParts, acc ? kSumAccumulate : kSum, {{"in", "scratch.1"}, {"out", "dw"}})}},
                {"window", window(arch, {{"dw", "f32"}, {"dlogits", "f32"}, {"x", "bf16"}})},
                // dlogits' parts; the products, per chunk; the chunks' ends (int32, one per E).
                {"scratch", json::array({buffer({"t", "e"}, "x", 3), per_chunk({"e", "h"}, "dw", 3),
                                         per_chunk({"e"}, "dw", 1)})},
                {"note", acc ? "3 parts of dlogits, one GEMM over chunks of rows, dw += their sum"
                             : "3 parts of dlogits, one GEMM over chunks of rows, dw = their sum"}};
      if (acc) c["accumulate"] = "fused";
      wgrad.push_back(c);
    }
  }
  f.routes.push_back({{"op", "router_gemm.wgrad"}, {"candidates", wgrad}});
  return f;
}

}  // namespace cake::codegen
