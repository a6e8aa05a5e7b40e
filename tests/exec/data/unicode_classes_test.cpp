// Unicode classes of GPT-2's pattern: letters and numbers of several scripts, the White_Space
// set that Python's `regex` module matches with \s, and characters in none of them.
#include "exec/data/unicode_classes.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(UnicodeClasses, Letters) {
  for (char32_t c : {U'a', U'Z', U'é', U'ß', U'ª', U'Ж', U'א', U'日', U'ア', U'\U00020000'})
    EXPECT_TRUE(is_unicode_letter(c)) << uint32_t(c);
  for (char32_t c : {U'0', U' ', U'-', U'_', U'\'', U'€', U'😀', U'\u0301'})  // U+0301: a mark
    EXPECT_FALSE(is_unicode_letter(c)) << uint32_t(c);
}

TEST(UnicodeClasses, Numbers) {
  for (char32_t c : {U'0', U'9', U'²', U'½', U'٣', U'Ⅻ', U'①'}) EXPECT_TRUE(is_unicode_number(c));
  for (char32_t c : {U'a', U'.', U'+', U'日'}) EXPECT_FALSE(is_unicode_number(c));
}

TEST(UnicodeClasses, WhiteSpace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\u0085', U'\u00A0', U'\u2003',
                     U'\u2028', U'\u3000'})
    EXPECT_TRUE(is_unicode_space(c)) << uint32_t(c);
  // File separators (U+001C..U+001F), zero-width space and BOM are not White_Space.
  for (char32_t c : {U'\x1C', U'\x1F', U'\u200B', U'\uFEFF', U'a', U'\0'})
    EXPECT_FALSE(is_unicode_space(c)) << uint32_t(c);
}

}  // namespace
}  // namespace mplan::exec
