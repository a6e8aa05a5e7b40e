// Tests of the argument table itself: names are unique, every argument export writes has a row
// that reads it back, lookups by name and by prefix, and the no-effect rows classify what import
// leaves unread. The round trips through whole scripts are in megatron_export_test.cpp.
#include "src/interop/megatron/megatron_arg_table.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "src/interop/megatron/megatron_export.hpp"
#include "tests/src/interop/megatron/test_plans.hpp"

namespace mplan {
namespace {

using namespace megatron_test;

TEST(MegatronArgTable, NamesAreUniqueAndWellFormed) {
  std::set<std::string_view> names;
  for (const MegatronArgRow& r : megatron_arg_table()) {
    if (r.name.empty()) {
      EXPECT_NE(r.group, ArgGroup::kNone);  // a plan field without an argument: notes only
      EXPECT_EQ(r.parse, nullptr);
      continue;
    }
    EXPECT_EQ(r.name.substr(0, 2), "--") << r.name;
    EXPECT_TRUE(names.insert(r.name).second) << "duplicate row " << r.name;
    // Export writes exactly the rows that have an array to be written in.
    EXPECT_EQ(r.group == ArgGroup::kNone, r.write == nullptr) << r.name;
    // A row that changes a step and is written is also read back.
    EXPECT_TRUE(!r.write || r.effect == StepEffect::kNoEffect || r.parse) << r.name;
  }
}

TEST(MegatronArgTable, EveryExportedArgumentHasItsRow) {
  for (const char* json : kAllPlans) {
    MegatronLaunch L = megatron_launch_from_plan(plan_of(json));
    for (const MegatronArgGroup& g : L.groups)
      for (const MegatronArg& a : g.args) {
        const MegatronArgRow* row = find_arg_row(a.name);
        ASSERT_NE(row, nullptr) << a.name;
        EXPECT_EQ(row->name, a.name);
        EXPECT_EQ(group_name(row->group), g.name) << a.name;
        // Import reads it back, or it has no effect on a step (data arguments).
        EXPECT_TRUE(row->parse || row->effect == StepEffect::kNoEffect) << a.name;
      }
  }
}

TEST(MegatronArgTable, LookupByNameAndPrefix) {
  ASSERT_NE(find_arg_row("--num-layers"), nullptr);
  EXPECT_EQ(find_arg_row("--num-layers")->field, "model.num_layers");
  EXPECT_EQ(find_arg_row("--num-layers")->effect, StepEffect::kChangesStep);
  // No-effect rows cover the arguments they begin: "--log-" and "--save".
  ASSERT_NE(find_arg_row("--log-throughput"), nullptr);
  EXPECT_EQ(find_arg_row("--log-throughput")->name, "--log-");
  EXPECT_EQ(find_arg_row("--save-retain-interval")->name, "--save");
  // The training loop's arguments have rows of their own: plan fields with no effect on a step.
  for (const char* name : {"--data-path",
                           "--split",
                           "--vocab-file",
                           "--merge-file",
                           "--save",
                           "--load",
                           "--save-interval",
                           "--eval-interval",
                           "--eval-iters",
                           "--log-interval",
                           "--tensorboard-dir",
                           "--lr-decay-style",
                           "--lr-decay-iters",
                           "--lr-warmup-iters",
                           "--lr-warmup-fraction",
                           "--min-lr",
                           "--lr",
                           "--weight-decay",
                           "--clip-grad",
                           "--seed",
                           "--train-iters"}) {
    const MegatronArgRow* row = find_arg_row(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->name, name);
    EXPECT_EQ(row->field.substr(0, 9), "training.") << name;
    EXPECT_EQ(row->effect, StepEffect::kNoEffect) << name;
    EXPECT_NE(row->parse, nullptr) << name;
    EXPECT_NE(row->write, nullptr) << name;
  }
  // Arguments mplan does not know.
  EXPECT_EQ(find_arg_row("--made-up-argument"), nullptr);
  EXPECT_EQ(find_arg_row("--moe-router-load-balancing-type"), nullptr);
  EXPECT_EQ(find_arg_row(""), nullptr);
}

TEST(MegatronArgTable, GroupsInScriptOrder) {
  EXPECT_STREQ(group_name(ArgGroup::kModel), "GPT_MODEL_ARGS");
  EXPECT_STREQ(group_name(ArgGroup::kParallel), "MODEL_PARALLEL_ARGS");
  EXPECT_STREQ(group_name(ArgGroup::kNone), "");
  MegatronLaunch L = megatron_launch_from_plan(plan_of(kMixtral));
  std::vector<std::string> names;
  for (const auto& g : L.groups) names.push_back(g.name);
  EXPECT_EQ(names, (std::vector<std::string>{"GPT_MODEL_ARGS", "MOE_ARGS", "TRAINING_ARGS",
                                             "MODEL_PARALLEL_ARGS", "DATA_ARGS",
                                             "EVAL_AND_LOGGING_ARGS"}));
}

}  // namespace
}  // namespace mplan
