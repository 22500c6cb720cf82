// The loader's static rule: can this program be served on this device, and how? Decided
// from data alone (the registry, aot/manifest.json, the NVRTC version): nothing is compiled
// or loaded. A build is available when aot/ holds its cubin with the same source hash, or
// NVRTC is present, JIT is allowed, its version >= the build's min_cuda and it knows the arch.
#pragma once
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "aot_manifest.hpp"
#include "nvrtc_info.hpp"
#include "registry.hpp"

namespace cake {

enum class ServedBy : uint8_t { aot, jit, none };
const char* served_by_name(ServedBy s);

struct Availability {
  ServedBy by = ServedBy::none;
  const Build* build = nullptr;  // the build chosen for the device (null: none runs on it)
  std::string reason;            // code when unavailable: no_build, min_cuda, no_nvrtc, arch,
                                 // jit_disabled, stale_aot, unsafe_aot
  std::string detail;            // one readable sentence
  bool available() const { return by != ServedBy::none; }
};

class AvailabilityRule {
 public:
  AvailabilityRule(const Registry& registry, const AotManifest* aot, NvrtcInfo nvrtc,
                   bool jit_enabled = true)
      : registry_(registry), aot_(aot), nvrtc_(std::move(nvrtc)), jit_enabled_(jit_enabled) {}
  // The NVRTC facts are asked for only when a build is not served from aot/ and JIT is on:
  // loading libnvrtc costs milliseconds, and a process served from aot/ never needs it.
  AvailabilityRule(const Registry& registry, const AotManifest* aot,
                   std::function<NvrtcInfo()> nvrtc, bool jit_enabled)
      : registry_(registry), aot_(aot), nvrtc_source_(std::move(nvrtc)), jit_enabled_(jit_enabled) {}

  Availability check(const Program& program, const Arch& device) const;
  // For one build (used by `cakec build` and the loader once the build is chosen).
  Availability check_build(const Build& build) const;

  const NvrtcInfo& nvrtc() const;

 private:
  const Registry& registry_;
  const AotManifest* aot_;
  std::optional<NvrtcInfo> nvrtc_;
  std::function<NvrtcInfo()> nvrtc_source_;
  mutable std::once_flag nvrtc_once_;
  mutable NvrtcInfo nvrtc_lazy_;
  bool jit_enabled_;
};

}  // namespace cake
