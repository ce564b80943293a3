// SHA-256 against the FIPS 180-4 / NIST example vectors, padding boundaries (55, 56, 64 bytes),
// incremental updates split at every offset, and the little-endian token-id digest (values from
// Python's hashlib).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/sha256.h"

using mere::Sha256;
using mere::sha256_hex;

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmn"
                       "opqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionA) {
  Sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk);
  EXPECT_EQ(h.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  EXPECT_EQ(sha256_hex(std::string(55, 'x')), "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  EXPECT_EQ(sha256_hex(std::string(56, 'x')), "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  EXPECT_EQ(sha256_hex(std::string(64, 'x')), "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

TEST(Sha256, IncrementalEqualsOneShotAndResets) {
  const std::string s =
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  const std::string want = sha256_hex(s);
  Sha256 h;
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    h.update(s.substr(0, cut)).update(s.substr(cut));
    ASSERT_EQ(h.finish_hex(), want) << "cut at " << cut;  // finish resets, so the hasher is reused
  }
}

TEST(Sha256, TokenIdsAreLittleEndianInt32) {
  const std::vector<int32_t> ids = {1, 2, -1, 151643};
  EXPECT_EQ(mere::sha256_hex_token_ids(ids), "45e4234c22bc39d78b7eeb7dfb98c7fb0d0900b9823477f60d560edcd8f9e8bf");
  EXPECT_EQ(mere::sha256_hex_token_ids({}), sha256_hex(""));
}
