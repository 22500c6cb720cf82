#include <gtest/gtest.h>

#include "sha256.hpp"

namespace cake {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 7);
  Sha256 h;
  for (size_t i = 0; i < data.size(); i += 13) h.update(data.substr(i, 13));
  EXPECT_EQ(h.hex(), sha256_hex(data));
}

TEST(Sha256, FieldsDoNotCollideByConcatenation) {
  EXPECT_NE(Sha256().field("ab").field("c").hex(), Sha256().field("a").field("bc").hex());
}

}  // namespace cake
