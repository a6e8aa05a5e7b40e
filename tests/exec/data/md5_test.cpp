// md5_hex: the test suite of RFC 1321 (appendix A.5), plus messages either side of the block
// boundary (digests from Python's hashlib.md5).
#include "exec/data/md5.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(Md5, Rfc1321TestSuite) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_hex("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(md5_hex("1234567890123456789012345678901234567890123456789012345678901234567890"
                    "1234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5, PaddingAtTheBlockBoundary) {
  // 55 bytes fit one block with the length; 56 need a second one.
  EXPECT_EQ(md5_hex(std::string(55, 'x')), "04364420e25c512fd958a70738aa8f72");
  EXPECT_EQ(md5_hex(std::string(56, 'x')), "668a72d5ba17f08e62dabcafad6db14b");
}

}  // namespace
}  // namespace mplan::exec
