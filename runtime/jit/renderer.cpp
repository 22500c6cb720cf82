#include "renderer.hpp"

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "embedded.hpp"
#include "error.hpp"
#include "instance_table.hpp"
#include "sha256.hpp"

namespace cake {

namespace {
const std::string_view* find_template(const std::string& name) {
  for (const auto& f : embedded_templates())
    if (f.name == name) return &f.content;
  return nullptr;
}
}  // namespace

void check_templates(const Registry& registry) {
  for (const auto& p : registry.programs())
    if (find_template(p.templ) == nullptr)
      throw RegistryError(p.origin.str() + "/template", "unknown template '" + p.templ + "'");
}

std::vector<std::pair<std::string, std::string>> include_closure(const std::string& templ) {
  static const std::regex include_re("^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"");
  std::map<std::string, std::string> found;
  std::vector<std::string> todo{templ};
  while (!todo.empty()) {
    std::string name = todo.back();
    todo.pop_back();
    if (found.count(name)) continue;
    const std::string_view* content = find_template(name);
    if (content == nullptr) throw Error("template '" + name + "' is not embedded in this library");
    found.emplace(name, std::string(*content));
    std::istringstream lines(found[name]);
    std::smatch m;
    for (std::string line; std::getline(lines, line);)
      if (std::regex_search(line, m, include_re)) todo.push_back(m[1]);
  }
  std::vector<std::pair<std::string, std::string>> out(found.begin(), found.end());
  return out;  // sorted by name: the hash must not depend on discovery order
}

RenderedProgram render(const Program& program) {
  RenderedProgram r;
  r.name = program.name;
  r.name_expressions = program.kernels;
  std::string& s = r.source;
  s += "// cake program " + program.name + " (template " + program.templ + ")\n";
  // NVRTC instantiates each kernel from its name expression (nvrtcAddNameExpression); the
  // lowered names come back from nvrtcGetLoweredName. Host code is not allowed in JIT mode.
  for (const auto& k : program.kernels) s += "// kernel: " + k + "\n";
  s += "#include \"" + program.templ + "\"\n";
  r.headers = include_closure(program.templ);

  if (program.instance_of != nullptr) {
    // An instance's hash is derived from its parametric program's (instance_table.hpp), so
    // the planner knows it without rendering.
    r.source_hash = instance_source_hash(render(*program.instance_of).source_hash, program.name);
    return r;
  }
  Sha256 h;
  h.field("cake-source-v1").field(r.source);
  for (const auto& [name, content] : r.headers) h.field(name).field(content);
  r.source_hash = h.hex();
  return r;
}

std::vector<std::string> default_nvrtc_options(const Arch& arch) {
  return {"--gpu-architecture=" + arch.str(), "--std=c++17", "--fmad=true"};
}

}  // namespace cake
