// A small valid registry document over the embedded elementwise template, for tests that
// mutate it (registry validation) or plan over it (planner).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "availability.hpp"
#include "nvrtc.hpp"
#include "registry.hpp"

namespace cake::test {

inline const std::string kHash(64, 'a');

// Availability for planner tests: every build of `reg` is served by JIT.
inline auto all_jit(std::shared_ptr<const Registry> reg) {
  return [reg](const Program& p, const Arch& a) {
    Availability av;
    av.by = ServedBy::jit;
    av.build = reg->build(p.name, a);
    return av;
  };
}

// What a compile returns, without NVRTC: not loadable, one lowered name per kernel.
inline CompiledBinary fake_binary(const RenderedProgram& p) {
  CompiledBinary b;
  b.cubin = "\x7f" "ELF fake cubin for " + p.name;
  for (size_t i = 0; i < p.name_expressions.size(); ++i) b.lowered_names.push_back("_Zfake" + std::to_string(i));
  return b;
}

inline nlohmann::json fixture_registry() {
  using nlohmann::json;
  auto program = [](const std::string& name, json archs) {
    return json{{"name", name},
                {"template", "smxx_elementwise.cuh"},
                {"kernels", {"cake::ew::add<float, float, float, 1>"}},
                {"archs", archs}};
  };
  auto build = [](const std::string& name, const std::string& arch, const std::string& min_cuda) {
    return json{{"program", name},
                {"arch", arch},
                {"min_cuda", min_cuda},
                {"options", {"--gpu-architecture=" + arch}},
                {"source_hash", kHash}};
  };
  return json{
      {"family", "fx"},
      {"programs", {program("p1", {"sm_90a"}), program("p2", {"sm_80", "sm_90a"})}},
      {"builds",
       {build("p1", "sm_90a", "12.0"), build("p2", "sm_80", "12.0"), build("p2", "sm_90a", "12.0")}},
      {"routes",
       {{{"op", "fx.op"},
         {"candidates",
          {{{"name", "c1"}, {"stages", {{{"program", "p1"}}}}, {"window", {{"archs", {"sm_90a"}}}}},
           {{"name", "c2"}, {"stages", {{{"program", "p2"}}}}}}}}}}};
}

}  // namespace cake::test
