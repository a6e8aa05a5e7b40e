// TrainingData: synthetic tokens, or Megatron's GPT datasets sized for the run.
#include "exec/runner/training_data.hpp"

#include <limits>

#include "exec/data/synthetic_token_source.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

TrainingData make_training_data(const Plan& plan, int64_t train_iters) {
  const TrainingConfig& t = plan.training;
  const int64_t G = plan.parallel.global_batch_size;
  MPLAN_CHECK(train_iters >= 1, "train_iters ", train_iters);
  TrainingData d;
  if (t.data_path.empty()) {
    d.train = std::make_shared<const SyntheticTokenSource>(
        static_cast<uint64_t>(t.seed), plan.model.vocab_size, plan.model.seq_length);
    d.needed.train = train_iters * G;
    d.description = cat("synthetic tokens (seed ", t.seed, "; no evaluation)");
    return d;
  }
  if (t.seed < 0 || t.seed > std::numeric_limits<uint32_t>::max())
    throw Error(
        cat("--seed: must be in [0, 2^32) with --data-path (numpy's RandomState, which "
            "orders Megatron's samples, takes 32-bit seeds), got ",
            t.seed));
  GptDatasetConfig c;
  c.seq_length = plan.model.seq_length;
  c.seed = static_cast<uint32_t>(t.seed);
  c.split = t.split;
  const bool evaluate = t.eval_iters > 0;
  d.needed = megatron_split_sizes(train_iters, G, t.eval_interval, evaluate ? t.eval_iters : 0);
  const GptDataSources s = build_gpt_data_sources(t.data_path, d.needed, c);
  if (!s.train)
    throw Error(cat("--split: \"", t.split, "\" gives the training set no share of the data"));
  d.train = s.train;
  if (evaluate) {
    d.valid = s.valid;
    d.test = s.test;
    if (!d.valid && t.eval_interval > 0)
      throw Error(cat("--split: \"", t.split,
                      "\" leaves the validation set empty while evaluation is asked for "
                      "(--eval-interval ",
                      t.eval_interval, ", --eval-iters ", t.eval_iters,
                      "); give it a share or set --eval-iters 0"));
  }
  std::string words;
  for (const std::string& w : data_path_words(t.data_path))
    words += cat(words.empty() ? "" : " ", w);
  d.description = cat(words, " (--split ", t.split, ")");
  for (auto [name, source, need] : {std::tuple{"train", d.train, d.needed.train},
                                    {"valid", d.valid, d.needed.valid},
                                    {"test", d.test, d.needed.test}}) {
    if (!source) continue;
    if (source->size() < need)
      throw Error(cat("--data-path: the ", name, " split has ", source->size(),
                      " samples but the run reads ", need, " (train_iters ", train_iters,
                      ", global batch ", G, "); give more data or weights to the blend"));
    d.description += cat(", ", name, " ", source->size(), " samples");
  }
  for (const auto& ds : s.datasets) {
    const IndexCacheStatus st = ds->cache_status();
    if (st == IndexCacheStatus::kNotCached) continue;
    d.notes.push_back(cat(st == IndexCacheStatus::kBuilt ? "built" : "loaded", " the ",
                          to_string(ds->split()), " indices of ", ds->cache_prefix(), "*"));
  }
  return d;
}

TrainingData make_training_data_rank0_first(const Plan& plan, int64_t train_iters, int world_rank,
                                            const std::function<bool(bool)>& all_ok) {
  TrainingData d;
  std::string error;
  if (world_rank == 0) {
    try {
      d = make_training_data(plan, train_iters);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (!all_ok(error.empty())) {
    if (world_rank == 0) throw Error(error);
    throw Error("the training data could not be prepared (rank 0 says why)");
  }
  if (world_rank != 0) {
    try {
      d = make_training_data(plan, train_iters);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (!all_ok(error.empty())) {
    if (!error.empty()) throw Error(error);
    throw Error("the training data could not be prepared on another rank");
  }
  return d;
}

}  // namespace mplan::exec
