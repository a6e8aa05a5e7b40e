// Number runs -> '#', so "pp (3)" and "pp (5)" are one rule. Digits inside words (a100, fp32,
// 1f1b) are kept: a digit run is a number only when no letter touches it on either side.
#include "sim/sweep/rejection_rule.hpp"

#include <cctype>

namespace mplan::sweep {

namespace {
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_word(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
}  // namespace

std::string rejection_rule(const Violation& v) {
  std::string out = v.field;
  out += ": ";
  const std::string& s = v.message;
  for (size_t i = 0; i < s.size();) {
    const bool starts_number =
        is_digit(s[i]) && (i == 0 || (!is_word(s[i - 1]) && !is_digit(s[i - 1])));
    if (!starts_number) {
      out += s[i++];
      continue;
    }
    size_t end = i;
    while (end < s.size() && is_digit(s[end])) ++end;
    if (end + 1 < s.size() && s[end] == '.' && is_digit(s[end + 1])) {
      ++end;
      while (end < s.size() && is_digit(s[end])) ++end;
    }
    // A number glued to letters after it ("1f1b", "80g") is part of a word: keep it.
    if (end < s.size() && is_word(s[end])) {
      out.append(s, i, end - i);
    } else {
      out += '#';
    }
    i = end;
  }
  return out;
}

}  // namespace mplan::sweep
