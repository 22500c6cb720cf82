// dense_gemm: the BF16 projection GEMM of a training step, y = x w^T over T tokens, and the
// same over a batch of heads. Ops dense_gemm.fwd (y = x w^T), .dgrad (dx = dy w), .wgrad
// (dw = dy^T x, bf16 or f32 out, optionally accumulating into dw). The programs are the GEMM
// kernels of templates/common/ with one group of T rows (a batch: B groups of T rows, w and
// dw [B, N, K]).
// The default routes are deterministic: a tile is reduced in one fixed order, and the last
// wave's split along the reduction sums its parts in a fixed order too. One is not, and is
// taken only with deterministic = false: wgrad accumulating into f32 with T's rows split into
// parts whose tiles reduce-add into dw as they finish (gemm_contract.h reduce_parts), for
// a dw of 136-256 rows (N), whose few tiles leave most SMs idle.
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

// The weight (for wgrad, dw) is stored [N, K] (kn = 0) or [K, N] (kn = 1, a transposed view).
// [K, N] runs the other row op's kernel, or wgrad's with its operands swapped: x w with w [K, N]
// is dgrad's form, dy w^T is fwd's, x^T dy is wgrad's with the roles of dy and x exchanged.
struct Layout {
  int kn;
  const char* tag;  // in route names
};
const Layout kLayouts[] = {{0, ""}, {1, "_kn"}};

// The kernel op and its operands that serve `op` in `layout`.
OpSpec kernel_for(const OpSpec& op, const Layout& layout) {
  if (layout.kn == 0) return op;
  if (op.index == gemm::kOpFwd) return {{"dgrad", gemm::kOpDgrad}, "x", "w", "y"};
  if (op.index == gemm::kOpDgrad) return {{"fwd", gemm::kOpFwd}, "dy", "w", "dx"};
  return {{"wgrad", gemm::kOpWgrad}, "x", "dy", "dw"};
}

json window(const OpSpec& op, const Layout& layout, const std::string& arch, const std::string& out) {
  return {{"archs", {arch}},
          {"dims", {{"kn", {layout.kn, layout.kn}}}},
          {"dtypes", {{op.a, "bf16"}, {op.b, "bf16"}, {op.out, out}}},
          {"divisible", {{"n", 8}, {"k", 8}}},
          {"align", {{op.a, 16}, {op.b, 16}, {op.out, 16}}}};
}

json gemm_stage(const std::string& program, const OpSpec& kernel, const std::string& out) {
  return {{"program", program}, {"kernel", 0}, {"bind", {{"a", kernel.a}, {"b", kernel.b}, {"out", out}}}};
}

std::string route_prefix(const OpSpec& op, const Layout& layout, const std::string& out, bool acc) {
  if (op.index != gemm::kOpWgrad) return op.name + std::string(out == "bf16" ? "" : "_" + out) + layout.tag;
  return std::string(op.name) + (acc ? "_acc_" : "_") + out + (acc ? "_fused" : "") + layout.tag;
}

// Narrower tiles for a skinny y (fwd; with a [K, N] weight, dgrad's kernel): the 256-column
// tile would compute zeros past N, so at N <= 128 it does twice and at N <= 64 four times
// the work that is needed, which costs a bandwidth-bound fwd 30-40 % (docs/perf.md). Fewer
// columns leave shared memory for more stages. Narrowest first: the planner takes the first
// candidate whose window holds the call.
struct NarrowTile {
  Sm90Tile tile;
  int64_t max_n;
  int64_t max_t = 0;  // 0: any T
};
const NarrowTile kNarrowFwd[] = {{{128, 64, 8}, 64}, {{128, 128, 6}, 128}};
// An f32 y (fwd): the sm90 kernel holds an FP32 tile whole only up to 192 columns, so wide y
// takes 128-column tiles; N <= 64 the 64-column one.
const NarrowTile kFwdF32[] = {{{128, 64, 8}, 64}, {{128, 128, 6}, 0}};

// wgrad's narrow tiles: a skinny dw (N <= 128) has N rows, so the 128 x 256 tile gives K / 256
// tiles (16 at K = 4096), which split into at most kMaxSplitParts parts still leave half the
// SMs idle. 128 columns double the tiles; a [K, N] dw (its rows are K) computes no columns
// past N. At N <= 64 and T <= 16384, 64 columns double them again; over longer T each tile's
// extra pass over dy costs more than the SMs gain (docs/decisions.md). Every wgrad route of
// such a dw takes the same tile, composed ones too, so that they agree bitwise. Narrowest first.
const NarrowTile kNarrowWgrad[] = {{{128, 64, 8}, 64, 16384}, {{128, 128, 6}, 128}};
constexpr int64_t kNarrowWgradMaxN = 128;  // the widest narrow tile's N bound

// `w` narrowed to the tile's N and T bounds (0: any).
json narrow_window(json w, const NarrowTile& narrow) {
  if (narrow.max_n > 0) w["dims"]["n"] = {8, narrow.max_n};
  if (narrow.max_t > 0) w["dims"]["t"] = {0, narrow.max_t};
  return w;
}

// fwd above a narrow tile's N bound, while its tiles make one wave: at small T the wide tile
// leaves most SMs idle and splits each tile's K into up to 4 parts that pass FP32 sums, and the
// narrowest tile that still fits one wave fills them (docs/decisions.md, "fwd tiles chosen by
// the waves they make").
json one_wave_window(json w, const Sm90Tile& t) {
  w["tiles"] = {{"per", {{"b", 1}, {"t", t.bm}, {"n", t.bn}}}, {"waves", {0, 1}}};
  return w;
}

// fwd's candidates on the narrow tiles, narrowest first: each by its N bound, then by the
// one-wave rule.
void add_narrow_fwd(json& candidates, const std::string& prefix, const OpSpec& op, const OpSpec& kernel,
                    const Layout& layout, const std::string& out, const NarrowTile* tiles, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const NarrowTile& narrow = tiles[i];
    const std::string kn_note = layout.kn ? " ([K, N] weight: the dgrad kernel)" : "";
    json c = {{"name", prefix + "_sm90_" + narrow.tile.tag()},
              {"stages", {gemm_stage(sm90_program("dense", kernel, narrow.tile, out, false).name, kernel, op.out)}},
              {"window", narrow_window(window(op, layout, "sm_90a", out), narrow)},
              {"note", (narrow.max_n > 0 ? "N <= " + std::to_string(narrow.max_n) + ": a " +
                                               std::to_string(narrow.tile.bn) + "-column tile computes no columns past N"
                                         : std::string("f32 y: FP32 tiles of at most 128 columns")) +
                           kn_note}};
    candidates.push_back(c);
    if (narrow.max_n == 0) continue;
    c["name"] = prefix + "_sm90_" + narrow.tile.tag() + "_one_wave";
    c["window"] = one_wave_window(window(op, layout, "sm_90a", out), narrow.tile);
    c["note"] = "its tiles make one wave: every SM a tile, fewer split parts" + kn_note;
    candidates.push_back(c);
  }
}

// The non-deterministic wgrad accumulate (listed before the deterministic one, so that a
// call that allows it gets it in its window): dw of 136-256 rows (N) and at most 8192 columns
// has at most 64 tiles of 128 x 256, half the SMs or fewer, and T of at least two parts. At
// N <= 128 the deterministic route's 128-column tiles fill the SMs and the split gains under
// 10 % (docs/decisions.md), so it is not offered there.
json reduce_candidate(const OpSpec& op, const Layout& layout, const OpSpec& kernel, const Sm90Tile& sm90) {
  json w = window(op, layout, "sm_90a", "f32");
  w["dims"]["b"] = {1, 1};
  w["dims"]["n"] = {kNarrowWgradMaxN + 8, 256};
  w["dims"]["k"] = {8, 8192};
  w["dims"]["t"] = {2 * gemm::kMinReducePartRows, nullptr};
  return {{"name", std::string("wgrad_acc_f32_reduce") + layout.tag + "_sm90_" + sm90.tag()},
          {"stages", {gemm_stage(sm90_reduce_program("dense", sm90).name, kernel, op.out)}},
          {"window", w},
          {"accumulate", "fused"},
          {"deterministic", false},
          {"note", "T split into parts whose tiles reduce-add into dw as they finish: not bitwise repeatable"}};
}

}  // namespace

FamilySpec family_spec_dense_gemm() {
  FamilySpec f;
  f.name = "dense_gemm";
  // The grouped GEMM's measured tiles; a skinny fwd or wgrad takes a narrower one (kNarrowFwd,
  // kNarrowWgrad).
  const Sm90Tile sm90;
  const PortableTile portable;
  for (const OpSpec& op : kOps) {
    // Each op's programs (its kernel op's, for every out kind), listed once.
    for (const auto& [out, acc] : out_kinds(op)) {
      add_sm90_with_stand_in(f.programs, "dense", op, sm90, out, acc);
      if (op.index == gemm::kOpWgrad)
        for (const NarrowTile& narrow : kNarrowWgrad) add_sm90_with_stand_in(f.programs, "dense", op, narrow.tile, out, acc);
      f.programs.push_back(portable_program("dense", op, portable, out, acc));
    }
    if (op.index == gemm::kOpWgrad) f.programs.push_back(sm90_reduce_program("dense", sm90));
    // fwd's narrow tiles, for its own kernel and (a [K, N] weight) dgrad's.
    if (op.index != gemm::kOpWgrad)
      for (const NarrowTile& narrow : kNarrowFwd) add_sm90_with_stand_in(f.programs, "dense", op, narrow.tile, "bf16", false);
    // An f32 y (logits, say): fwd's kernel, or dgrad's for a [K, N] weight, on 64- and
    // 128-column sm90 tiles or the portable tile. No compact stand-ins: FP32 tiles roll nothing.
    if (op.index != gemm::kOpWgrad) {
      for (const NarrowTile& t : kFwdF32) f.programs.push_back(sm90_program("dense", op, t.tile, "f32", false));
      f.programs.push_back(portable_program("dense", op, portable, "f32", false));
    }
  }
  for (const OpSpec& op : kOps) {
    json candidates = json::array();
    for (const Layout& layout : kLayouts) {
      const OpSpec kernel = kernel_for(op, layout);
      for (const auto& [out, acc] : out_kinds(op)) {
        const std::string prefix = route_prefix(op, layout, out, acc);
        if (op.index == gemm::kOpFwd)
          add_narrow_fwd(candidates, prefix, op, kernel, layout, out, kNarrowFwd, std::size(kNarrowFwd));
        json hopper = {{"name", prefix + "_sm90_" + sm90.tag()},
                       {"stages", {gemm_stage(sm90_program("dense", kernel, sm90, out, acc).name, kernel, op.out)}},
                       {"window", window(op, layout, "sm_90a", out)},
                       {"note", acc ? "out += dW in the epilogue, rounded once to f32" : "TMA + wgmma, persistent"}};
        json port = {{"name", prefix + "_portable_" + portable.tag()},
                     {"stages", {gemm_stage(portable_program("dense", kernel, portable, out, acc).name, kernel, op.out)}},
                     {"window", window(op, layout, "sm_80+", out)},
                     {"note", acc ? "out += dW in the epilogue (mma.sync)" : "mma.sync, any sm_80+ part"}};
        if (layout.kn) {
          hopper["note"] = port["note"] = std::string("[K, N] weight: the ") + kernel.name + " kernel" +
                                          (op.index == gemm::kOpWgrad ? " with x and dy exchanged" : "");
        }
        if (acc) hopper["accumulate"] = "fused", port["accumulate"] = "fused";
        if (acc) candidates.push_back(reduce_candidate(op, layout, kernel, sm90));
        if (op.index == gemm::kOpWgrad)
          for (const NarrowTile& tile : kNarrowWgrad) {
            const Sm90Tile& t = tile.tile;
            json narrow = hopper;
            narrow["name"] = prefix + "_sm90_" + t.tag();
            narrow["stages"] = {gemm_stage(sm90_program("dense", kernel, t, out, acc).name, kernel, op.out)};
            narrow["window"] = narrow_window(window(op, layout, "sm_90a", out), tile);
            narrow["note"] = "N <= " + std::to_string(tile.max_n) +
                             (tile.max_t > 0 ? ", T <= " + std::to_string(tile.max_t) : std::string()) + ": " +
                             std::to_string(t.bn) + "-column tiles, " + std::to_string(256 / t.bn) +
                             "x as many for the SMs" + (layout.kn ? " ([K, N] dw)" : "");
            candidates.push_back(narrow);
          }
        candidates.push_back(hopper);
        candidates.push_back(port);
      }
      if (op.index == gemm::kOpFwd) {
        const std::string prefix = route_prefix(op, layout, "f32", false);
        add_narrow_fwd(candidates, prefix, op, kernel, layout, "f32", kFwdF32, std::size(kFwdF32));
        candidates.push_back(
            {{"name", prefix + "_portable_" + portable.tag()},
             {"stages", {gemm_stage(portable_program("dense", kernel, portable, "f32", false).name, kernel, op.out)}},
             {"window", window(op, layout, "sm_80+", "f32")},
             {"note", "f32 y: mma.sync, any sm_80+ part"}});
      }
      if (op.index != gemm::kOpWgrad) continue;
      // Composed accumulate: dW into a scratch of dw's dtype, then dw = dw + scratch. For f32
      // it is bitwise the fused result and serves when no fused candidate can; bf16
      // accumulates only composed (dW rounded to bf16 first, as every route must agree).
      for (const std::string out : {"f32", "bf16"}) {
        const std::string add = out == "bf16" ? "ew_add_bf16_v8" : "ew_add_f32_v4";
        std::vector<std::tuple<std::string, std::string, std::string, NarrowTile>> choices;
        for (const NarrowTile& narrow : kNarrowWgrad)
          choices.emplace_back("sm90_" + narrow.tile.tag(), sm90_program("dense", kernel, narrow.tile, out, false).name,
                               "sm_90a", narrow);
        choices.emplace_back("sm90", sm90_program("dense", kernel, sm90, out, false).name, "sm_90a", NarrowTile{});
        choices.emplace_back("portable", portable_program("dense", kernel, portable, out, false).name, "sm_80+",
                             NarrowTile{});
        for (const auto& [tag, prog, arch, narrow] : choices) {
          candidates.push_back(
              {{"name", "wgrad_acc_" + out + "_composed" + layout.tag + "_" + tag},
               {"stages",
                {gemm_stage(prog, kernel, "scratch"),
                 {{"program", add}, {"bind", {{"out", "dw"}, {"a", "dw"}, {"b", "scratch"}}}}}},
               {"window", narrow_window(window(op, layout, arch, out), narrow)},
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
