// DpGradSync: buckets cut in reverse parameter order at Megatron's threshold (checked against
// boundaries worked out by hand for a small model), and reductions launched on the comm stream
// exactly when a bucket's last parameter becomes final, once per bucket, only when asked.
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

// Records the offsets of every all-reduce and the stream it was issued on.
class RecordingComm final : public Comm {
 public:
  std::vector<std::pair<const void*, int64_t>> reduces;
  std::vector<Stream> streams;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce(Tensor t, ReduceOp, Stream s) override {
    reduces.emplace_back(t.data, t.numel());
    streams.push_back(s);
  }
  void all_gather(Tensor, Tensor, Stream) override {}
  void reduce_scatter(Tensor, Tensor, Stream) override {}
  void broadcast(Tensor, int, Stream) override {}
  void send(Tensor, int, Stream) override {}
  void recv(Tensor, int, Stream) override {}
  void group_start() override {}
  void group_end() override {}
};

TEST(GradSync, MegatronDefaultBucketSize) {
  EXPECT_EQ(default_bucket_elems(4), 40000000);
  EXPECT_EQ(default_bucket_elems(64), 64000000);
}

TEST(GradSync, BucketsInReverseOrder) {
  GptParams p = make_gpt_params(gpt_dims(small_model(), 1, 1, 0, false));
  // Layout (offsets aligned to 64): wte 512 @0, wpe 32 @512, ln1 w/b 8 @576/@640,
  // proj w 64 @704, proj b 8 @768, qkv w 192 @832, qkv b 24 @1024, ln2 w/b @1088/@1152,
  // fc1 w 256 @1216, fc1 b 32 @1472, fc2 w 256 @1536, fc2 b 8 @1792, lnf w/b @1856/@1920.
  ASSERT_EQ(p.specs[static_cast<size_t>(p.layers[0].fc1_w)].offset, 1216);
  ASSERT_EQ(p.total_elems, 1984);
  auto b = make_grad_buckets(p, 500);
  // From the end: lnf b, lnf w, fc2 b, fc2 w (1984 - 1536 = 448 < 500), fc1 b (512 >= 500).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 1472);
  EXPECT_EQ(b[0].numel, 512);
  EXPECT_EQ(b[0].params.size(), 5u);
  // Then fc1 w .. qkv w: 1472 - 832 = 640 at qkv w (1472 - 1024 = 448 before it).
  EXPECT_EQ(b[1].offset, 832);
  // proj b, proj w, ln1 b, ln1 w, wpe: 832 - 512 = 320, wte makes 832 >= 500.
  EXPECT_EQ(b[2].offset, 0);
  EXPECT_EQ(b[2].numel, 832);
  EXPECT_EQ(b[2].params.size(), 6u);  // wte closed it exactly at offset 0: no empty bucket
  auto one = make_grad_buckets(p, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].numel, p.total_elems);
  EXPECT_EQ(one[0].params.size(), p.specs.size());
}

TEST(GradSync, LaunchesEachBucketWhenItsLastParameterIsFinal) {
  GptParams p = make_gpt_params(gpt_dims(small_model(), 1, 1, 0, false));
  CpuBackend be;
  Tensor grads = be.alloc(DType::kF32, {p.total_elems}, "grads");
  RecordingComm dp;
  DpGradSync sync(p, grads, be, dp, 500);
  const auto& buckets = sync.buckets();
  sync.begin_backward(/*reduce=*/true);
  // Backward order: parameters from last to first; bucket k launches right after its last.
  size_t launched = 0;
  for (int i = static_cast<int>(p.specs.size()) - 1; i >= 0; --i) {
    sync.mark_final(i);
    size_t done = 0;
    for (const auto& b : buckets)
      if (p.specs[static_cast<size_t>(b.params.back())].offset >=
          p.specs[static_cast<size_t>(i)].offset)
        ++done;
    EXPECT_EQ(dp.reduces.size(), done) << "after parameter " << i;
    launched = dp.reduces.size();
  }
  EXPECT_EQ(launched, buckets.size());
  for (size_t k = 0; k < dp.reduces.size(); ++k) {
    EXPECT_EQ(dp.streams[k], Stream::kComm);
    EXPECT_EQ(dp.reduces[k].first, grads.flat_slice(buckets[k].offset, 1).data);
    EXPECT_EQ(dp.reduces[k].second, buckets[k].numel);
  }
  sync.finish();
  EXPECT_EQ(sync.reductions_launched(), static_cast<int64_t>(launched));
  // A micro-batch that only accumulates reduces nothing.
  sync.begin_backward(false);
  for (int i = static_cast<int>(p.specs.size()) - 1; i >= 0; --i) sync.mark_final(i);
  sync.finish();
  EXPECT_EQ(dp.reduces.size(), launched);
  // Finishing with a parameter not final is a broken invariant.
  sync.begin_backward(true);
  EXPECT_THROW(sync.finish(), InternalError);
}

}  // namespace
}  // namespace mplan::exec
