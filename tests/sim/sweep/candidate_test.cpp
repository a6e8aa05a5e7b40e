// Tests of Candidate -> ParallelConfig (the plan file's defaults for what the sweep does not
// vary) and of the layout label.
#include "sim/sweep/candidate.hpp"

#include <gtest/gtest.h>

namespace mplan::sweep {
namespace {

TEST(Candidate, ToParallelSetsEveryAxisAndKeepsPlanDefaults) {
  Candidate c;
  c.tp = 8;
  c.cp = 2;
  c.ep = 1;
  c.etp = 8;
  c.pp = 16;
  c.vpp = 1;
  c.dp = 4;
  c.micro_batch_size = 2;
  c.first_stage_layers = 7;
  c.last_stage_layers = 7;
  c.schedule = ScheduleKind::kZbH1;
  c.recompute = Recompute::kFull;
  c.sequence_parallel = true;
  c.distributed_optimizer = true;
  const ParallelConfig p = to_parallel(c, 1536);
  EXPECT_EQ(p.world_size(), 8 * 2 * 16 * 4);
  EXPECT_EQ(p.etp, 8);
  EXPECT_EQ(p.global_batch_size, 1536);
  EXPECT_EQ(p.micro_batch_size, 2);
  EXPECT_EQ(p.schedule, ScheduleKind::kZbH1);
  EXPECT_EQ(p.recompute, Recompute::kFull);
  EXPECT_EQ(p.recompute_method, RecomputeMethod::kUniform);
  EXPECT_EQ(p.recompute_num_layers, 1);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_TRUE(p.distributed_optimizer);
  EXPECT_EQ(p.decoder_first_pipeline_num_layers, 7);
  EXPECT_EQ(p.decoder_last_pipeline_num_layers, 7);
  // Not varied: the plan file's defaults.
  const ParallelConfig d;
  EXPECT_EQ(p.order, d.order);
  EXPECT_EQ(p.microbatch_group_size_per_vp_stage, 0);
  EXPECT_EQ(p.overlap_grad_reduce, d.overlap_grad_reduce);
  EXPECT_EQ(p.overlap_param_gather, d.overlap_param_gather);
  // Even split: no first/last stage sizes.
  c.first_stage_layers = c.last_stage_layers = 0;
  EXPECT_FALSE(to_parallel(c, 1536).decoder_first_pipeline_num_layers.has_value());
  EXPECT_FALSE(to_parallel(c, 1536).decoder_last_pipeline_num_layers.has_value());
}

TEST(Candidate, ParallelJsonRoundTripsToTheSameConfig) {
  Candidate c;
  c.tp = 4;
  c.etp = 4;
  c.pp = 2;
  c.vpp = 3;
  c.schedule = ScheduleKind::kInterleaved;
  const ParallelConfig p = to_parallel(c, 64);
  EXPECT_EQ(parallel_from_json(parallel_to_json(p), "parallel"), p);
}

TEST(Candidate, LayoutLabel) {
  Candidate c;
  c.tp = 8;
  c.etp = 8;
  c.pp = 16;
  c.dp = 1;
  EXPECT_EQ(layout_label(c), "tp8 pp16 dp1");
  c.cp = 2;
  c.ep = 4;
  c.etp = 1;
  c.vpp = 3;
  c.first_stage_layers = 7;
  c.last_stage_layers = 7;
  EXPECT_EQ(layout_label(c), "tp8 cp2 ep4 etp1 pp16 vpp3 dp1 (first 7, last 7 layers)");
}

}  // namespace
}  // namespace mplan::sweep
