// Unicode character classes of GPT-2's pre-tokenizer regex: \p{L} (general category L*), \p{N}
// (N*) and \s (the White_Space property, as Python's `regex` module matches it). The L and N
// tables are generated from the Unicode Character Database (unicode_classes.cpp).
#pragma once

namespace mplan::exec {

bool is_unicode_letter(char32_t c);
bool is_unicode_number(char32_t c);

// White_Space: \t \n \v \f \r, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
inline bool is_unicode_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace mplan::exec
