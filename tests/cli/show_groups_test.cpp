// Tests of `mplan show-groups` run as a program: exit codes, one-line errors naming the flag,
// the JSON shape (keys, group lists of Megatron's documented example, rank records) and the text
// output's markers. Group contents themselves are tested in tests/src/parallel/rank_grid_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::count_lines;
using mplan::cli_test::Result;
using mplan::cli_test::run;

TEST(ShowGroupsCli, JsonShapeOnMegatronExample) {
  Result r = run("show-groups --tp 2 --pp 4 --dp 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["order"], "tp-cp-ep-dp-pp");
  const char* kinds[] = {"tp",
                         "pp",
                         "dp",
                         "cp",
                         "dp-cp",
                         "tp-pp",
                         "tp-cp",
                         "tp-dp",
                         "tp-dp-cp",
                         "embedding",
                         "position-embedding",
                         "ep",
                         "expert-tp",
                         "expert-dp",
                         "tp-ep",
                         "tp-ep-pp"};
  ASSERT_EQ(j["groups"].size(), 16u);
  for (const char* k : kinds) EXPECT_TRUE(j["groups"].contains(k)) << k;
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(j["groups"]["tp"].get<G>(),
            (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(j["groups"]["pp"].get<G>(),
            (G{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(j["groups"]["dp"].get<G>(),
            (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(j["groups"]["embedding"].get<G>(), (G{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  ASSERT_EQ(j["ranks"].size(), 16u);
  // Rank 13 with 8 GPUs per node: node 1, GPU 5; tp 1, dp 0, pp 3 (strides tp 1, dp 2, pp 4).
  const auto& r13 = j["ranks"][13];
  for (const char* key : {"rank", "node", "local_gpu", "tp", "cp", "ep", "dp", "pp"})
    EXPECT_TRUE(r13.contains(key)) << key;
  EXPECT_EQ(r13["rank"], 13);
  EXPECT_EQ(r13["node"], 1);
  EXPECT_EQ(r13["local_gpu"], 5);
  EXPECT_EQ(r13["tp"], 1);
  EXPECT_EQ(r13["dp"], 0);
  EXPECT_EQ(r13["pp"], 3);
  EXPECT_EQ(r13["cp"], 0);
  EXPECT_EQ(r13["ep"], 0);
}

TEST(ShowGroupsCli, JsonTpPpDpOrderAndGpusPerNode) {
  Result r =
      run("show-groups --tp 2 --pp 2 --dp 2 --order tp-cp-ep-pp-dp --gpus-per-node 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(j["order"], "tp-cp-ep-pp-dp");
  EXPECT_EQ(j["groups"]["pp"].get<G>(), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(j["groups"]["dp"].get<G>(), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(j["ranks"][7]["node"], 3);
  EXPECT_EQ(j["ranks"][7]["local_gpu"], 1);
}

TEST(ShowGroupsCli, JsonForOneRank) {
  Result r = run("show-groups --tp 2 --pp 2 --dp 2 --ep 2 --etp 1 --rank 5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rank"], 5);
  EXPECT_EQ(j["ep"], 1);
  EXPECT_EQ(j["groups"]["ep"].get<std::vector<int>>(), (std::vector<int>{4, 5}));
  EXPECT_EQ(j["groups"]["pp"].get<std::vector<int>>(), (std::vector<int>{1, 5}));
  EXPECT_TRUE(j["groups"]["position-embedding"].is_null());  // rank 5 is on the last stage
}

TEST(ShowGroupsCli, TextShowsTableGroupsAndNodeCrossings) {
  Result r = run("show-groups --tp 2 --pp 4 --dp 2 --gpus-per-node 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("rank  node  gpu"), std::string::npos);
  // pp groups span both nodes; tp groups do not.
  EXPECT_NE(r.out.find("[0,4,8,12]*"), std::string::npos);
  EXPECT_NE(r.out.find("[0,1] [2,3]"), std::string::npos);
  EXPECT_EQ(r.out.find("[0,1]*"), std::string::npos);
  EXPECT_NE(r.out.find("position-embedding"), std::string::npos);
}

TEST(ShowGroupsCli, TextForOneRank) {
  Result r = run("show-groups --tp 2 --pp 4 --dp 2 --rank 13");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("rank 13: node 1, GPU 5"), std::string::npos);
  EXPECT_NE(r.out.find("tp 1, cp 0, dp 0, pp 3"), std::string::npos);
  EXPECT_NE(r.out.find("[1,5,9,13] *"), std::string::npos);
  EXPECT_NE(r.out.find("not the first pipeline stage"), std::string::npos);
}

TEST(ShowGroupsCli, LargeWorldIsSummarized) {
  // 1024 ranks: the text stays short; JSON still lists every rank.
  Result r = run("show-groups --tp 8 --pp 8 --dp 16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(count_lines(r.out), 150u);
  EXPECT_NE(r.out.find("ranks not shown"), std::string::npos);
  EXPECT_NE(r.out.find("more;"), std::string::npos);
  Result j = run("show-groups --tp 8 --pp 8 --dp 16 --json");
  ASSERT_EQ(j.code, 0);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["ranks"].size(), 1024u);
  EXPECT_EQ(doc["groups"]["tp"].size(), 128u);
}

void expect_error(const std::string& args, const std::string& flag) {
  SCOPED_TRACE(args);
  Result r = run(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(ShowGroupsCli, BadInputExitsTwoNamingTheFlag) {
  expect_error("show-groups --tp 0 --pp 1 --dp 1", "--tp");
  expect_error("show-groups --tp 2 --pp 1 --dp -1", "--dp");
  expect_error("show-groups --tp 2 --pp 1 --dp 1 --cp 0", "--cp");
  expect_error("show-groups --tp x --pp 1 --dp 1", "--tp");
  expect_error("show-groups --pp 1 --dp 1", "--tp");                        // required
  expect_error("show-groups --tp 2 --pp 1 --dp 3 --ep 4 --etp 1", "--ep");  // 6 % 4
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --etp 0", "--etp");
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --order tp-xp-dp-pp", "--order");
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --order tp-dp", "--order");
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --etp 1 --order tp-cp-ep-pp-dp", "--order");
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --rank 8", "--rank");
  expect_error("show-groups --tp 2 --pp 2 --dp 2 --gpus-per-node 0", "--gpus-per-node");
  expect_error("show-groups --tp 1024 --pp 1024 --dp 1024", "--dp");  // too many ranks to show
}

TEST(ShowGroupsCli, HelpListsOptionsAndExamples) {
  Result r = run("show-groups --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--tp", "--pp", "--dp", "--cp", "--ep", "--etp", "--order",
                          "--gpus-per-node", "--rank", "--json", "--full", "Examples:"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
