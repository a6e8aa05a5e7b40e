// Tests of the src/ layering check: the checker on made-up includes (each kind of violation is
// caught, allowed includes pass) and on the tree itself. If someone adds an upward include such
// as `#include "src/plan/plan.hpp"` to src/parallel/rank_grid.cpp, check_src_layers() returns it
// (SrcTreeIsLayered fails) — UpwardIncludeInARealFileIsCaught shows exactly that on a copy of
// the file's text with the include added.
#include "tools/codecheck/include_layers.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace mplan::codecheck {
namespace {

TEST(IncludeLayers, LayerOrder) {
  EXPECT_EQ(src_layers(), (std::vector<std::string>{"common", "parallel", "model", "batch",
                                                    "schedule", "plan", "interop"}));
  EXPECT_EQ(layer_of("src/common/error.hpp"), 0);
  EXPECT_EQ(layer_of("src/plan/plan.hpp"), 5);
  EXPECT_EQ(layer_of("src/interop/megatron/megatron_import.cpp"), 6);
  EXPECT_EQ(layer_of("src/nowhere/x.hpp"), -1);
  EXPECT_EQ(layer_of("sim/des/engine.hpp"), -1);
  EXPECT_EQ(layer_of("src/plan.hpp"), -1);
}

TEST(IncludeLayers, ReadsQuotedIncludesOnly) {
  auto inc = quoted_includes(
      "// x\n#include \"src/a/b.hpp\"\n#include <vector>\n  #  include \"c.hpp\" // why\n"
      "int x; // #include \"no.hpp\"\n");
  ASSERT_EQ(inc.size(), 2u);
  EXPECT_EQ(inc[0].line, 2);
  EXPECT_EQ(inc[0].target, "src/a/b.hpp");
  EXPECT_EQ(inc[1].line, 4);
  EXPECT_EQ(inc[1].target, "c.hpp");
}

TEST(IncludeLayers, DownwardAndSameLayerIncludesPass) {
  EXPECT_TRUE(layer_violations("src/plan/validate.cpp", {{1, "src/plan/plan.hpp"},
                                                         {2, "src/schedule/schedule.hpp"},
                                                         {3, "src/batch/rampup_batch_size.hpp"},
                                                         {4, "src/model/model_spec.hpp"},
                                                         {5, "src/parallel/rank_grid.hpp"},
                                                         {6, "src/common/error.hpp"}})
                  .empty());
  EXPECT_TRUE(layer_violations("src/interop/megatron/x.cpp", {{1, "src/plan/plan.hpp"}}).empty());
}

TEST(IncludeLayers, UpwardIncludeIsReported) {
  auto v = layer_violations("src/parallel/rank_grid.cpp",
                            {{5, "src/parallel/rank_grid.hpp"}, {14, "src/plan/plan.hpp"}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "src/parallel/rank_grid.cpp");
  EXPECT_EQ(v[0].line, 14);
  EXPECT_EQ(v[0].target, "src/plan/plan.hpp");
  EXPECT_NE(v[0].rule.find("upward include: src/parallel (layer 1)"), std::string::npos)
      << v[0].rule;
  // Each pair of layers, one step up.
  const auto& layers = src_layers();
  for (size_t i = 0; i + 1 < layers.size(); ++i)
    EXPECT_EQ(
        layer_violations("src/" + layers[i] + "/a.cpp", {{1, "src/" + layers[i + 1] + "/b.hpp"}})
            .size(),
        1u)
        << layers[i];
}

TEST(IncludeLayers, IncludesOutsideSrcAndUnknownFoldersAreReported) {
  auto v = layer_violations("src/plan/plan.cpp",
                            {{1, "sim/des/engine.hpp"}, {2, "plan.hpp"}, {3, "src/extra/x.hpp"}});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_NE(v[0].rule.find("src/ includes only src/"), std::string::npos);
  EXPECT_NE(v[2].rule.find("src/extra/ is in no layer"), std::string::npos);
  auto u = layer_violations("src/extra/x.cpp", {});
  ASSERT_EQ(u.size(), 1u);
  EXPECT_NE(u[0].rule.find("add it to src_layers()"), std::string::npos);
}

std::string source_text(const std::string& repo_path) {
  std::ifstream in(std::string(MPLAN_SOURCE_DIR) + "/" + repo_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(IncludeLayers, UpwardIncludeInARealFileIsCaught) {
  const std::string file = "src/parallel/rank_grid.cpp";
  std::string text = source_text(file);
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(layer_violations(file, quoted_includes(text)).empty());
  text += "#include \"src/plan/plan.hpp\"\n";
  auto v = layer_violations(file, quoted_includes(text));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].target, "src/plan/plan.hpp");
}

TEST(IncludeLayers, SrcTreeIsLayered) {
  auto v = check_src_layers(MPLAN_SOURCE_DIR);
  for (const auto& x : v)
    ADD_FAILURE() << x.file << ":" << x.line << ": " << x.target << ": " << x.rule;
  EXPECT_TRUE(v.empty());
}

}  // namespace
}  // namespace mplan::codecheck
