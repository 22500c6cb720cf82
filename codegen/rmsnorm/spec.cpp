// rmsnorm: training forward (optional residual add; y, rstd) and backward (dx, and dw through
// a deterministic two-stage reduction: per-chunk partial column sums, then a finalize).
// Programs are specialised by hidden size H (the row stays in registers); a generic program
// (runtime H, any multiple of 8) serves the rest, and is the portable (sm_80+) one too.
// Routes are chosen by (H, T, weight dtype, residual). Launch geometry comes from "params".
#include "family.hpp"
#include "rmsnorm_contract.h"

namespace cake::codegen {
namespace {

using nlohmann::json;

const char* kHeader = "smxx_rmsnorm.cuh";
const std::vector<int> kSizes = {256, 512, 1024, 1536, 2048, 4096, 5120, 6144, 8192};
const std::vector<std::string> kWeights = {"bf16", "f32"};

// Rows of a chunk for the dw partial sums. The bits of dw depend on it (and on the block
// width), so each candidate fixes both: 32 for short inputs (more blocks), 64 above.
constexpr int kSmallChunk = 32, kLargeChunk = 64;
constexpr int64_t kSmallT = 16384;       // t <= this: kSmallChunk
constexpr int64_t kCompensatedT = 131072;  // t >= this: compensated (two-sum) column sums

std::string ctype(const std::string& w) { return w == "bf16" ? "cake::bf16" : "float"; }

// Forward threads per block, measured on the H200 with one block per row group (T 16384 and
// 65536, bf16 w, 64 to 1024 threads per H; docs/decisions.md): the
// fastest for each H whose row stays in registers (H 6144: 128 threads were 1 % faster but
// stream a third of the row twice). H 256 and 512 and the generic program were not swept;
// they keep counts that hold a row in registers unspilled.
int fwd_threads(int h) {
  switch (h) {
    case 0: return 1024;
    case 1024: case 1536: case 2048: return 64;
    case 4096: return 128;
    default: return 256;  // 256, 512, 5120, 6144, 8192
  }
}
int bwd_threads(int h) { return h == 0 ? 512 : h <= 2048 ? 256 : 512; }
// bf16 per access in the backward. 16-byte vectors leave lanes idle where H / 8 is not a
// multiple of the block (H 5120: 640 vectors over 512 lanes, 6144: 768); 8-byte ones keep
// them busy (1280 and 1536 vectors: 3 slots a lane), at the same bytes in flight.
int bwd_vec(int h) { return h == 5120 || h == 6144 ? 4 : 8; }
constexpr int kFinalizeThreads = 256;

std::string sfx(int h) { return h == 0 ? "any" : std::to_string(h); }

}  // namespace

FamilySpec family_spec_rmsnorm() {
  FamilySpec f;
  f.name = "rmsnorm";
  json fwd = json::array(), bwd = json::array();
  auto align = [](std::initializer_list<const char*> args) {
    json a = json::object();
    for (const char* x : args) a[x] = 16;
    return a;
  };

  // One candidate list per H: specialised programs for sm_90a, then the generic program.
  for (int h : [] { auto v = kSizes; v.push_back(0); return v; }()) {
    const bool generic = h == 0;
    std::vector<std::string> archs = generic ? kPortableArchs
                                             : std::vector<std::string>{"sm_90a"};
    const std::string arch_pat = generic ? "sm_80+" : "sm_90a";
    // forward: kernels (w, residual) in order bf16/0, bf16/1, f32/0, f32/1
    ProgramSpec pf;
    pf.name = "rms_fwd_h" + sfx(h);
    pf.templ = kHeader;
    pf.archs = archs;
    int ft = fwd_threads(h);
    json kparams = json::array();
    for (const auto& w : kWeights)
      for (bool res : {false, true}) {
        pf.kernels.push_back("cake::rms::fwd<" + ctype(w) + ", " + std::to_string(h) + ", 8, " +
                             std::to_string(ft) + ", " + (res ? "true" : "false") + ">");
        kparams.push_back({{"w", w}, {"residual", res}});
      }
    pf.params = {{"op", "fwd"}, {"h", h}, {"threads", ft}, {"rows_per_block", rms::rows_per_block(h, 8, ft)},
                 {"kernels", kparams}};
    f.programs.push_back(pf);
    for (size_t k = 0; k < kparams.size(); ++k) {
      std::string w = kparams[k]["w"];
      bool res = kparams[k]["residual"];
      json win = {{"archs", {arch_pat}},
                  {"dtypes", {{"w", w}}},
                  {"dims", {{"residual", {res ? 1 : 0, res ? 1 : 0}}}},
                  {"align", res ? align({"x", "y", "w", "residual", "h_out"}) : align({"x", "y", "w"})}};
      if (!generic) win["dims"]["h"] = {h, h};
      else win["divisible"] = {{"h", 8}};
      fwd.push_back({{"name", "fwd_h" + sfx(h) + "_w" + w + (res ? "_residual" : "")},
                     {"stages", {{{"program", pf.name}, {"kernel", int(k)}}}},
                     {"window", win},
                     {"note", generic ? "any H multiple of 8, row streamed when long" : "row kept in registers"}});
    }

    // backward: kernels (w, chunk, compensated) in order
    ProgramSpec pb;
    pb.name = "rms_bwd_h" + sfx(h);
    pb.templ = kHeader;
    pb.archs = archs;
    int bt = bwd_threads(h);
    json bparams = json::array();
    for (const auto& w : kWeights)
      for (auto [chunk, comp] : {std::pair{kSmallChunk, false}, std::pair{kLargeChunk, false},
                                 std::pair{kLargeChunk, true}}) {
        pb.kernels.push_back("cake::rms::bwd<" + ctype(w) + ", " + std::to_string(h) + ", " +
                             std::to_string(bwd_vec(h)) + ", " +
                             std::to_string(bt) + ", " + std::to_string(chunk) + ", " +
                             (comp ? "true" : "false") + ">");
        bparams.push_back({{"w", w}, {"chunk_rows", chunk}, {"compensated", comp}});
      }
    pb.params = {{"op", "bwd"}, {"h", h}, {"threads", bt}, {"rows_per_block", rms::rows_per_block(h, bwd_vec(h), bt)},
                 {"kernels", bparams}};
    f.programs.push_back(pb);
    for (size_t k = 0; k < bparams.size(); ++k) {
      std::string w = bparams[k]["w"];
      int chunk = bparams[k]["chunk_rows"];
      bool comp = bparams[k]["compensated"];
      json t_range = chunk == kSmallChunk ? json{0, kSmallT}
                     : comp              ? json{kCompensatedT, nullptr}
                                         : json{kSmallT + 1, kCompensatedT - 1};
      json win = {{"archs", {arch_pat}},
                  {"dtypes", {{"w", w}}},
                  {"dims", {{"t", t_range}}},
                  {"align", align({"dy", "x", "dx", "w"})}};
      if (!generic) win["dims"]["h"] = {h, h};
      else win["divisible"] = {{"h", 8}};
      int fin = (w == "bf16" ? 0 : 2) + (comp ? 1 : 0);
      bwd.push_back({{"name", "bwd_h" + sfx(h) + "_w" + w + "_chunk" + std::to_string(chunk) + (comp ? "_compensated" : "")},
                     {"stages",
                      {{{"program", pb.name}, {"kernel", int(k)}, {"bind", {{"partial", "scratch"}}}},
                       {{"program", "rms_dw_finalize"}, {"kernel", fin}, {"bind", {{"partial", "scratch"}}}}}},
                     {"window", win},
                     {"scratch", {{"dims", {"h"}}, {"ceil_div", {"t", chunk}}, {"dtype_of", "rstd"}}},
                     {"note", comp ? "two-sum column sums: large T" : "fixed-order column sums"}});
    }
  }

  ProgramSpec fin;
  fin.name = "rms_dw_finalize";
  fin.templ = kHeader;
  fin.archs = kPortableArchs;
  json fparams = json::array();
  for (const auto& w : kWeights)
    for (bool comp : {false, true}) {
      fin.kernels.push_back("cake::rms::dw_finalize<" + ctype(w) + ", " + std::to_string(kFinalizeThreads) + ", " +
                            (comp ? "true" : "false") + ">");
      fparams.push_back({{"w", w}, {"compensated", comp}});
    }
  fin.params = {{"op", "dw_finalize"}, {"threads", kFinalizeThreads}, {"kernels", fparams}};
  f.programs.push_back(fin);

  f.routes.push_back({{"op", "rmsnorm.fwd"}, {"candidates", fwd}});
  f.routes.push_back({{"op", "rmsnorm.bwd"}, {"candidates", bwd}});
  return f;
}

}  // namespace cake::codegen
