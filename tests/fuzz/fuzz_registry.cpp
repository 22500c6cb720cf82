// libFuzzer target: the input is a registry JSON document, loaded alone and on top of the
// embedded registry (as CAKE_REGISTRY / --registry would). cake::Error (RegistryError) is the
// expected rejection; a crash, a hang, a sanitizer report or any other exception is a finding.
// A document that loads is then planned over (fuzz_common.hpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "error.hpp"
#include "fuzz_common.hpp"
#include "registry.hpp"

namespace {

// Returns false when the document is not even JSON (not worth stacking on the embedded one).
bool load(const std::vector<cake::RegistrySource>& sources) {
  try {
    auto reg = cake::Registry::from_sources(sources);
    cake::fuzz::plan_every_route(reg, "fuzz.json");
  } catch (const cake::Error& e) {
    // Expected: a malformed or inconsistent registry, named by file and JSON path.
    return std::string_view(e.what()).find("fuzz.json: not valid JSON") == std::string_view::npos;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  if (!load({{"fuzz.json", input}})) return 0;
  static const std::vector<cake::RegistrySource> embedded = cake::Registry::embedded_sources();
  auto sources = embedded;
  sources.push_back({"fuzz.json", input});
  load(sources);
  return 0;
}
