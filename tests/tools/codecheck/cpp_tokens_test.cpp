// Tests of the tokenizer: what must never reach the token list (comments, literals, directives)
// and the line numbers the checks report.
#include "tools/codecheck/cpp_tokens.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mplan::codecheck {
namespace {

std::string joined(const std::vector<Token>& tokens) {
  std::string s;
  for (const auto& t : tokens) s += (s.empty() ? "" : " ") + t.text;
  return s;
}

TEST(CppTokens, IdentifiersNumbersAndPunctuation) {
  EXPECT_EQ(joined(tokenize("int x = 1'000 + 2.5e-3f; a->b::c && d")),
            "int x = 1'000 + 2.5e-3f ; a -> b :: c && d");
}

TEST(CppTokens, CommentsAndDirectivesAreDropped) {
  const char* text =
      "#include \"a.hpp\"\n"
      "#define M(x) { x \\\n  }\n"
      "int a; // { not a brace\n"
      "/* { nor\n this } */ int b;\n";
  EXPECT_EQ(joined(tokenize(text)), "int a ; int b ;");
}

TEST(CppTokens, LiteralsAreOneToken) {
  auto t = tokenize("f(\"{\\\"}\", '{', R\"SH(a { \" b)SH\", u8\"}\");");
  ASSERT_EQ(t.size(), 11u);
  EXPECT_EQ(t[2].kind, TokenKind::kLiteral);
  EXPECT_EQ(t[2].text, "\"{\\\"}\"");
  EXPECT_EQ(t[4].text, "'{'");
  EXPECT_EQ(t[6].text, "R\"SH(a { \" b)SH\"");
  EXPECT_EQ(t[8].text, "u8\"}\"");
}

TEST(CppTokens, LinesCountAcrossRawStringsAndComments) {
  auto t = tokenize("a\nR\"(\n\n)\" b /*\n*/ c\n#x\nd");
  ASSERT_EQ(t.size(), 5u);  // a, the raw string, b, c, d
  EXPECT_EQ(t[0].line, 1);
  EXPECT_EQ(t[1].line, 2);
  EXPECT_EQ(t[2].line, 4);
  EXPECT_EQ(t[3].line, 5);
  EXPECT_EQ(t[4].line, 7);
  EXPECT_EQ(tokenize("x\n#if A\n#endif\ny").back().line, 4);
}

TEST(CppTokens, UnterminatedInputEnds) {
  EXPECT_EQ(tokenize("a \"open").size(), 2u);
  EXPECT_EQ(tokenize("a /* open").size(), 1u);
  EXPECT_EQ(tokenize("R\"x(open").size(), 1u);
}

}  // namespace
}  // namespace mplan::codecheck
