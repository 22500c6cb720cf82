// libFuzzer target: build.json-shaped documents and aot/manifest.json.
//  - the input as build.json next to the embedded registry/elementwise.json (it replaces the
//    embedded build.json), and alone; a JSON array is also tried wrapped as {"builds": [...]};
//  - the input as dir/manifest.json for AotManifest::read (one temp folder per process), and
//    a manifest that reads is then asked about every embedded build through the
//    availability rule (aot/ first, then a fake CUDA 13 NVRTC).
// cake::Error is the expected rejection; anything else escaping is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "aot_manifest.hpp"
#include "availability.hpp"
#include "error.hpp"
#include "fuzz_common.hpp"
#include "registry.hpp"

namespace {
namespace fs = std::filesystem;

// The embedded elementwise programs and routes only: the other families' documents are
// large (rmsnorm.json is ~120 KB) and would cost most of each run parsing the same text.
const std::vector<cake::RegistrySource>& programs_and_routes() {
  static const auto src = [] {
    std::vector<cake::RegistrySource> out;
    for (auto& s : cake::Registry::embedded_sources())
      if (s.file.ends_with("/elementwise.json")) out.push_back(std::move(s));
    if (out.empty()) std::abort();
    return out;
  }();
  return src;
}

const std::shared_ptr<const cake::Registry>& default_registry() {
  static const auto reg = cake::Registry::from_sources(cake::Registry::embedded_sources());
  return reg;
}

// One folder per process, removed at exit; manifest.json is rewritten for every input.
const fs::path& manifest_dir() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "cake-fuzz-aot-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    fs::path d = tmpl;
    // A cubin some entries can point at, so AotManifest::has() sees an existing file.
    fs::create_directories(d / "sm_90a");
    std::ofstream(d / "sm_90a" / "x.cubin") << "\x7f" "ELF";
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(manifest_dir(), ec);
    });
    return d;
  }();
  return dir;
}

void load(const std::vector<cake::RegistrySource>& sources) {
  try {
    auto reg = cake::Registry::from_sources(sources);
    cake::fuzz::plan_every_route(reg);
  } catch (const cake::Error&) {
  }
}

void as_build_json(const std::string& text) {
  auto sources = programs_and_routes();
  sources.push_back({"<fuzz>/build.json", text});
  load(sources);
  load({{"<fuzz>/build.json", text}});
  // Toward build.json's shape: a bare array becomes the "builds" member.
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_array()) {
    sources.back().text = nlohmann::json{{"builds", std::move(doc)}}.dump();
    load(sources);
  }
}

void as_manifest(const std::string& text) {
  const fs::path& dir = manifest_dir();
  {
    std::ofstream out(dir / "manifest.json", std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
  }
  try {
    cake::AotManifest m = cake::AotManifest::read(dir);
    const auto& reg = default_registry();
    cake::AvailabilityRule rule(*reg, &m, cake::fuzz::fake_nvrtc(), /*jit_enabled=*/false);
    for (const auto& b : reg->builds()) (void)rule.check_build(b);
    for (const auto& [key, e] : m.entries()) {
      auto arch = cake::Arch::parse(e.arch);
      if (arch) (void)m.has(e.program, *arch, e.source_hash);
    }
  } catch (const cake::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  as_build_json(input);
  as_manifest(input);
  return 0;
}
