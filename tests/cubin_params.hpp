// A kernel's parameter list as its cubin (or PTX) records it: the .nv.info.<kernel> section of the ELF
// holds one KPARAM_INFO attribute per parameter (ordinal, offset in the parameter block,
// size). Tests compare it with what the host packs, without a GPU.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace cake::test {

struct KernelParam {
  uint32_t ordinal = 0, offset = 0, size = 0;
  bool operator==(const KernelParam&) const = default;
};

namespace cubin_detail {
template <typename T>
T read(const std::string& b, size_t off) {
  if (off + sizeof(T) > b.size()) throw std::runtime_error("cubin: read past the end at " + std::to_string(off));
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
}  // namespace cubin_detail

// The parameters of `kernel` (its lowered name) in ordinal order; throws when the cubin has no
// info section for it.
inline std::vector<KernelParam> kernel_params(const std::string& cubin, const std::string& kernel) {
  using cubin_detail::read;
  if (cubin.size() < 64 || cubin.compare(0, 4, "\x7f" "ELF") != 0 || cubin[4] != 2)
    throw std::runtime_error("cubin: not a 64-bit ELF");
  const uint64_t shoff = read<uint64_t>(cubin, 0x28);
  const uint16_t shentsize = read<uint16_t>(cubin, 0x3a), shnum = read<uint16_t>(cubin, 0x3c),
                 shstrndx = read<uint16_t>(cubin, 0x3e);
  auto section = [&](uint16_t i, uint32_t field_off, auto type) {
    return read<decltype(type)>(cubin, shoff + uint64_t(i) * shentsize + field_off);
  };
  const uint64_t names = section(shstrndx, 0x18, uint64_t{});  // sh_offset of .shstrtab
  const std::string want = ".nv.info." + kernel;
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint32_t name_off = section(i, 0x00, uint32_t{});
    const char* name = cubin.c_str() + names + name_off;
    if (names + name_off >= cubin.size() || want != name) continue;
    const uint64_t off = section(i, 0x18, uint64_t{}), size = section(i, 0x20, uint64_t{});
    std::vector<KernelParam> params;
    // Attributes: a format byte, an attribute byte, then a 16-bit value, or (format 4,
    // EIFMT_SVAL) a 16-bit byte count and that many bytes.
    for (uint64_t p = off; p + 4 <= off + size;) {
      const uint8_t format = read<uint8_t>(cubin, p), attribute = read<uint8_t>(cubin, p + 1);
      const uint16_t value = read<uint16_t>(cubin, p + 2);
      if (format == 0x04 && attribute == 0x17) {  // EIATTR_KPARAM_INFO: index, ordinal, offset, flags
        KernelParam k;
        k.ordinal = read<uint16_t>(cubin, p + 8);
        k.offset = read<uint16_t>(cubin, p + 10);
        k.size = (read<uint32_t>(cubin, p + 12) >> 18) & 0x3fff;
        params.push_back(k);
      }
      p += 4 + (format == 0x04 ? value : 0);
    }
    std::sort(params.begin(), params.end(), [](const KernelParam& a, const KernelParam& b) { return a.ordinal < b.ordinal; });
    return params;
  }
  throw std::runtime_error("cubin: no section " + want);
}

// The parameters of `kernel` in PTX text, from its `.entry` declaration (`.param .u64 x` or
// `.param .align 8 .b8 x[448]`): ordinal and size; PTX does not place them, so offset is 0.
inline std::vector<KernelParam> ptx_kernel_params(const std::string& ptx, const std::string& kernel) {
  const std::string entry = ".entry " + kernel + "(";
  const size_t at = ptx.find(entry);
  if (at == std::string::npos) throw std::runtime_error("ptx: no .entry " + kernel);
  const size_t end = ptx.find(')', at);
  if (end == std::string::npos) throw std::runtime_error("ptx: unterminated .entry " + kernel);
  const std::string list = ptx.substr(at + entry.size(), end - at - entry.size());
  static const std::regex param(R"(\.param\s+(?:\.align\s+\d+\s+)?\.[bsuf](\d+)\s+[\w$]+(?:\[(\d+)\])?)");
  std::vector<KernelParam> params;
  for (auto it = std::sregex_iterator(list.begin(), list.end(), param); it != std::sregex_iterator(); ++it) {
    KernelParam k;
    k.ordinal = uint32_t(params.size());
    k.size = uint32_t(std::stoul((*it)[1]) / 8 * ((*it)[2].matched ? std::stoul((*it)[2]) : 1));
    params.push_back(k);
  }
  return params;
}

}  // namespace cake::test
