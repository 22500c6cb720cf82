// The one renderer: registry program -> the exact source NVRTC compiles, the embedded
// headers it includes, and the source hash that build.json records. `cakec render`, the
// prebuild and the runtime's JIT all call this, so their hashes agree by construction.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "registry.hpp"

namespace cake {

struct RenderedProgram {
  std::string name;
  std::string source;                                        // the program's own .cu text
  std::vector<std::pair<std::string, std::string>> headers;  // include closure, by name
  std::vector<std::string> name_expressions;                 // kernels, in registry order
  std::string source_hash;                                   // sha256 over source + headers
};

RenderedProgram render(const Program& program);

// NVRTC options for a program on an arch: what build.json records.
std::vector<std::string> default_nvrtc_options(const Arch& arch);

// Every program's template is embedded in this library, else a RegistryError naming the
// program's place ("<file>: /programs/3/template"). The JIT layer embeds the templates, so
// this check is its own, run where a registry is loaded for use (Runtime, cakec).
void check_templates(const Registry& registry);

// The embedded headers `templ` includes, itself first, transitively; throws if one is missing.
std::vector<std::pair<std::string, std::string>> include_closure(const std::string& templ);

}  // namespace cake
