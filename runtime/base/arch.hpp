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

  static std::optional<Arch> parse(const std::string& s);  // "sm_90a" -> {9, 0, 'a'}
  std::string str() const;                                   // "sm_90a"
  int number() const { return major * 10 + minor; }          // 90
  // Can a cubin built for `*this` run on a device of arch `device`? Same major, not a newer
  // minor; an arch-specific build ('a'/'f') runs only on exactly its own chip.
  bool runs_on(const Arch& device) const;
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
