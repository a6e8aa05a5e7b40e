// Helpers of the training-loop tests: a tiny corpus a GPT learns quickly (each document walks
// t -> (7t + 3) mod 255 from a random start, so the next token is a function of the last one),
// written as a Megatron .bin/.idx pair; the tiny GPT of support/invariance.hpp reading it; and a
// loop run with its losses, learning rates and evaluations.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/data/indexed_dataset_writer.hpp"
#include "exec/runner/training_loop.hpp"
#include "tests/exec/data/data_test_util.hpp"
#include "tests/exec/support/invariance.hpp"

namespace mplan::exec::testing {

// PREFIX.bin / PREFIX.idx: `documents` documents of 20..120 tokens below 256.
inline void write_corpus(const std::string& prefix, int documents = 200) {
  std::mt19937 rng(7);
  IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
  std::vector<int32_t> doc;
  for (int d = 0; d < documents; ++d) {
    doc.clear();
    const int n = 20 + static_cast<int>(rng() % 101);
    int32_t t = static_cast<int32_t>(rng() % 255);
    for (int i = 0; i < n; ++i) {
      doc.push_back(t);
      t = (t * 7 + 3) % 255;
    }
    doc.push_back(255);  // end of document
    w.add_document(doc);
  }
  w.finalize();
}

// The tiny GPT of layout `l` training on PREFIX: split 8/1/1, evaluation every 4 iterations of 2
// batches, a cosine schedule over `train_iters` with 2 warm-up iterations (activations in l.act:
// see loop_options).
inline Plan data_plan(Layout l, const std::string& prefix, int64_t train_iters = 8) {
  Plan p = tiny_plan(l);
  TrainingConfig& t = p.training;
  t.data_path = parse_data_path({prefix}, "test");
  t.split = "8,1,1";
  t.train_iters = train_iters;
  t.lr = 3e-3;
  t.min_lr = 3e-4;
  t.lr_decay_style = LrDecayStyle::kCosine;
  t.lr_warmup_iters = 2;
  t.eval_interval = 4;
  t.eval_iters = 2;
  t.log_interval = 1000;
  require_valid(p);
  return p;
}

inline LoopOptions loop_options(const Plan& p, int64_t max_iterations = -1,
                                DType act = DType::kF32) {
  LoopOptions o;
  o.train_iters = p.training.train_iters;
  o.max_iterations = max_iterations;
  o.log_interval = p.training.log_interval;
  o.lr_schedule = LrSchedule::from_training(p.training, p.parallel.global_batch_size);
  o.trainer.act = act;
  o.trainer.seed = static_cast<uint64_t>(p.training.seed);
  o.trainer.bucket_elems = kInvarianceBucketElems;
  return o;
}

struct LoopRun {
  std::vector<double> losses, lrs, norms;
  std::vector<EvalRecord> evals;
  std::vector<std::string> saved;
  std::map<std::string, std::vector<float>> weights;  // this rank's shard after the run
};

inline LoopRun run_loop(const Plan& p, Backend& be, CommWorld& world, LoopOptions o,
                        const TrainingData& data) {
  TrainingLoop loop(p, data, be, world, std::move(o));
  const TrainingResult r = loop.run();
  LoopRun out;
  for (const IterationRecord& i : r.iterations) {
    out.losses.push_back(i.loss);
    out.lrs.push_back(i.lr);
    out.norms.push_back(i.grad_norm);
  }
  out.evals = r.evaluations;
  out.saved = r.saved;
  StageModel& m = loop.trainer().model();
  for (size_t i = 0; i < m.params().specs.size(); ++i)
    out.weights[m.params().specs[i].name] = read(be, m.weight(static_cast<int>(i)));
  return out;
}

}  // namespace mplan::exec::testing
