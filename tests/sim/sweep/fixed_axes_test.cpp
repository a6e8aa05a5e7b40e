// Tests of the --fix parser: every key and its spellings, canonical text, and errors that name
// the flag and the item.
#include "sim/sweep/fixed_axes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_fixed_axes(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FixedAxes, EmptyFixesNothing) {
  EXPECT_TRUE(parse_fixed_axes("").empty());
  EXPECT_TRUE(parse_fixed_axes("  ").empty());
  EXPECT_EQ(to_string(FixedAxes{}), "");
}

TEST(FixedAxes, EveryKey) {
  FixedAxes f = parse_fixed_axes(
      "tp=8, cp=2,ep=4,etp=1,pp=16,vpp=3,dp=2,mbs=2,sp=on,recompute=full,dist_opt=off,"
      "schedule=interleaved");
  EXPECT_EQ(f.tp, 8);
  EXPECT_EQ(f.cp, 2);
  EXPECT_EQ(f.ep, 4);
  EXPECT_EQ(f.etp, 1);
  EXPECT_EQ(f.pp, 16);
  EXPECT_EQ(f.vpp, 3);
  EXPECT_EQ(f.dp, 2);
  EXPECT_EQ(f.micro_batch_size, 2);
  EXPECT_EQ(f.sequence_parallel, true);
  EXPECT_EQ(f.recompute, Recompute::kFull);
  EXPECT_EQ(f.distributed_optimizer, false);
  EXPECT_EQ(f.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(to_string(f),
            "tp=8,cp=2,ep=4,etp=1,pp=16,vpp=3,dp=2,mbs=2,sp=on,recompute=full,dist_opt=off,"
            "schedule=interleaved");
}

TEST(FixedAxes, LongSpellingsAndSwitchWords) {
  FixedAxes f = parse_fixed_axes(
      "micro_batch_size=4,sequence_parallel=false,distributed_optimizer=1,schedule=zb-h1");
  EXPECT_EQ(f.micro_batch_size, 4);
  EXPECT_EQ(f.sequence_parallel, false);
  EXPECT_EQ(f.distributed_optimizer, true);
  EXPECT_EQ(f.schedule, ScheduleKind::kZbH1);
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);  // canonical text parses back
}

TEST(FixedAxes, ExchangeOverlapAndOffloadKeys) {
  FixedAxes f = parse_fixed_axes(
      "cp_comm_type=a2a+p2p,cp_a2a=2,overlap_p2p=off,offload_layers=0,"
      "offload_modules=core_attn+attn_proj");
  EXPECT_EQ(f.cp_comm_type, CpCommType::kA2aP2p);
  EXPECT_EQ(f.cp_a2a, 2);
  EXPECT_EQ(f.overlap_p2p, false);
  EXPECT_EQ(f.offload_layers, 0);
  EXPECT_EQ(f.offload_modules, kOffloadCoreAttn | kOffloadAttnProj);
  EXPECT_EQ(to_string(f),
            "cp_comm_type=a2a+p2p,cp_a2a=2,overlap_p2p=off,offload_layers=0,"
            "offload_modules=core_attn+attn_proj");
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);
  // Megatron's spellings; "none" for no module.
  f = parse_fixed_axes(
      "cp_comm_type=allgather,overlap_p2p_comm=true,cpu_offloading_num_layers=3,"
      "offload_modules=none");
  EXPECT_EQ(f.cp_comm_type, CpCommType::kAllGather);
  EXPECT_EQ(f.overlap_p2p, true);
  EXPECT_EQ(f.offload_layers, 3);
  EXPECT_EQ(f.offload_modules, 0u);
  EXPECT_EQ(to_string(f),
            "cp_comm_type=all_gather,overlap_p2p=on,offload_layers=3,offload_modules=none");
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);
  EXPECT_FALSE(f.empty());
}

TEST(FixedAxes, UserbufferOverlapAndFsdpKeys) {
  FixedAxes f = parse_fixed_axes("fsdp=optim_grads_params,tp_comm_overlap=on,sp=on");
  EXPECT_EQ(f.tp_comm_overlap, true);
  EXPECT_EQ(f.fsdp, std::optional<DpSharding>(DpSharding::kOptimGradsParams));
  EXPECT_EQ(to_string(f), "sp=on,tp_comm_overlap=on,fsdp=optim_grads_params");
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);
  // off is a fix too (no FSDP), unlike no fix; Megatron's spelling of the key.
  f = parse_fixed_axes("data_parallel_sharding_strategy=off,tp_comm_overlap=false");
  ASSERT_TRUE(f.fsdp.has_value());
  EXPECT_FALSE(f.fsdp->has_value());
  EXPECT_EQ(f.tp_comm_overlap, false);
  EXPECT_EQ(to_string(f), "tp_comm_overlap=off,fsdp=off");
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);
  EXPECT_NE(f, FixedAxes{});
  // Contradictions and bad values name the keys.
  EXPECT_THAT(error_of("fsdp=optim_grads,dist_opt=off"),
              HasSubstr("--fix: fsdp=optim_grads runs the distributed optimizer (Megatron-FSDP "
                        "v1), not dist_opt=off"));
  EXPECT_EQ(error_of("fsdp=off,dist_opt=off"), "");
  EXPECT_THAT(error_of("tp_comm_overlap=on,sp=off"),
              HasSubstr("--fix: tp_comm_overlap=on overlaps sequence parallelism's collectives"));
  EXPECT_THAT(error_of("fsdp=zero3"),
              HasSubstr("--fix: fsdp must be off, no_shard, optim, optim_grads or "
                        "optim_grads_params, got \"zero3\""));
  EXPECT_THAT(error_of("fsdp=off,fsdp=optim"), HasSubstr("--fix: fsdp is given twice"));
  EXPECT_THAT(error_of("tp_comm_overlap=yes"),
              HasSubstr("--fix: tp_comm_overlap must be on or off, got \"yes\""));
}

TEST(FixedAxes, ErrorsNameTheFlagAndItem) {
  EXPECT_THAT(error_of("cp_comm_type=ring"),
              HasSubstr("--fix: cp_comm_type: must be one of p2p, all_gather, a2a, a2a+p2p; got "
                        "\"ring\""));
  EXPECT_THAT(error_of("cp_a2a=0"), HasSubstr("--fix: cp_a2a must be an integer from 1"));
  EXPECT_THAT(
      error_of("cp_comm_type=a2a,cp_a2a=2"),
      HasSubstr("--fix: cp_a2a is the all-to-all size of cp_comm_type a2a+p2p, not of a2a"));
  EXPECT_THAT(error_of("overlap_p2p=yes"),
              HasSubstr("--fix: overlap_p2p must be on or off, got \"yes\""));
  EXPECT_THAT(error_of("offload_layers=-1"),
              HasSubstr("--fix: offload_layers must be an integer from 0 to"));
  EXPECT_THAT(error_of("offload_modules=core_attn+mlp"),
              HasSubstr("--fix: offload_modules: must name modules among attn_norm"));
  EXPECT_THAT(error_of("offload_modules=core_attn+mlp"), HasSubstr("got \"mlp\""));
  EXPECT_THAT(error_of("offload_layers=1,cpu_offloading_num_layers=2"),
              HasSubstr("--fix: offload_layers is given twice"));
  EXPECT_THAT(error_of("tp=0"), HasSubstr("--fix: tp must be an integer from 1"));
  EXPECT_THAT(error_of("tp=eight"), HasSubstr("got \"eight\""));
  EXPECT_THAT(error_of("tp=3000000000"), HasSubstr("--fix: tp must be an integer from 1 to"));
  EXPECT_THAT(error_of("tp=8,tp=4"), HasSubstr("--fix: tp is given twice"));
  EXPECT_THAT(error_of("mbs=1,micro_batch_size=2"), HasSubstr("--fix: mbs is given twice"));
  EXPECT_THAT(error_of("tq=8"), HasSubstr("--fix: unknown key \"tq\" (keys: tp, cp"));
  EXPECT_THAT(error_of("tp"), HasSubstr("--fix: expected key=value items"));
  EXPECT_THAT(error_of("tp=8,"), HasSubstr("--fix: expected key=value items"));
  EXPECT_THAT(error_of("sp=maybe"), HasSubstr("--fix: sp must be on or off, got \"maybe\""));
  EXPECT_THAT(error_of("recompute=most"), HasSubstr("--fix: recompute: must be one of none"));
  EXPECT_THAT(error_of("schedule=best"), HasSubstr("--fix: schedule: must be one of gpipe"));
}

}  // namespace
}  // namespace mplan::sweep
