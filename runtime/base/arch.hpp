// GPU architectures ("sm_90a"), CUDA versions ("12.8") and dtypes: small value types the
// registry, the planner and the loader share.
#pragma once
#include <compare>
#include <cstdint>
#include <optional>
#include <string>

namespace cake {

struct Arch {
  int major = 0;
  int minor = 0;
  char suffix = 0;  // 'a' (arch-specific features such as wgmma), 'f', or 0
  // A virtual arch ("compute_80"): its build is PTX, which the driver compiles for the device
  // at load, so it runs on every later arch. Devices and windows name real archs only.
  bool virt = false;

  // "sm_90a" -> {9, 0, 'a'}; "compute_80" -> {8, 0, 0, virtual}
  static std::optional<Arch> parse(const std::string& s);
  std::string str() const;                                   // "sm_90a", "compute_80"
  int number() const { return major * 10 + minor; }          // 90
  // Can a build for `*this` run on a device of arch `device`? A cubin: same major, not a newer
  // minor; PTX: any arch from its own on. Arch-specific ('a'/'f'): exactly its own chip.
  bool runs_on(const Arch& device) const;
  // The arch without its suffix or virtualness: the plain cubin target of the same chip.
  Arch plain() const { return Arch{major, minor, 0, false}; }
  auto operator<=>(const Arch&) const = default;
};

struct CudaVersion {
  int major = 0;
  int minor = 0;
  static std::optional<CudaVersion> parse(const std::string& s);  // "13.0"
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
  auto operator<=>(const CudaVersion&) const = default;
};

enum class DType : uint8_t { bf16, f16, f32, f64, i32, i64 };
std::optional<DType> parse_dtype(const std::string& s);
const char* dtype_name(DType t);
int dtype_size(DType t);

}  // namespace cake
