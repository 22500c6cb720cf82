// SHA-256 for content keys and file checksums (no OpenSSL: the binaries must run on the
// GPU machine, which has no -dev packages, and in CI).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cake {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Length-prefixed field: keys built from several fields cannot collide by concatenation.
  Sha256& field(std::string_view s);
  std::string hex();  // finishes the hash

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace cake
