// CppTokens: a C++ / CUDA source reduced to the tokens the code checks need — identifiers,
// numbers, punctuation, and one token per string or character literal — with comments and
// preprocessor lines dropped. Invariant: no brace, parenthesis or semicolon inside a comment,
// a literal (raw strings included) or a directive ever reaches the token list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mplan::codecheck {

enum class TokenKind { kIdentifier, kNumber, kLiteral, kPunct };

struct Token {
  TokenKind kind = TokenKind::kPunct;
  std::string text;  // the token; a literal is kept as written
  int line = 0;      // 1-based line where it starts
};

// The tokens of `text`. Multi-character punctuation is kept whole where it matters to a reader
// of braces and declarations: "::", "->", "&&", "||", "<<", ">>" (">>" also closes templates,
// which the checks do not need to tell apart).
std::vector<Token> tokenize(std::string_view text);

}  // namespace mplan::codecheck
