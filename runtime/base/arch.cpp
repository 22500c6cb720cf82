#include "arch.hpp"

#include <cctype>

namespace cake {

namespace {
// Digits of `s` from `at`: their value, `at` moved past them; -1 when there are none or more
// than `max_digits`.
int digits(const std::string& s, size_t& at, size_t max_digits) {
  size_t n = 0;
  int v = 0;
  while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at])) && n < max_digits + 1) v = v * 10 + (s[at++] - '0'), ++n;
  return n == 0 || n > max_digits ? -1 : v;
}
}  // namespace

// Hand-written, not std::regex: registry loads parse every build's arch.
std::optional<Arch> Arch::parse(const std::string& s) {
  Arch a;
  size_t at = 0;
  if (s.rfind("sm_", 0) == 0) at = 3;
  else if (s.rfind("compute_", 0) == 0) at = 8, a.virt = true;
  else return std::nullopt;
  const size_t first = at;
  const int n = digits(s, at, 3);  // "80", "100": major digits then one minor digit
  if (n < 0 || at - first < 2 || s[first] == '0') return std::nullopt;
  a.major = n / 10;
  a.minor = n % 10;
  if (at < s.size() && (s[at] == 'a' || s[at] == 'f')) a.suffix = s[at++];
  if (at != s.size()) return std::nullopt;
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
  size_t at = 0;
  const int major = digits(s, at, 3);
  if (major < 0 || at >= s.size() || s[at++] != '.') return std::nullopt;
  const int minor = digits(s, at, 3);
  if (minor < 0 || at != s.size()) return std::nullopt;
  return CudaVersion{major, minor};
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
