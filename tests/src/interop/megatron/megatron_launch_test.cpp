// Tests of the renderings of a MegatronLaunch: shell quoting, the torchrun script's layout (one
// node and several), the argument list and the JSON document.
#include "src/interop/megatron/megatron_launch.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

MegatronLaunch two_node_launch() {
  MegatronLaunch L;
  L.nproc_per_node = 8;
  L.nnodes = 2;
  L.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  L.groups = {{"GPT_MODEL_ARGS", {{"--num-layers", {"4"}}, {"--swiglu", {}}}},
              {"TRAINING_ARGS", {{"--step-batch-size-schedule", {"0:16 100:32"}}}}};
  L.notes = {"a note"};
  return L;
}

TEST(MegatronLaunch, ShellQuoting) {
  EXPECT_EQ(shell_quote("0:16 2:32"), "'0:16 2:32'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("6e-05"), "6e-05");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

TEST(MegatronLaunch, TorchrunScript) {
  std::string s = render_megatron_torchrun(two_node_launch(), "the title");
  EXPECT_EQ(s.rfind("#!/bin/bash\n# the title\n", 0), 0u);
  EXPECT_THAT(s, HasSubstr("16 GPUs as 2 nodes x 8 processes"));
  EXPECT_THAT(s, HasSubstr("on every node, with NODE_RANK"));
  EXPECT_THAT(s, HasSubstr("# note: a note\n"));
  EXPECT_THAT(s, HasSubstr("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"));
  EXPECT_THAT(s, HasSubstr("GPUS_PER_NODE=8\nNUM_NODES=2\n"));
  EXPECT_THAT(s, HasSubstr("GPT_MODEL_ARGS=(\n    --num-layers 4\n    --swiglu\n)\n"));
  EXPECT_THAT(s, HasSubstr("    --step-batch-size-schedule '0:16 100:32'\n"));
  EXPECT_THAT(s, HasSubstr("torchrun \"${DISTRIBUTED_ARGS[@]}\" pretrain_gpt.py \\\n"
                           "    \"${GPT_MODEL_ARGS[@]}\" \\\n    \"${TRAINING_ARGS[@]}\"\n"));
  MegatronLaunch one = two_node_launch();
  one.nnodes = 1;
  EXPECT_THAT(render_megatron_torchrun(one, "t"), Not(HasSubstr("NODE_RANK (0")));
}

TEST(MegatronLaunch, ArgumentListAndArgv) {
  EXPECT_EQ(render_megatron_args(two_node_launch()),
            "--num-layers 4\n--swiglu\n--step-batch-size-schedule '0:16 100:32'\n");
  EXPECT_THAT(
      megatron_argv(two_node_launch()),
      ElementsAre("--num-layers", "4", "--swiglu", "--step-batch-size-schedule", "0:16 100:32"));
}

TEST(MegatronLaunch, Json) {
  Json j = megatron_launch_to_json(two_node_launch());
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["launcher"]["world_size"], 16);
  EXPECT_EQ(j["env"]["CUDA_DEVICE_MAX_CONNECTIONS"], "1");
  EXPECT_EQ(j["groups"]["GPT_MODEL_ARGS"], Json::parse(R"(["--num-layers", "4", "--swiglu"])"));
  EXPECT_EQ(j["argv"].size(), 5u);
  EXPECT_EQ(j["notes"][0], "a note");
}

TEST(MegatronLaunch, DirectivesAreWrittenAndReadBack) {
  MegatronLaunch L = two_node_launch();
  L.directives = {{"cluster", "dgx-h100"}, {"default-train-iters", "100"}};
  std::string s = render_megatron_torchrun(L, "t");
  EXPECT_THAT(s, HasSubstr("# note: a note\n# mplan import reads the lines below"));
  EXPECT_THAT(s, HasSubstr("\n# mplan: cluster=dgx-h100\n# mplan: default-train-iters=100\n"));
  EXPECT_THAT(render_megatron_args(L), Not(HasSubstr("mplan")));
  EXPECT_EQ(megatron_launch_to_json(L)["mplan"]["cluster"], "dgx-h100");
  auto d = read_mplan_directives(s);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, "cluster");
  EXPECT_EQ(d[0].value, "dgx-h100");
  EXPECT_EQ(d[1].key, "default-train-iters");
  EXPECT_EQ(d[1].line, d[0].line + 1);
}

TEST(MegatronLaunch, DirectiveLines) {
  auto d = read_mplan_directives(
      "x=1\n  #   mplan: nothing\n# mplan:   cluster={\"a\": \"b=c\"}  \r\n# mplan cluster=y\n"
      "echo '# mplan: not=here'\n# mplan: nothing\n");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].line, 3);  // "#   mplan:" is not the form: only "# mplan:" counts
  EXPECT_EQ(d[0].key, "cluster");
  EXPECT_EQ(d[0].value, "{\"a\": \"b=c\"}");
  EXPECT_EQ(d[1].line, 6);
  EXPECT_EQ(d[1].key, "");  // no KEY=VALUE
  EXPECT_EQ(d[1].value, "nothing");
}

}  // namespace
}  // namespace mplan
