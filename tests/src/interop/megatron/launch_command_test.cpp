// Tests of finding the training command of a launch script and its process count: torchrun's
// spellings and defaults, python -m torch.distributed.run, plain python, bare argument lines,
// and what cannot be known without a value.
#include "src/interop/megatron/launch_command.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

LaunchCommand launch_of(const std::string& script, int64_t gpus = 0) {
  std::vector<std::string> warnings;
  return find_launch_command(read_shell_script(script), gpus, 8, warnings);
}

TEST(LaunchCommand, ProcessCounts) {
  auto world = [](const std::string& line) { return launch_of(line + " --num-layers 2\n").world; };
  EXPECT_EQ(world("torchrun --nproc-per-node=4 --nnodes=2 pretrain_gpt.py"), 8);
  EXPECT_EQ(world("torchrun pretrain_gpt.py"), 1);  // torchrun's defaults
  EXPECT_EQ(world("python -m torch.distributed.run --nproc_per_node 2 pretrain_gpt.py"), 2);
  EXPECT_EQ(world("python3 pretrain_gpt.py"), 1);
  EXPECT_EQ(world("torchrun --nproc_per_node gpu --nnodes 1:3 pretrain_gpt.py"), 24);
  EXPECT_EQ(world("srun pretrain_gpt.py"), std::nullopt);
  LaunchCommand l =
      launch_of("torchrun --nproc_per_node 8 --nnodes 2 train/pretrain_gpt.py --a 1\n");
  EXPECT_EQ(l.nproc_per_node, 8);
  EXPECT_EQ(l.nnodes, 2);
  EXPECT_EQ(l.description, "--nproc_per_node 8 x --nnodes 2");
  ASSERT_EQ(l.arguments.size(), 2u);
  EXPECT_EQ(l.arguments[0].text, "--a");
}

TEST(LaunchCommand, TheTrainingProgramWins) {
  LaunchCommand l = launch_of(
      "python tools/preprocess.py --x 1\ntorchrun pretrain_gpt.py --a 1\npython eval.py --b 2\n");
  ASSERT_FALSE(l.arguments.empty());
  EXPECT_EQ(l.arguments[0].text, "--a");
}

TEST(LaunchCommand, BareArgumentLines) {
  LaunchCommand l = launch_of("--num-layers 2\n--hidden-size 64\n");
  EXPECT_EQ(l.world, std::nullopt);
  EXPECT_EQ(l.arguments.size(), 4u);
}

TEST(LaunchCommand, Errors) {
  EXPECT_THAT([] { launch_of("echo hello\n"); },
              ThrowsMessage<Error>(HasSubstr("no Megatron-LM launch command")));
  EXPECT_THAT([] { launch_of("python pretrain_bert.py --num-layers 2\n"); },
              ThrowsMessage<Error>(HasSubstr("pretrain_bert.py: mplan imports GPT decoder jobs")));
  EXPECT_THAT([] { launch_of("torchrun --nproc_per_node $G pretrain_gpt.py\n"); },
              ThrowsMessage<Error>(HasSubstr("--nproc_per_node: its value ($G) depends on $G")));
  EXPECT_THAT([] { launch_of("torchrun --nnodes 0 pretrain_gpt.py\n"); },
              ThrowsMessage<Error>(HasSubstr("--nnodes: must be an integer >= 1, got '0'")));
  // With the plan's size given, an unknown process count is no error.
  EXPECT_EQ(launch_of("torchrun --nproc_per_node $G pretrain_gpt.py\n", 16).world, std::nullopt);
}

}  // namespace
}  // namespace mplan
