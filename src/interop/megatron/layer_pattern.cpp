// A small recursive-descent reader of Megatron-LM's pattern expressions:
//   expr := term ('+' term)* ; term := atom ('*' int)* ; atom := '[' int (',' int)* ']' | '(' expr
//   ')'
#include "src/interop/megatron/layer_pattern.hpp"

#include <cctype>

#include "src/common/error.hpp"

namespace mplan {

namespace {

constexpr size_t kMaxEntries = 65536;

class Reader {
 public:
  Reader(const std::string& text, const std::string& flag) : s_(text), flag_(flag) {}

  std::vector<int64_t> all() {
    std::vector<int64_t> v = expr(0);
    skip();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(cat(flag_, ": \"", s_, "\" is not a layer pattern such as ([0]*3+[1]*58): ", why));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  int64_t integer() {
    skip();
    const size_t b = i_;
    int64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_] - '0');
      if (v > static_cast<int64_t>(kMaxEntries)) fail("a number beyond 65536");
      ++i_;
    }
    if (i_ == b) fail("a number expected");
    return v;
  }
  std::vector<int64_t> atom(int depth) {
    if (depth > 32) fail("nested too deep");
    if (eat('(')) {
      std::vector<int64_t> v = expr(depth + 1);
      if (!eat(')')) fail("')' expected");
      return v;
    }
    if (!eat('[')) fail("'[' or '(' expected");
    std::vector<int64_t> v{integer()};
    while (eat(',')) v.push_back(integer());
    if (!eat(']')) fail("']' expected");
    return v;
  }
  std::vector<int64_t> term(int depth) {
    std::vector<int64_t> v = atom(depth);
    while (eat('*')) {
      const int64_t n = integer();
      if (v.size() * static_cast<size_t>(n) > kMaxEntries) fail("more than 65536 entries");
      std::vector<int64_t> r;
      for (int64_t k = 0; k < n; ++k) r.insert(r.end(), v.begin(), v.end());
      v = std::move(r);
    }
    return v;
  }
  std::vector<int64_t> expr(int depth) {
    std::vector<int64_t> v = term(depth);
    while (eat('+')) {
      std::vector<int64_t> t = term(depth);
      if (v.size() + t.size() > kMaxEntries) fail("more than 65536 entries");
      v.insert(v.end(), t.begin(), t.end());
    }
    return v;
  }

  const std::string& s_;
  const std::string& flag_;
  size_t i_ = 0;
};

}  // namespace

std::vector<int64_t> parse_layer_pattern(const std::string& text, const std::string& flag) {
  return Reader(text, flag).all();
}

bool is_layer_pattern(const std::string& text) { return text.find('[') != std::string::npos; }

std::string format_layer_pattern(const std::vector<int64_t>& pattern) {
  std::string out = "(";
  for (size_t i = 0; i < pattern.size();) {
    size_t j = i;
    while (j < pattern.size() && pattern[j] == pattern[i]) ++j;
    if (i > 0) out += "+";
    out += cat("[", pattern[i], "]");
    if (j - i > 1) out += cat("*", j - i);
    i = j;
  }
  return out + ")";
}

}  // namespace mplan
