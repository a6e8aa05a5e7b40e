// MD5 as RFC 1321 specifies it: 64-byte blocks, four rounds of 16 steps, little-endian words.
#include "exec/data/md5.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mplan::exec {
namespace {

constexpr std::array<uint32_t, 64> kShift = {
    7,  12, 17, 22, 7,  12, 17, 22, 7,  12, 17, 22, 7,  12, 17, 22, 5,  9,  14, 20, 5,  9,
    14, 20, 5,  9,  14, 20, 5,  9,  14, 20, 4,  11, 16, 23, 4,  11, 16, 23, 4,  11, 16, 23,
    4,  11, 16, 23, 6,  10, 15, 21, 6,  10, 15, 21, 6,  10, 15, 21, 6,  10, 15, 21};

std::array<uint32_t, 64> sine_table() {
  std::array<uint32_t, 64> k{};
  for (int i = 0; i < 64; ++i)
    k[static_cast<size_t>(i)] =
        static_cast<uint32_t>(std::floor(std::fabs(std::sin(i + 1.0)) * 4294967296.0));
  return k;
}

uint32_t rotl(uint32_t x, uint32_t c) { return (x << c) | (x >> (32 - c)); }

}  // namespace

std::string md5_hex(std::string_view data) {
  static const std::array<uint32_t, 64> kSine = sine_table();
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  std::string msg(data);
  const uint64_t bit_len = static_cast<uint64_t>(data.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back('\0');
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<char>((bit_len >> (8 * i)) & 0xff));
  for (size_t block = 0; block < msg.size(); block += 64) {
    uint32_t m[16];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + block + 4 * i);
      m[i] = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (uint32_t i = 0; i < 64; ++i) {
      uint32_t f, g;
      if (i < 16) {
        f = (b & c) | (~b & d);
        g = i;
      } else if (i < 32) {
        f = (d & b) | (~d & c);
        g = (5 * i + 1) % 16;
      } else if (i < 48) {
        f = b ^ c ^ d;
        g = (3 * i + 5) % 16;
      } else {
        f = c ^ (b | ~d);
        g = (7 * i) % 16;
      }
      f = f + a + kSine[i] + m[g];
      a = d;
      d = c;
      c = b;
      b = b + rotl(f, kShift[i]);
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint32_t word : h)
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (word >> (8 * i)) & 0xff;
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  return out;
}

}  // namespace mplan::exec
