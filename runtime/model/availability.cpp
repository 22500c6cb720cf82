#include "availability.hpp"

#include <algorithm>

namespace cake {

const char* served_by_name(ServedBy s) {
  switch (s) {
    case ServedBy::aot: return "aot";
    case ServedBy::jit: return "jit";
    case ServedBy::none: return "none";
  }
  return "?";
}

const NvrtcInfo& AvailabilityRule::nvrtc() const {
  if (nvrtc_) return *nvrtc_;
  std::call_once(nvrtc_once_, [this] { nvrtc_lazy_ = nvrtc_source_(); });
  return nvrtc_lazy_;
}

Availability AvailabilityRule::check_build(const Build& b) const {
  Availability a;
  a.build = &b;
  bool stale = false;
  if (aot_ != nullptr) {
    if (aot_->has(b.program, b.arch, b.source_hash)) {
      a.by = ServedBy::aot;
      return a;
    }
    const AotEntry* e = aot_->find(b.program, b.arch);
    stale = e != nullptr && e->source_hash != b.source_hash;
  }
  std::string stale_note = stale ? " (aot/ holds a cubin built from another source)" : "";
  if (aot_ != nullptr && !aot_->refused().empty())
    stale_note = " (aot folder " + aot_->dir().string() + " not used: " + aot_->refused() + ")";
  const bool unsafe = aot_ != nullptr && !aot_->refused().empty();
  if (!jit_enabled_) {
    a.reason = unsafe ? "unsafe_aot" : stale ? "stale_aot" : "jit_disabled";
    a.detail = "JIT is disabled and aot/ has no cubin for " + b.key() + stale_note;
    return a;
  }
  const NvrtcInfo& n = nvrtc();
  if (!n.present) {
    a.reason = unsafe ? "unsafe_aot" : stale ? "stale_aot" : "no_nvrtc";
    a.detail = n.missing_reason + stale_note;
  } else if (n.version < b.min_cuda) {
    a.reason = "min_cuda";
    a.detail = b.key() + " needs CUDA >= " + b.min_cuda.str() + ", NVRTC is " + n.version.str() +
               stale_note;
  } else if (!n.supports(b.arch)) {
    a.reason = "arch";
    a.detail = "NVRTC " + n.version.str() + " cannot compile for " + b.arch.str() + stale_note;
  } else {
    a.by = ServedBy::jit;
  }
  return a;
}

Availability AvailabilityRule::check(const Program& program, const Arch& device) const {
  const std::vector<const Build*> builds = registry_.device_builds(program, device);
  if (builds.empty()) {
    Availability a;
    a.reason = "no_build";
    a.detail = "program " + program.name + " has no build that runs on " + device.str();
    return a;
  }
  Availability first;
  for (size_t i = 0; i < builds.size(); ++i) {
    Availability a = check_build(*builds[i]);
    if (a.available() && a.build->arch.virt)
      a.detail = "PTX for " + a.build->arch.str() + ": the driver compiles it for " + device.str() +
                 (first.reason.empty() ? "" : " (" + first.detail + ")");
    if (a.available()) return a;
    if (i == 0) first = a;
  }
  return first;
}

}  // namespace cake
