// Tests of the nesting-depth scanner on small functions whose depth is counted by hand, and the
// tree check: no function in src/, sim/, cli/, exec/, tests/, bench/ or tools/ nested deeper than
// six blocks.
#include "tools/codecheck/nesting_depth.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mplan::codecheck {
namespace {

constexpr int kMaxDepth = 6;

// The single function of `text`.
FunctionDepth only(const std::string& text) {
  auto f = function_depths(text);
  EXPECT_EQ(f.size(), 1u) << text;
  return f.empty() ? FunctionDepth{} : f[0];
}

TEST(NestingDepth, FlatAndBracedBlocks) {
  EXPECT_EQ(only("int f(int x) { return x + 1; }").depth, 0);
  FunctionDepth f = only(
      "void g(int n) {\n"
      "  for (int i = 0; i < n; ++i) {\n"
      "    if (i % 2) {\n"
      "      while (n) {\n"
      "        --n;\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(f.name, "g");
  EXPECT_EQ(f.line, 1);
  EXPECT_EQ(f.depth, 3);
  EXPECT_EQ(f.deepest_line, 4);
}

TEST(NestingDepth, StatementsWithoutBracesCountAsBlocks) {
  EXPECT_EQ(only("void f(int n) { for (;;) for (;;) if (n) return; }").depth, 3);
  EXPECT_EQ(only("void f(int n) { if (n) x(); else y(); z(); }").depth, 1);
  EXPECT_EQ(only("void f(int n) { do { if (n) break; } while (n); }").depth, 2);
  EXPECT_EQ(only("void f() { try { if (a) b(); } catch (const E& e) { c(); } }").depth, 2);
}

TEST(NestingDepth, ElseIfChainsStayAtTheirIfsDepth) {
  EXPECT_EQ(only("void f(int a) { if (a == 1) { x(); } else if (a == 2) { y(); } "
                 "else if (a == 3) { z(); } else { w(); } }")
                .depth,
            1);
  EXPECT_EQ(only("void f(int a) { if (a) { x(); } else { if (b) { y(); } } }").depth, 2);
}

TEST(NestingDepth, CaseBlocksAddNothingBeyondTheSwitch) {
  EXPECT_EQ(only("int f(int k) { switch (k) { case 1: { return 2; } case A::kB: return 3; "
                 "default: break; } return 0; }")
                .depth,
            1);
}

TEST(NestingDepth, LambdaBodiesAndBareBlocksCount) {
  EXPECT_EQ(only("void f() { auto g = [&](int x) { if (x) h(); }; g(1); }").depth, 2);
  EXPECT_EQ(only("void f() { std::sort(a, b, [](int x, int y) -> bool { return x < y; }); }").depth,
            1);
  EXPECT_EQ(only("void f() { run([&] { { x(); } }); }").depth, 2);
  EXPECT_EQ(only("void f() { { int a = 1; } }").depth, 1);
}

TEST(NestingDepth, InitializerBracesAreNotBlocks) {
  EXPECT_EQ(only("std::vector<int> f() { std::vector<int> v{1, 2}; Foo x = {{1}, {2}}; "
                 "g(Args{.m = 1}); return {3, 4}; }")
                .depth,
            0);
  EXPECT_TRUE(function_depths("const int kX[] = {1, 2};\nstruct S { int a{3}; };\n").empty());
}

TEST(NestingDepth, LiteralsAndCommentsCannotFoolIt) {
  EXPECT_EQ(only("void f() {\n  const char* s = R\"SH(if (x) { { {)SH\";\n"
                 "  // } }\n  char c = '{'; /* { */\n}\n")
                .depth,
            0);
}

TEST(NestingDepth, NamesOfMembersOperatorsTestsAndTemplates) {
  auto f = function_depths(
      "namespace a {\n"
      "struct A : B {\n"
      "  int get() const { return 1; }\n"
      "  bool operator==(const A& o) const { return true; }\n"
      "  void operator()(int) {}\n"
      " private:\n"
      "  A() : x_{1}, y_(2) { if (x_) {} }\n"
      "};\n"
      "X::~X() {}\n"
      "template <>\n"
      "float cast<float>(float x) { return x; }\n"
      "TEST(Suite, Name) { for (;;) {} }\n"
      "}  // namespace a\n");
  ASSERT_EQ(f.size(), 7u);
  EXPECT_EQ(f[0].name, "A::get");
  EXPECT_EQ(f[1].name, "A::operator==");
  EXPECT_EQ(f[2].name, "A::operator()");
  EXPECT_EQ(f[3].name, "A::A");
  EXPECT_EQ(f[3].depth, 1);
  EXPECT_EQ(f[4].name, "X::~X");
  EXPECT_EQ(f[5].name, "cast");
  EXPECT_EQ(f[6].name, "TEST(Suite, Name)");
  EXPECT_EQ(f[6].depth, 1);
}

TEST(NestingDepth, LocalClassMembersAreTheirOwnFunctions) {
  auto f = function_depths(
      "void outer() {\n"
      "  struct Local { void deep() { if (a) { if (b) {} } } } l;\n"
      "  if (c) l.deep();\n"
      "}\n");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "outer");
  EXPECT_EQ(f[0].depth, 1);
  EXPECT_EQ(f[1].name, "Local::deep");
  EXPECT_EQ(f[1].depth, 2);
}

TEST(NestingDepth, SevenDeepIsOverTheLimit) {
  std::string body = "x();";
  for (int i = 0; i < 7; ++i) body = "if (a" + std::to_string(i) + ") { " + body + " }";
  FunctionDepth f = only("void seven() { " + body + " }");
  EXPECT_EQ(f.depth, 7);
  EXPECT_GT(f.depth, kMaxDepth);
}

TEST(NestingDepth, NoFunctionInTheTreeIsNestedDeeperThanSix) {
  const auto deep = deep_functions(
      MPLAN_SOURCE_DIR, {"src", "sim", "cli", "exec", "tests", "bench", "tools"}, kMaxDepth);
  for (const DeepFunction& d : deep)
    ADD_FAILURE() << d.file << ":" << d.function.line << ": " << d.function.name << " is nested "
                  << d.function.depth << " blocks deep (line " << d.function.deepest_line
                  << "); the limit is " << kMaxDepth;
}

}  // namespace
}  // namespace mplan::codecheck
