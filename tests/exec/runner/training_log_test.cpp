// Megatron's log formats: the training line field by field (Python's {:8d}, {:12d}, {:.1f},
// {:.6E}, {:5d}, {:.3f}, {:3d} widths) and the dashed validation block with its perplexity.
#include "exec/runner/training_log.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace mplan::exec {
namespace {

TEST(TrainingLog, TheLogLineIsMegatrons) {
  LogInterval l;
  l.iteration = 200;
  l.train_iters = 2000;
  l.consumed_samples = 12800;
  l.ms_per_iteration = 2122.46;
  l.tflops_per_gpu = 212.34;
  l.learning_rate = 2.9e-4;
  l.global_batch_size = 64;
  l.lm_loss = 4.56789;
  l.grad_norm = 0.51234;
  l.tokens_per_s_per_gpu = 61763.4;
  l.mfu = 0.2145;
  const std::string s = format_log_line(l);
  EXPECT_TRUE(
      std::regex_search(s, std::regex("^ \\[\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\] ")))
      << s;
  const std::string rest = s.substr(s.find(']') + 1);
  EXPECT_EQ(rest,
            " iteration      200/    2000 | consumed samples:        12800 | elapsed time per "
            "iteration (ms): 2122.5 | throughput per GPU (TFLOP/s/GPU): 212.3 | learning rate: "
            "2.900000E-04 | global batch size:    64 | lm loss: 4.567890E+00 | loss scale: 1.0 | "
            "grad norm: 0.512 | number of skipped iterations:   0 | number of nan iterations:   0 "
            "| tokens/s/GPU: 61763 | MFU: 21.4% |");
}

TEST(TrainingLog, TheValidationBlockIsMegatrons) {
  const std::string s = format_validation("iteration 200", 3.0);
  const std::string line =
      " validation loss at iteration 200 | lm loss value: 3.000000E+00 | lm loss PPL: "
      "2.008554E+01 | ";
  const std::string dashes(line.size() + 1, '-');
  EXPECT_EQ(s, dashes + "\n" + line + "\n" + dashes + "\n");
  // Perplexity is capped at exp(20), as Megatron caps it.
  EXPECT_EQ(perplexity(25.0), std::exp(20.0));
  EXPECT_NE(format_validation("the end of training for test data", 25.0)
                .find("lm loss PPL: 4.851652E+08 |"),
            std::string::npos);
}

}  // namespace
}  // namespace mplan::exec
