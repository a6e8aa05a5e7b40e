// The tokenizer: a single pass over the text with a cursor; raw strings R"d( ... )d" and
// line continuations of directives handled, everything else in a literal skipped to its close.
#include "tools/codecheck/cpp_tokens.hpp"

#include <cctype>

namespace mplan::codecheck {
namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}

  std::vector<Token> run() {
    while (i_ < t_.size()) step();
    return std::move(out_);
  }

 private:
  std::string_view t_;
  size_t i_ = 0;
  int line_ = 1;
  bool line_start_ = true;  // only blanks since the last newline
  std::vector<Token> out_;

  char at(size_t k) const { return k < t_.size() ? t_[k] : '\0'; }

  void advance_to(size_t end) {
    for (; i_ < end && i_ < t_.size(); ++i_)
      if (t_[i_] == '\n') ++line_;
  }

  void emit(TokenKind kind, size_t begin, int line) {
    out_.push_back({kind, std::string(t_.substr(begin, i_ - begin)), line});
  }

  void step() {
    const char c = t_[i_];
    if (c == '\n') {
      ++line_;
      ++i_;
      line_start_ = true;
      return;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i_;
      return;
    }
    const bool at_line_start = line_start_;
    line_start_ = false;
    if (c == '#' && at_line_start) return skip_directive();
    if (c == '/' && at(i_ + 1) == '/') return skip_to_line_end();
    if (c == '/' && at(i_ + 1) == '*') return skip_block_comment();
    if (ident_start(c)) return identifier_or_literal();
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && std::isdigit(static_cast<unsigned char>(at(i_ + 1)))))
      return number();
    if (c == '"' || c == '\'') return quoted(i_, i_);
    punct();
  }

  void skip_directive() {
    // To the end of the line, following backslash continuations; comments inside end it too.
    while (i_ < t_.size() && t_[i_] != '\n') {
      if (t_[i_] == '\\' && at(i_ + 1) == '\n') {
        advance_to(i_ + 2);
        continue;
      }
      if (t_[i_] == '/' && at(i_ + 1) == '*') {
        skip_block_comment();
        continue;
      }
      if (t_[i_] == '/' && at(i_ + 1) == '/') return skip_to_line_end();
      ++i_;
    }
  }

  void skip_to_line_end() {
    while (i_ < t_.size() && t_[i_] != '\n') ++i_;
  }

  void skip_block_comment() {
    size_t end = t_.find("*/", i_ + 2);
    advance_to(end == std::string_view::npos ? t_.size() : end + 2);
  }

  void identifier_or_literal() {
    const size_t begin = i_;
    while (i_ < t_.size() && ident_char(t_[i_])) ++i_;
    std::string_view word = t_.substr(begin, i_ - begin);
    // Encoding prefixes of literals: u8"", L'', R"(...)", u8R"(...)".
    const bool prefix = word == "R" || word == "u8" || word == "u" || word == "U" || word == "L" ||
                        word == "u8R" || word == "uR" || word == "UR" || word == "LR";
    if (prefix && (at(i_) == '"' || (at(i_) == '\'' && word.back() != 'R')))
      return quoted(begin, i_);
    out_.push_back({TokenKind::kIdentifier, std::string(word), line_});
  }

  void number() {
    const size_t begin = i_;
    // Digits, letters (hex, suffixes, exponents), '.', digit separators, exponent signs.
    while (i_ < t_.size()) {
      char c = t_[i_];
      if (ident_char(c) || c == '.' || (c == '\'' && ident_char(at(i_ + 1)))) {
        ++i_;
      } else if ((c == '+' || c == '-') && (t_[i_ - 1] == 'e' || t_[i_ - 1] == 'E' ||
                                            t_[i_ - 1] == 'p' || t_[i_ - 1] == 'P')) {
        ++i_;
      } else {
        break;
      }
    }
    emit(TokenKind::kNumber, begin, line_);
  }

  // A literal whose opening quote is at `quote` (after any prefix starting at `begin`).
  void quoted(size_t begin, size_t quote) {
    const int line = line_;
    const char q = t_[quote];
    const bool raw = q == '"' && quote > begin && t_[quote - 1] == 'R';
    if (raw) {
      size_t paren = t_.find('(', quote + 1);
      if (paren == std::string_view::npos) return advance_to(t_.size());
      std::string close(1, ')');
      close.append(t_.substr(quote + 1, paren - quote - 1));
      close.push_back('"');
      size_t end = t_.find(close, paren + 1);
      advance_to(end == std::string_view::npos ? t_.size() : end + close.size());
    } else {
      size_t k = quote + 1;
      while (k < t_.size() && t_[k] != q && t_[k] != '\n') k += t_[k] == '\\' ? 2 : 1;
      advance_to(k < t_.size() && t_[k] == q ? k + 1 : k);
    }
    out_.push_back({TokenKind::kLiteral, std::string(t_.substr(begin, i_ - begin)), line});
  }

  void punct() {
    static constexpr std::string_view kPairs[] = {"::", "->", "&&", "||", "<<", ">>"};
    for (std::string_view p : kPairs)
      if (t_.substr(i_, 2) == p) {
        out_.push_back({TokenKind::kPunct, std::string(p), line_});
        i_ += 2;
        return;
      }
    out_.push_back({TokenKind::kPunct, std::string(1, t_[i_]), line_});
    ++i_;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) { return Scanner(text).run(); }

}  // namespace mplan::codecheck
