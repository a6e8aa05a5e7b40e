// GradSync: reductions launched on the comm stream exactly when a bucket's last parameter becomes
// final, once per bucket and step, in the layout's buckets; reduce-scatter into this rank's shard
// with the distributed optimizer; everything in line at finish() without overlap; and the
// parameter all-gathers of the distributed optimizer, each waited for once by the forward.
#include "exec/parallel/grad_sync.hpp"

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec {
namespace {

// gpt(layers, hidden, heads, seq, vocab), the vocabulary padded to a multiple of 64.
ModelSpec small_model() {
  ModelSpec m = test::gpt(1, 8, 2, 4, 64);
  m.make_vocab_size_divisible_by = 64;
  return m;
}

// Records every collective: kind, pointers, sizes and stream.
class RecordingComm final : public Comm {
 public:
  struct Call {
    char kind;  // 'a' all-reduce, 'r' reduce-scatter, 'g' all-gather
    const void* a;
    const void* b;
    int64_t n;
    Stream s;
  };
  std::vector<Call> calls;
  int rank_ = 1;
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void all_reduce(Tensor t, ReduceOp, Stream s) override {
    calls.push_back({'a', t.data, nullptr, t.numel(), s});
  }
  void all_gather(Tensor send, Tensor recv, Stream s) override {
    calls.push_back({'g', send.data, recv.data, recv.numel(), s});
  }
  void reduce_scatter(Tensor send, Tensor recv, Stream s) override {
    calls.push_back({'r', send.data, recv.data, send.numel(), s});
  }
  void broadcast(Tensor, int, Stream) override {}
  void send(Tensor, int, Stream) override {}
  void recv(Tensor, int, Stream) override {}
  void group_start() override {}
  void group_end() override {}
};

ParamLayout layout(bool distributed) {
  ParallelConfig p;
  p.dp = 2;
  p.distributed_optimizer = distributed;
  return make_param_layout(small_model(), p, 0, 500);
}

TEST(GradSync, LaunchesEachBucketWhenItsLastParameterIsFinal) {
  const ParamLayout p = layout(false);
  CpuBackend be;
  Tensor grads = be.alloc(DType::kF32, {p.total_elems}, "grads");
  RecordingComm dp;
  GradSync sync(p, grads, be, dp, /*overlap=*/true, /*distributed=*/false, nullptr);
  ASSERT_EQ(sync.buckets().size(), 3u);
  sync.begin_step();
  // Backward order: parameters from last to first; bucket k launches right after its last one.
  for (int i = static_cast<int>(p.specs.size()) - 1; i >= 0; --i) {
    sync.mark_final(i);
    size_t done = 0;
    for (const GradBucket& b : sync.buckets())
      if (b.params.back() >= i) ++done;
    EXPECT_EQ(dp.calls.size(), done) << "after parameter " << i;
  }
  for (size_t k = 0; k < dp.calls.size(); ++k) {
    EXPECT_EQ(dp.calls[k].kind, 'a');
    EXPECT_EQ(dp.calls[k].s, Stream::kComm);
    EXPECT_EQ(dp.calls[k].a, grads.flat_slice(sync.buckets()[k].offset, 1).data);
    EXPECT_EQ(dp.calls[k].n, sync.buckets()[k].numel);
  }
  sync.finish();
  EXPECT_EQ(sync.reductions_launched(), 3);
  EXPECT_EQ(dp.calls.size(), 3u);  // nothing left for finish()
  // A parameter marked twice, or finishing with one not final: broken invariants.
  sync.begin_step();
  sync.mark_final(0);
  EXPECT_THROW(sync.mark_final(0), InternalError);
  sync.begin_step();
  EXPECT_THROW(sync.finish(), InternalError);
}

TEST(GradSync, WithoutOverlapEverythingIsReducedInLineAtFinish) {
  const ParamLayout p = layout(false);
  CpuBackend be;
  Tensor grads = be.alloc(DType::kF32, {p.total_elems}, "grads");
  RecordingComm dp;
  GradSync sync(p, grads, be, dp, /*overlap=*/false, false, nullptr);
  sync.begin_step();
  for (int i = static_cast<int>(p.specs.size()) - 1; i >= 0; --i) sync.mark_final(i);
  EXPECT_TRUE(dp.calls.empty());
  sync.finish();
  ASSERT_EQ(dp.calls.size(), 3u);
  for (const auto& c : dp.calls) EXPECT_EQ(c.s, Stream::kCompute);
}

TEST(GradSync, DistributedOptimizerReduceScattersIntoItsShardAndGathersParameters) {
  const ParamLayout p = layout(true);
  CpuBackend be;
  Tensor grads = be.alloc(DType::kF32, {p.total_elems}, "grads");
  Tensor weights = be.alloc(DType::kBF16, {p.total_elems}, "weights");
  RecordingComm dp;  // this rank is data-parallel rank 1 of 2
  Tracer tracer(be);
  GradSync sync(p, grads, be, dp, true, true, &tracer);
  sync.begin_step();
  for (int i = static_cast<int>(p.specs.size()) - 1; i >= 0; --i) sync.mark_final(i);
  sync.finish();
  ASSERT_EQ(dp.calls.size(), sync.buckets().size());
  for (size_t k = 0; k < dp.calls.size(); ++k) {
    const GradBucket& b = sync.buckets()[k];
    EXPECT_EQ(b.numel % 128, 0);  // padded to lcm(dp, 128)
    EXPECT_EQ(dp.calls[k].kind, 'r');
    EXPECT_EQ(dp.calls[k].n, b.numel);
    const ShardRange r = bucket_shard(b, 1, 2);
    EXPECT_EQ(r.begin, b.offset + b.numel / 2);
    EXPECT_EQ(dp.calls[k].b, grads.flat_slice(r.begin, 1).data);  // in place: our half
  }
  dp.calls.clear();
  sync.gather_params(weights, /*overlap=*/true);
  ASSERT_EQ(dp.calls.size(), sync.buckets().size());
  // Forward order: the bucket holding the first parameters (the last bucket) first.
  EXPECT_EQ(dp.calls.front().b, weights.flat_slice(sync.buckets().back().offset, 1).data);
  for (const auto& c : dp.calls) EXPECT_EQ(c.s, Stream::kComm);
  tracer.clear();
  sync.wait_param(0);
  sync.wait_param(0);  // once per gather: a no-op the second time
  sync.wait_param(static_cast<int>(p.specs.size()) - 1);  // another bucket
  ASSERT_EQ(tracer.spans().size(), 2u);
  for (const TraceSpan& s : tracer.spans()) EXPECT_EQ(s.name, "param_wait");
}

}  // namespace
}  // namespace mplan::exec
