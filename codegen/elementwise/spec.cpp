// elementwise: add and cast stages. They are the second half of every composed route
// (compute into scratch, then add), and a small family to prove the pipeline end to end.
#include <map>

#include "family.hpp"

namespace cake::codegen {
namespace {

using nlohmann::json;

const std::vector<std::string> kArchs = kPortableArchs;

std::string ctype(const std::string& dtype) { return dtype == "bf16" ? "cake::bf16" : "float"; }

// Vector width for 16-byte accesses of the narrower type.
int vec_for(const std::string& dtype) { return dtype == "bf16" ? 8 : 4; }

ProgramSpec program(const std::string& name, const std::string& kernel, json params) {
  return {name, "smxx_elementwise.cuh", {kernel}, kArchs, std::move(params)};
}

json vector_window(json dtypes, const std::vector<std::string>& args, int vec) {
  json align = json::object();
  for (const auto& a : args) align[a] = 16;
  return {{"archs", {"sm_80+"}}, {"dtypes", dtypes}, {"divisible", {{"n", vec}}}, {"align", align}};
}

json scalar_window(json dtypes) { return {{"archs", {"sm_80+"}}, {"dtypes", dtypes}}; }

json stage(const std::string& program, json bind) {
  return {{"program", program}, {"bind", bind}};
}

}  // namespace

FamilySpec family_spec_elementwise() {
  FamilySpec f;
  f.name = "elementwise";
  json add_candidates = json::array();
  json cast_candidates = json::array();

  // add: out = a + b, same dtype throughout.
  for (std::string t : {"f32", "bf16"}) {
    int vec = vec_for(t);
    std::string ct = ctype(t);
    json dtypes = {{"out", t}, {"a", t}, {"b", t}};
    json bind = {{"out", "out"}, {"a", "a"}, {"b", "b"}};
    for (int v : {vec, 1}) {
      std::string name = "ew_add_" + t + "_v" + std::to_string(v);
      f.programs.push_back(program(
          name, "cake::ew::add<" + ct + ", " + ct + ", " + ct + ", " + std::to_string(v) + ">",
          {{"op", "add"}, {"dtype", t}, {"vec", v}}));
      add_candidates.push_back(
          {{"name", v > 1 ? "add_" + t + "_vec" + std::to_string(v) : "add_" + t},
           {"stages", {stage(name, bind)}},
           {"window", v > 1 ? vector_window(dtypes, {"out", "a", "b"}, v) : scalar_window(dtypes)},
           {"note", v > 1 ? "16-byte accesses" : "any length and alignment"}});
    }
  }

  // cast: out = (out dtype) in, both directions between f32 and bf16.
  for (auto [to, from] : {std::pair{"bf16", "f32"}, std::pair{"f32", "bf16"}}) {
    std::string to_s = to, from_s = from;
    json dtypes = {{"out", to_s}, {"in", from_s}};
    for (int v : {8, 1}) {
      std::string name = "ew_cast_" + to_s + "_" + from_s + "_v" + std::to_string(v);
      f.programs.push_back(program(name,
                                   "cake::ew::cast<" + ctype(to_s) + ", " + ctype(from_s) + ", " +
                                       std::to_string(v) + ">",
                                   {{"op", "cast"}, {"out", to_s}, {"in", from_s}, {"vec", v}}));
      cast_candidates.push_back(
          {{"name", "cast_" + from_s + "_to_" + to_s + (v > 1 ? "_vec8" : "")},
           {"stages", {stage(name, {{"out", "out"}, {"in", "in"}})}},
           {"window", v > 1 ? vector_window(dtypes, {"out", "in"}, v) : scalar_window(dtypes)},
           {"note", v > 1 ? "16-byte stores" : "any length and alignment"}});
    }
  }

  // cast with accumulate into f32: fused (one pass, rounded once) ...
  json acc_dtypes = {{"out", "f32"}, {"in", "bf16"}};
  for (int v : {8, 1}) {
    std::string name = "ew_cast_acc_f32_bf16_v" + std::to_string(v);
    f.programs.push_back(program(
        name, "cake::ew::cast_accumulate<float, cake::bf16, " + std::to_string(v) + ">",
        {{"op", "cast_accumulate"}, {"out", "f32"}, {"in", "bf16"}, {"vec", v}}));
    cast_candidates.push_back(
        {{"name", std::string("cast_acc_bf16_to_f32_fused") + (v > 1 ? "_vec8" : "")},
         {"stages", {stage(name, {{"out", "out"}, {"in", "in"}})}},
         {"window", v > 1 ? vector_window(acc_dtypes, {"out", "in"}, v) : scalar_window(acc_dtypes)},
         {"accumulate", "fused"},
         {"note", "out += in in one pass"}});
  }
  // ... and composed, for when the fused program cannot be served: cast into a scratch of
  // out's dtype, then add. Bitwise equal to the fused form for f32 (the cast is exact).
  cast_candidates.push_back(
      {{"name", "cast_acc_bf16_to_f32_composed"},
       {"stages",
        {stage("ew_cast_f32_bf16_v1", {{"out", "scratch"}, {"in", "in"}}),
         stage("ew_add_f32_v1", {{"out", "out"}, {"a", "out"}, {"b", "scratch"}})}},
       {"window", scalar_window(acc_dtypes)},
       {"accumulate", "composed"},
       {"scratch", {{"dims", {"n"}}, {"dtype_of", "out"}}},
       {"note", "fallback: cast -> scratch, add"}});
  json acc_bf16 = {{"out", "bf16"}, {"in", "f32"}};
  cast_candidates.push_back(
      {{"name", "cast_acc_f32_to_bf16_composed"},
       {"stages",
        {stage("ew_cast_bf16_f32_v1", {{"out", "scratch"}, {"in", "in"}}),
         stage("ew_add_bf16_v1", {{"out", "out"}, {"a", "out"}, {"b", "scratch"}})}},
       {"window", scalar_window(acc_bf16)},
       {"accumulate", "composed"},
       {"scratch", {{"dims", {"n"}}, {"dtype_of", "out"}}},
       {"note", "no fused bf16 accumulate: cast -> scratch, add"}});

  f.routes.push_back({{"op", "elementwise.add"}, {"candidates", add_candidates}});
  f.routes.push_back({{"op", "elementwise.cast"}, {"candidates", cast_candidates}});
  return f;
}


}  // namespace cake::codegen
