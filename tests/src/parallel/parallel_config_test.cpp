// Tests of the "parallel" section reader: defaults, required fields and the range of every
// number, each error naming its field.
#include "src/parallel/parallel_config.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

std::string error_of(const std::string& text) {
  try {
    parallel_from_json(parse_json(text, "t"), "parallel");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelConfig, DefaultsAndRequiredFields) {
  const ParallelConfig p = parallel_from_json(
      parse_json(R"({"dp": 2, "micro_batch_size": 1, "global_batch_size": 8})", "t"), "parallel");
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.pp, 1);
  EXPECT_EQ(p.etp, 1);
  EXPECT_EQ(p.schedule, ScheduleKind::k1F1B);
  // dp, micro_batch_size and global_batch_size have no default.
  EXPECT_EQ(error_of(R"({"micro_batch_size": 1, "global_batch_size": 8})"),
            "parallel.dp: missing (required)");
  EXPECT_EQ(error_of(R"({"dp": 1, "global_batch_size": 8})"),
            "parallel.micro_batch_size: missing (required)");
  EXPECT_EQ(error_of(R"({"dp": 1, "micro_batch_size": 1})"),
            "parallel.global_batch_size: missing (required)");
}

TEST(ParallelConfig, LayoutGivesTheVirtualStagesAndRoundTrips) {
  const std::string base = R"("dp": 1, "micro_batch_size": 1, "global_batch_size": 8, "pp": 2)";
  const ParallelConfig p = parallel_from_json(
      parse_json("{" + base + R"(, "pipeline_model_parallel_layout": "Et*3|(tt|)*6L"})", "t"),
      "parallel");
  ASSERT_TRUE(p.pipeline_model_parallel_layout.has_value());
  EXPECT_EQ(p.pipeline_model_parallel_layout->num_stages(), 8);
  EXPECT_EQ(p.vpp, 4);  // 8 stages / pp 2
  EXPECT_EQ(p.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(parallel_from_json(parallel_to_json(p), "parallel"), p);
  EXPECT_EQ(parallel_to_json(p)["pipeline_model_parallel_layout"], "Et*3|(tt|)*6L");
  // A stage count pp does not divide leaves vpp at 1: validate() names that rule.
  EXPECT_EQ(parallel_from_json(
                parse_json("{" + base + R"(, "pipeline_model_parallel_layout": "Et|t|L"})", "t"),
                "parallel")
                .vpp,
            1);
  EXPECT_EQ(error_of("{" + base + R"(, "pipeline_model_parallel_layout": "Et|T|L"})"),
            "parallel.pipeline_model_parallel_layout: invalid layer character 'T' in \"Et|T|L\"; "
            "known layer characters: E, L, t, m (and | ( ) * n ,)");
  EXPECT_EQ(error_of("{" + base + R"(, "pipeline_model_parallel_layout": 3})")
                .rfind("parallel.pipeline_model_parallel_layout: must be a string", 0),
            0u);
  const ParallelConfig q =
      parallel_from_json(parse_json("{" + base +
                                        R"(, "account_for_embedding_in_pipeline_split": true,
                          "account_for_loss_in_pipeline_split": true})",
                                    "t"),
                         "parallel");
  EXPECT_TRUE(q.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(q.account_for_loss_in_pipeline_split);
  EXPECT_EQ(parallel_from_json(parallel_to_json(q), "parallel"), q);
}

TEST(ParallelConfig, MegatronFsdpFieldsRoundTrip) {
  const std::string base = R"("dp": 8, "micro_batch_size": 1, "global_batch_size": 8)";
  const ParallelConfig p = parallel_from_json(
      parse_json("{" + base + R"(, "use_megatron_fsdp": true, "distributed_optimizer": true,
                 "data_parallel_sharding_strategy": "optim_grads", "fsdp_double_buffer": true,
                 "num_distributed_optimizer_instances": 2})",
                 "t"),
      "parallel");
  EXPECT_TRUE(p.use_megatron_fsdp);
  EXPECT_EQ(p.data_parallel_sharding_strategy, DpSharding::kOptimGrads);
  EXPECT_TRUE(p.fsdp_double_buffer);
  EXPECT_EQ(p.num_distributed_optimizer_instances, 2);
  EXPECT_EQ(parallel_from_json(parallel_to_json(p), "parallel"), p);
  // Megatron's default strategy is optim_grads_params.
  EXPECT_EQ(parallel_from_json(parse_json("{" + base + "}", "t"), "parallel")
                .data_parallel_sharding_strategy,
            DpSharding::kOptimGradsParams);
  EXPECT_EQ(error_of("{" + base + R"(, "data_parallel_sharding_strategy": "zero3"})"),
            "parallel.data_parallel_sharding_strategy: must be one of no_shard, optim, "
            "optim_grads, optim_grads_params; got \"zero3\"");
}

TEST(ParallelConfig, RecomputeModulesRoundTrip) {
  const std::string base = R"("dp": 1, "micro_batch_size": 1, "global_batch_size": 8)";
  // Megatron's default is core_attn alone, and is not written back.
  const ParallelConfig d = parallel_from_json(parse_json("{" + base + "}", "t"), "parallel");
  EXPECT_EQ(d.recompute_modules, kRecomputeCoreAttn);
  EXPECT_FALSE(parallel_to_json(d).contains("recompute_modules"));
  const ParallelConfig p = parallel_from_json(parse_json("{" + base + R"(, "recompute": "selective",
                 "recompute_modules": ["mlp", "core_attn", "moe_act"]})",
                                                         "t"),
                                              "parallel");
  EXPECT_EQ(p.recompute_modules, kRecomputeCoreAttn | kRecomputeMlp | kRecomputeMoeAct);
  EXPECT_EQ(recompute_module_names(p.recompute_modules),
            (std::vector<std::string>{"core_attn", "moe_act", "mlp"}));
  EXPECT_EQ(parallel_from_json(parallel_to_json(p), "parallel"), p);
  // An empty list recomputes nothing (Megatron accepts it) and survives the round trip.
  const ParallelConfig e =
      parallel_from_json(parse_json("{" + base + R"(, "recompute_modules": []})", "t"), "parallel");
  EXPECT_EQ(e.recompute_modules, 0u);
  EXPECT_EQ(parallel_from_json(parallel_to_json(e), "parallel"), e);
  ParallelConfig o = d;
  o.tp_comm_overlap = true;
  EXPECT_TRUE(parallel_to_json(o).at("tp_comm_overlap").get<bool>());
  EXPECT_EQ(parallel_from_json(parallel_to_json(o), "parallel"), o);
  EXPECT_EQ(error_of("{" + base + R"(, "recompute_modules": ["attention"]})"),
            "parallel.recompute_modules: must name modules among core_attn, moe_act, layernorm, "
            "mla_up_proj, mlp, moe, shared_experts; got \"attention\"");
  ParallelConfig cp = d;
  cp.cp = 4;
  cp.cp_comm_type = CpCommType::kA2aP2p;
  cp.hierarchical_context_parallel_sizes = {2, 2};
  cp.overlap_p2p_comm = true;
  cp.overlap_p2p_comm_warmup_flush = true;
  const Json cj = parallel_to_json(cp);
  EXPECT_EQ(cj.at("cp_comm_type"), "a2a+p2p");
  EXPECT_EQ(parallel_from_json(cj, "parallel"), cp);
  EXPECT_FALSE(parallel_to_json(d).contains("cp_comm_type"));
  EXPECT_FALSE(parallel_to_json(d).contains("overlap_p2p_comm"));
  EXPECT_EQ(cp_a2a_size(cp), 2);
  EXPECT_EQ(cp_comm_type_from_string("allgather", "f"), CpCommType::kAllGather);
  EXPECT_EQ(error_of("{" + base + R"(, "cp_comm_type": "ring"})"),
            "parallel.cp_comm_type: must be one of p2p, all_gather, a2a, a2a+p2p; got \"ring\"");
  EXPECT_EQ(error_of("{" + base + R"(, "hierarchical_context_parallel_sizes": [2]})"),
            "parallel.hierarchical_context_parallel_sizes: must be a list of two sizes "
            "[all-to-all, p2p], got [2]");
  EXPECT_EQ(error_of("{" + base + R"(, "recompute_modules": "mlp"})"),
            "parallel.recompute_modules: must be a list of module names (at most 16), got \"mlp\"");
}

TEST(ParallelConfig, SizesOutsideTheirRangeNameTheField) {
  const std::string base = R"("dp": 1, "micro_batch_size": 1, "global_batch_size": 8)";
  EXPECT_EQ(error_of("{" + base + R"(, "tp": 4096})"), "parallel.tp: must be <= 1024, got 4096");
  EXPECT_EQ(error_of("{" + base + R"(, "pp": 0})"), "parallel.pp: must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"dp": 2147483648, "micro_batch_size": 1, "global_batch_size": 8})"),
            "parallel.dp: must be <= 1048576, got 2147483648");
  EXPECT_EQ(error_of(R"({"dp": 1, "micro_batch_size": 1, "global_batch_size": 4294967296})"),
            "parallel.global_batch_size: must be <= 16777216, got 4294967296");
  EXPECT_EQ(error_of("{" + base + R"(, "decoder_first_pipeline_num_layers": 5000})"),
            "parallel.decoder_first_pipeline_num_layers: must be <= 1024, got 5000");
}

}  // namespace
}  // namespace mplan
