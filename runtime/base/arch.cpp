#include "arch.hpp"

#include <regex>

namespace cake {

std::optional<Arch> Arch::parse(const std::string& s) {
  static const std::regex re("(sm|compute)_([1-9][0-9]?)([0-9])([af]?)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  Arch a;
  a.virt = m[1] == "compute";
  a.major = std::stoi(m[2]);
  a.minor = std::stoi(m[3]);
  a.suffix = m[4].length() ? m[4].str()[0] : 0;
  return a;
}

std::string Arch::str() const {
  std::string s = (virt ? "compute_" : "sm_") + std::to_string(major) + std::to_string(minor);
  if (suffix) s.push_back(suffix);
  return s;
}

bool Arch::runs_on(const Arch& device) const {
  if (suffix != 0) return major == device.major && minor == device.minor;
  if (virt) return device.number() >= number();
  return major == device.major && minor <= device.minor;
}

std::optional<CudaVersion> CudaVersion::parse(const std::string& s) {
  static const std::regex re("([0-9]{1,3})\\.([0-9]{1,3})");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  return CudaVersion{std::stoi(m[1]), std::stoi(m[2])};
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "i32") return DType::i32;
  if (s == "i64") return DType::i64;
  return std::nullopt;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

int dtype_size(DType t) {
  switch (t) {
    case DType::bf16: case DType::f16: return 2;
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
  }
  return 0;
}

}  // namespace cake
