// Checkpoints on one CPU rank (the layouts of several ranks are in training_loop_test, label
// mpi): 2K iterations equal K, saved, then resumed for K more, bit for bit (losses, learning
// rates, evaluations, and the weights, master weights and Adam moments written at the end); a
// kill between writing and making current (a hook that throws, at each step of the commit)
// leaves the previous checkpoint current and loadable; a disk that fills (RLIMIT_FSIZE) fails
// the save on every rank with a one-line error and no damaged checkpoint; --load refuses partial,
// corrupt and foreign checkpoints, naming the file, and starts fresh only from an absent or empty
// directory; the weights file is safetensors by Megatron's names at full size.
#include "exec/runner/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>

#include "exec/data/safetensors_file.hpp"
#include "tests/exec/runner/loop_test_util.hpp"
#include "tests/exec/support/self_comm.hpp"

namespace mplan::exec {
namespace {

namespace fs = std::filesystem;
using testing::data_plan;
using testing::Layout;
using testing::loop_options;
using testing::run_loop;

struct Fixture {
  test::TempDir dir;
  std::string prefix = dir / "corpus";
  Fixture() { testing::write_corpus(prefix); }
};

TEST(Checkpoint, SaveAndResumeAreBitwiseTheContinuousRun) {
  Fixture f;
  for (DType act : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(to_string(act));
    const Plan p = data_plan(Layout{.act = act}, f.prefix, 8);
    const TrainingData data = make_training_data(p, 8);
    CpuBackend be;
    testing::SelfCommWorld self(be);
    const std::string whole = f.dir / cat("whole_", to_string(act));
    const std::string parts = f.dir / cat("parts_", to_string(act));
    LoopOptions o = loop_options(p, -1, act);
    o.save = whole;
    o.save_interval = 4;
    const testing::LoopRun ref = run_loop(p, be, self, o, data);
    ASSERT_EQ(ref.losses.size(), 8u);
    // The first half, saved at 4; then a new trainer resumes from it.
    o.save = parts;
    o.max_iterations = 4;
    const testing::LoopRun first = run_loop(p, be, self, o, data);
    o.max_iterations = -1;
    o.load = find_checkpoint(parts, p);
    ASSERT_TRUE(o.load.has_value());
    EXPECT_EQ(o.load->state.iteration, 4);
    EXPECT_EQ(o.load->state.consumed_train_samples, 4 * p.parallel.global_batch_size);
    EXPECT_EQ(o.load->state.optimizer_steps, 4);
    EXPECT_EQ(o.load->state.consumed_valid_samples, 2 * p.parallel.global_batch_size);
    const testing::LoopRun second = run_loop(p, be, self, o, data);
    std::vector<double> losses = first.losses, lrs = first.lrs;
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    lrs.insert(lrs.end(), second.lrs.begin(), second.lrs.end());
    EXPECT_EQ(losses, ref.losses);
    EXPECT_EQ(lrs, ref.lrs);
    EXPECT_EQ(second.weights, ref.weights);
    ASSERT_EQ(first.evals.size() + second.evals.size(), ref.evals.size());
    for (size_t i = 0; i < second.evals.size(); ++i) {
      const EvalRecord& a = second.evals[i];
      const EvalRecord& b = ref.evals[first.evals.size() + i];
      EXPECT_EQ(a.loss, b.loss) << b.prefix;
      EXPECT_EQ(a.first_sample, b.first_sample) << b.prefix;
    }
    // The weights, master weights and Adam's moments at the end: the same bytes.
    for (const char* file : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_TRUE(test::slurp(whole + "/iter_0000008/" + file) ==
                  test::slurp(parts + "/iter_0000008/" + file))
          << file;
    // Training did something: the loss fell.
    EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.3);
  }
}

TEST(Checkpoint, AKillBeforeTheCheckpointIsCurrentLeavesThePreviousOne) {
  Fixture f;
  const Plan p = data_plan(Layout{}, f.prefix, 8);
  const TrainingData data = make_training_data(p, 8);
  CpuBackend be;
  testing::SelfCommWorld self(be);
  LoopOptions o = loop_options(p);
  o.save_interval = 4;
  o.save = f.dir / "reference";
  const testing::LoopRun ref = run_loop(p, be, self, o, data);
  for (const char* stage : {"written", "renamed"}) {
    SCOPED_TRACE(stage);
    const std::string dir = f.dir / cat("killed_", stage);
    o.save = dir;
    o.save_hooks.at = [&](const std::string& at) {
      if (at == stage && latest_checkpoint_iteration(dir) == 4) throw std::runtime_error("killed");
    };
    EXPECT_THROW(run_loop(p, be, self, o, data), std::runtime_error);
    o.save_hooks = {};
    // What the kill left: the finished save of iteration 8 never became current.
    EXPECT_EQ(latest_checkpoint_iteration(dir), 4);
    EXPECT_EQ(fs::exists(dir + "/iter_0000008.tmp"), std::string(stage) == "written");
    EXPECT_EQ(fs::exists(dir + "/iter_0000008"), std::string(stage) == "renamed");
    // The previous checkpoint loads, and training from it gives the uninterrupted run.
    o.load = find_checkpoint(dir, p);
    ASSERT_TRUE(o.load.has_value());
    EXPECT_EQ(o.load->state.iteration, 4);
    const testing::LoopRun resumed = run_loop(p, be, self, o, data);
    EXPECT_EQ(resumed.losses, std::vector<double>(ref.losses.begin() + 4, ref.losses.end()));
    EXPECT_EQ(resumed.weights, ref.weights);
    // The new save replaced what the kill left.
    EXPECT_EQ(latest_checkpoint_iteration(dir), 8);
    EXPECT_FALSE(fs::exists(dir + "/iter_0000008.tmp"));
    o.load.reset();
  }
}

TEST(Checkpoint, AFullDiskFailsTheSaveAndDamagesNothing) {
  Fixture f;
  const Plan p = data_plan(Layout{}, f.prefix, 8);
  const TrainingData data = make_training_data(p, 8);
  CpuBackend be;
  testing::SelfCommWorld self(be);
  const std::string dir = f.dir / "ckpt";
  LoopOptions o = loop_options(p, 4);
  o.save = dir;
  o.save_interval = 4;
  run_loop(p, be, self, o, data);
  ASSERT_EQ(latest_checkpoint_iteration(dir), 4);
  const std::string before = test::slurp(dir + "/iter_0000004/optimizer.safetensors");
  // Files may not grow past 64 KiB now (writes fail with EFBIG instead of a signal).
  o.max_iterations = -1;
  o.load = find_checkpoint(dir, p);
  TrainingLoop loop(p, data, be, self, o);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    loop.run();
  } catch (const CheckpointSaveError& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find(dir + "/iter_0000008.tmp/"), std::string::npos) << error;
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_EQ(latest_checkpoint_iteration(dir), 4);
  EXPECT_FALSE(fs::exists(dir + "/iter_0000008.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/iter_0000008"));
  EXPECT_TRUE(test::slurp(dir + "/iter_0000004/optimizer.safetensors") == before);
  EXPECT_TRUE(find_checkpoint(dir, p).has_value());
}

TEST(Checkpoint, LoadRefusesPartialCorruptAndForeignCheckpoints) {
  Fixture f;
  const Plan p = data_plan(Layout{}, f.prefix, 8);
  const TrainingData data = make_training_data(p, 8);
  CpuBackend be;
  testing::SelfCommWorld self(be);
  const std::string good = f.dir / "good";
  LoopOptions o = loop_options(p, 2);
  o.save = good;
  o.save_interval = 2;
  run_loop(p, be, self, o, data);
  ASSERT_TRUE(find_checkpoint(good, p).has_value());
  // A damaged copy of it, for each case.
  int n = 0;
  auto damaged = [&](const std::function<void(const std::string&)>& damage) {
    const std::string d = f.dir / cat("bad", n++);
    fs::copy(good, d, fs::copy_options::recursive);
    damage(d + "/iter_0000002");
    return test::error_of([&] { find_checkpoint(d, p); });
  };
  std::string e = damaged([](const std::string& it) {
    fs::resize_file(it + "/model.safetensors", fs::file_size(it + "/model.safetensors") - 100);
  });
  EXPECT_NE(e.find("model.safetensors has "), std::string::npos) << e;
  EXPECT_NE(e.find("a partial or damaged checkpoint"), std::string::npos) << e;
  e = damaged([](const std::string& it) { fs::remove(it + "/optimizer.safetensors"); });
  EXPECT_NE(e.find("optimizer.safetensors is missing (a partial checkpoint)"), std::string::npos)
      << e;
  e = damaged([](const std::string& it) {
    std::string bytes = test::slurp(it + "/optimizer.safetensors");
    bytes[bytes.size() - 5] ^= 0x10;  // one bit of Adam's state
    test::write_file(it + "/optimizer.safetensors", bytes);
  });
  EXPECT_NE(e.find("optimizer.safetensors does not match its checksum"), std::string::npos) << e;
  e = damaged([](const std::string& it) { test::write_file(it + "/checkpoint.json", "{\"a\""); });
  EXPECT_NE(e.find("checkpoint.json is not valid JSON"), std::string::npos) << e;
  e = damaged([](const std::string& it) { fs::remove(it + "/checkpoint.json"); });
  EXPECT_NE(e.find("not a checkpoint mplan wrote"), std::string::npos) << e;
  e = damaged([](const std::string& it) { fs::remove_all(it); });
  EXPECT_NE(e.find("names iteration 2 but"), std::string::npos) << e;
  e = damaged([](const std::string& it) {
    test::write_file(it + "/../latest_checkpointed_iteration.txt", "release\n");
  });
  EXPECT_NE(e.find("holds \"release\", not an iteration number"), std::string::npos) << e;
  // Another model: the plan's has 4 layers, the checkpoint's 8.
  Plan other = p;
  other.model.num_layers = 4;
  e = test::error_of([&] { find_checkpoint(good, other); });
  EXPECT_NE(e.find("--load: " + good + "/iter_0000002 holds another model: num_layers 8"),
            std::string::npos)
      << e;
  other = p;
  other.model.num_attention_heads = 8;  // the same shapes, another model
  e = test::error_of([&] { find_checkpoint(good, other); });
  EXPECT_NE(e.find("holds another model: num_attention_heads 4"), std::string::npos) << e;
  // A directory that is not a checkpoint directory.
  const std::string stray = f.dir / "stray";
  fs::create_directories(stray + "/notes");
  e = test::error_of([&] { find_checkpoint(stray, p); });
  EXPECT_NE(e.find("has no latest_checkpointed_iteration.txt but is not empty (notes)"),
            std::string::npos)
      << e;
  // Fresh starts: an absent or empty directory, or one with only unfinished saves.
  EXPECT_FALSE(find_checkpoint(f.dir / "absent", p).has_value());
  fs::create_directories(f.dir / "empty");
  EXPECT_FALSE(find_checkpoint(f.dir / "empty", p).has_value());
  fs::create_directories(f.dir / "unfinished/iter_0000004.tmp");
  int ignored = 0;
  EXPECT_FALSE(find_checkpoint(f.dir / "unfinished", p, true, &ignored).has_value());
  EXPECT_EQ(ignored, 1);
}

TEST(Checkpoint, WeightsAreSafetensorsByMegatronNameAtFullSize) {
  Fixture f;
  const Plan p = data_plan(Layout{.act = DType::kBF16}, f.prefix, 8);
  CpuBackend be;
  testing::SelfCommWorld self(be);
  LoopOptions o = loop_options(p, 1, DType::kBF16);
  o.save = f.dir / "ckpt";
  o.save_interval = 1;
  run_loop(p, be, self, o, make_training_data(p, 8));
  const SafetensorsContents c = read_safetensors(f.dir / "ckpt/iter_0000001/model.safetensors");
  EXPECT_EQ(c.metadata.at("format"), "pt");
  const int64_t h = p.model.hidden_size;
  const auto& wte = c.tensors.at("embedding.word_embeddings.weight");
  EXPECT_EQ(wte.dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(wte.shape, (std::vector<int64_t>{256, h}));
  EXPECT_EQ(c.tensors.at("decoder.layers.7.self_attention.linear_qkv.weight").shape,
            (std::vector<int64_t>{3 * h, h}));
  EXPECT_EQ(c.tensors.at("decoder.final_layernorm.weight").shape, (std::vector<int64_t>{h}));
  EXPECT_EQ(c.tensors.count("output_layer.weight"), 0u);  // tied: the word embedding
  const SafetensorsContents opt =
      read_safetensors(f.dir / "ckpt/iter_0000001/optimizer.safetensors");
  EXPECT_EQ(opt.tensors.size(), 3 * c.tensors.size());
  EXPECT_EQ(opt.tensors.at("exp_avg_sq.embedding.word_embeddings.weight").dtype,
            SafetensorsDtype::kF32);
}

}  // namespace
}  // namespace mplan::exec
