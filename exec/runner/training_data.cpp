// TrainingData: synthetic tokens, or Megatron's GPT datasets sized for the run.
#include "exec/runner/training_data.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "exec/data/synthetic_token_source.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

namespace {

// The number of tokens in a GPT-2 vocabulary JSON (token -> id), as Megatron-LM's
// GPT2BPETokenizer counts it (len(encoder)).
int64_t vocab_file_tokens(const std::string& path) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_text_file(path, "--vocab-file"));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(cat("--vocab-file: ", path, " is not valid JSON (", e.what(), ")"));
  }
  if (!vocab.is_object() || vocab.empty())
    throw Error(cat("--vocab-file: ", path, " is not a vocabulary (a JSON object of token -> id)"));
  return static_cast<int64_t>(vocab.size());
}

}  // namespace

void check_vocabulary(const Plan& plan, const std::vector<const IndexedDataset*>& datasets) {
  const int64_t vocab = plan.model.vocab_size;
  const TrainingConfig& t = plan.training;
  if (!t.vocab_file.empty()) {
    const int64_t tokens = vocab_file_tokens(t.vocab_file);
    if (vocab < tokens)
      throw Error(cat("model.vocab_size: ", vocab, " is smaller than the ", tokens,
                      " tokens of --vocab-file ", t.vocab_file,
                      "; it must hold every id the tokenizer gives (set it to at least ", tokens,
                      ")"));
  }
  for (const IndexedDataset* d : datasets) {
    // Ids of an unsigned dtype narrower than the vocabulary cannot leave it: no pass needed.
    if ((d->dtype() == TokenDtype::kUint8 && vocab >= 256) ||
        (d->dtype() == TokenDtype::kUint16 && vocab >= 65536))
      continue;
    const auto [lo, hi] = d->token_id_range();
    if (lo < 0)
      throw Error(cat("--data-path: ", d->prefix(), ".bin holds the token id ", lo,
                      "; token ids must be in [0, model.vocab_size = ", vocab, ")"));
    if (hi >= vocab)
      throw Error(cat("--data-path: ", d->prefix(), ".bin holds token ids up to ", hi,
                      ", but model.vocab_size is ", vocab, ": every id must be < vocab_size (",
                      "the data was made with a larger vocabulary; set it to at least ", hi + 1,
                      ")"));
  }
}

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
  std::vector<const IndexedDataset*> indexed;
  for (const auto& ds : s.datasets)
    if (std::find(indexed.begin(), indexed.end(), &ds->indexed()) == indexed.end())
      indexed.push_back(&ds->indexed());
  check_vocabulary(plan, indexed);
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
