// Tests of the rule key of a violation: numbers become '#', words with digits stay, the field is
// kept, and one rule with different values gives one key.
#include "sim/sweep/rejection_rule.hpp"

#include <gtest/gtest.h>

namespace mplan::sweep {
namespace {

TEST(RejectionRule, NumbersBecomeHashes) {
  EXPECT_EQ(rejection_rule({"parallel.tp",
                            "num_attention_heads (96) must be a multiple of "
                            "tensor_model_parallel_size (5)."}),
            "parallel.tp: num_attention_heads (#) must be a multiple of "
            "tensor_model_parallel_size (#).");
}

TEST(RejectionRule, SameRuleDifferentValuesSameKey) {
  Violation a{"parallel.pp", "Number of layers should be divisible (num_layers 96, pp 64)"};
  Violation b{"parallel.pp", "Number of layers should be divisible (num_layers 126, pp 4)"};
  EXPECT_EQ(rejection_rule(a), rejection_rule(b));
  Violation other_field{"parallel.vpp", a.message};
  EXPECT_NE(rejection_rule(a), rejection_rule(other_field));
}

TEST(RejectionRule, DigitsInsideWordsAndDecimals) {
  EXPECT_EQ(rejection_rule(
                {"parallel", "cluster 'dgx-a100-80g' with 1f1b at 2.5 GiB, fp32, [PP=4 , M=3]"}),
            "parallel: cluster 'dgx-a100-80g' with 1f1b at # GiB, fp32, [PP=# , M=#]");
}

}  // namespace
}  // namespace mplan::sweep
