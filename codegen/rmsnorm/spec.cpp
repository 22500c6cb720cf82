// rmsnorm: training forward (optional residual add; y, rstd) and backward (dx, and dw through
// a deterministic two-stage reduction: per-chunk partial column sums, then a finalize).
// The forward and backward programs are parametric on the hidden size H: the planner takes
// the instance for the call's H (the row stays in registers; geometry from the contract's
// rule), and a generic program (runtime H, long rows streamed) serves H outside that domain.
// Windows choose only what is not a function of H: weight dtype, residual, and T ranges for
// the dw chunking. Launch geometry comes from rmsnorm_contract.h.
#include "family.hpp"
#include "rmsnorm_contract.h"

namespace cake::codegen {
namespace {

using nlohmann::json;

const char* kHeader = "smxx_rmsnorm.cuh";
const std::vector<std::string> kWeights = {"bf16", "f32"};
// The instances `cakec build` prebuilds: common hidden sizes.
const std::vector<int> kPrebuildH = {2048, 4096, 5120, 7168, 8192};

// Rows of a chunk for the dw partial sums. The bits of dw depend on it (and on the block
// width), so each candidate fixes both: 32 for short inputs (more blocks), 64 above.
constexpr int kSmallChunk = 32, kLargeChunk = 64;
constexpr int64_t kSmallT = 16384;       // t <= this: kSmallChunk
constexpr int64_t kCompensatedT = 131072;  // t >= this: compensated (two-sum) column sums

std::string ctype(const std::string& w) { return w == "bf16" ? "cake::bf16" : "float"; }

// H as a kernel template argument, and the contract's geometry for it: the instance's value
// ("{h}", spelled into the name expression) or the generic program's 0.
struct Geometry {
  std::string h, fwd_vec, fwd_threads, bwd_vec, bwd_threads;
};
Geometry parametric() {
  return {"{h}", "cake::rms::fwd_vec({h})", "cake::rms::fwd_threads({h})", "cake::rms::bwd_vec({h})",
          "cake::rms::bwd_threads({h})"};
}
Geometry generic() {
  return {"0", std::to_string(rms::fwd_vec(0)), std::to_string(rms::fwd_threads(0)), std::to_string(rms::bwd_vec(0)),
          std::to_string(rms::bwd_threads(0))};
}

json instance_domain(int max_h) {
  json pre = json::array();
  for (int h : kPrebuildH)
    if (h <= max_h) pre.push_back({{"h", h}});
  return {{"dims", {{"h", {{"range", {rms::kSpecialisedMinH, max_h}}, {"divisible", 8}}}}}, {"prebuild", pre}};
}

json align(std::initializer_list<const char*> args) {
  json a = json::object();
  for (const char* x : args) a[x] = 16;
  return a;
}

}  // namespace

FamilySpec family_spec_rmsnorm() {
  FamilySpec f;
  f.name = "rmsnorm";
  json fwd = json::array(), bwd = json::array();

  // The parametric programs first (rms_fwd, rms_bwd), then the generic ones (_hany): a call
  // whose H is outside the parametric domain passes the first over (reason "instance").
  for (const bool param : {true, false}) {
    const Geometry g = param ? parametric() : generic();
    const std::string tag = param ? "" : "_hany";
    // forward: kernels (w, residual) in order bf16/0, bf16/1, f32/0, f32/1
    ProgramSpec pf;
    pf.name = "rms_fwd" + tag;
    pf.templ = kHeader;
    pf.archs = kPortableArchs;
    json kparams = json::array();
    for (const auto& w : kWeights)
      for (bool res : {false, true}) {
        pf.kernels.push_back("cake::rms::fwd<" + ctype(w) + ", " + g.h + ", " + g.fwd_vec + ", " + g.fwd_threads + ", " +
                             (res ? "true" : "false") + ">");
        kparams.push_back({{"w", w}, {"residual", res}});
      }
    pf.params = {{"op", "fwd"}, {"kernels", kparams}};
    if (param) pf.instance = instance_domain(rms::kFwdSpecialisedMaxH);
    else pf.params["h"] = 0;
    f.programs.push_back(pf);
    for (size_t k = 0; k < kparams.size(); ++k) {
      std::string w = kparams[k]["w"];
      bool res = kparams[k]["residual"];
      json win = {{"archs", {"sm_80+"}},
                  {"dtypes", {{"w", w}}},
                  {"dims", {{"residual", {res ? 1 : 0, res ? 1 : 0}}}},
                  {"divisible", {{"h", 8}}},
                  {"align", res ? align({"x", "y", "w", "residual", "h_out"}) : align({"x", "y", "w"})}};
      fwd.push_back({{"name", "fwd" + tag + "_w" + w + (res ? "_residual" : "")},
                     {"stages", {{{"program", pf.name}, {"kernel", int(k)}}}},
                     {"window", win},
                     {"note", param ? "specialised on H: row in registers" : "any H multiple of 8, row streamed when long"}});
    }

    // backward: kernels (w, chunk, compensated) in order
    ProgramSpec pb;
    pb.name = "rms_bwd" + tag;
    pb.templ = kHeader;
    pb.archs = kPortableArchs;
    json bparams = json::array();
    for (const auto& w : kWeights)
      for (auto [chunk, comp] : {std::pair{kSmallChunk, false}, std::pair{kLargeChunk, false},
                                 std::pair{kLargeChunk, true}}) {
        pb.kernels.push_back("cake::rms::bwd<" + ctype(w) + ", " + g.h + ", " + g.bwd_vec + ", " + g.bwd_threads + ", " +
                             std::to_string(chunk) + ", " + (comp ? "true" : "false") + ">");
        bparams.push_back({{"w", w}, {"chunk_rows", chunk}, {"compensated", comp}});
      }
    pb.params = {{"op", "bwd"}, {"kernels", bparams}};
    if (param) pb.instance = instance_domain(rms::kBwdSpecialisedMaxH);
    else pb.params["h"] = 0;
    f.programs.push_back(pb);
    for (size_t k = 0; k < bparams.size(); ++k) {
      std::string w = bparams[k]["w"];
      int chunk = bparams[k]["chunk_rows"];
      bool comp = bparams[k]["compensated"];
      json t_range = chunk == kSmallChunk ? json{0, kSmallT}
                     : comp              ? json{kCompensatedT, nullptr}
                                         : json{kSmallT + 1, kCompensatedT - 1};
      json win = {{"archs", {"sm_80+"}},
                  {"dtypes", {{"w", w}}},
                  {"dims", {{"t", t_range}}},
                  {"divisible", {{"h", 8}}},
                  {"align", align({"dy", "x", "dx", "w"})}};
      int fin = (w == "bf16" ? 0 : 2) + (comp ? 1 : 0);
      bwd.push_back({{"name", "bwd" + tag + "_w" + w + "_chunk" + std::to_string(chunk) + (comp ? "_compensated" : "")},
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
      fin.kernels.push_back("cake::rms::dw_finalize<" + ctype(w) + ", " + std::to_string(rms::kFinalizeThreads) + ", " +
                            (comp ? "true" : "false") + ">");
      fparams.push_back({{"w", w}, {"compensated", comp}});
    }
  fin.params = {{"op", "dw_finalize"}, {"kernels", fparams}};
  f.programs.push_back(fin);

  f.routes.push_back({{"op", "rmsnorm.fwd"}, {"candidates", fwd}});
  f.routes.push_back({{"op", "rmsnorm.bwd"}, {"candidates", bwd}});
  return f;
}

}  // namespace cake::codegen
