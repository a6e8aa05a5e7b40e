// TrainingData: where a run's samples come from. With a data path: the train, valid and test
// TokenSources of Megatron-LM's GPT datasets (exec/data: --data-path, --split, indices from the
// seed, sized for train_iters as Megatron sizes them). Without: synthetic tokens for training and
// no evaluation (benchmarks). Invariant: sample i of a source depends only on the data, the seed
// and i, so every layout — each data-parallel rank reading only its own samples — sees the same
// batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/data/gpt_data_sources.hpp"
#include "exec/data/indexed_dataset.hpp"
#include "exec/data/token_source.hpp"
#include "src/plan/plan.hpp"

namespace mplan::exec {

struct TrainingData {
  std::shared_ptr<const TokenSource> train;
  std::shared_ptr<const TokenSource> valid, test;  // null: no evaluation of that split
  DataSplitSizes needed;                           // samples the run may read of each split
  std::string description;                         // for the run's header
  std::vector<std::string> notes;                  // index caches built or loaded
  bool synthetic() const { return valid == nullptr && test == nullptr && needed.valid == 0; }
};

// The tokenizer and the data against the model, before training: Error naming model.vocab_size
// when it is smaller than the tokens of training.vocab_file (read as JSON; Error naming
// --vocab-file when it cannot be), or naming --data-path and the file when a dataset holds a
// token id outside [0, vocab_size) (one pass over each .bin whose dtype could hold one).
void check_vocabulary(const Plan& plan, const std::vector<const IndexedDataset*>& datasets);

// The data of `plan` for a run of `train_iters` iterations (the plan's evaluation settings). With
// training.data_path: Megatron's datasets (the index cache beside the data is built when absent);
// Error naming --data-path, --split, --seed or the file when the data cannot serve the run (too
// small for one sample, fewer samples than the run reads, a seed numpy cannot take). Without: the
// synthetic tokens of training.seed.
TrainingData make_training_data(const Plan& plan, int64_t train_iters);

// The same on every rank of a job, building the index cache once: rank 0 first, then — when
// `all_ok(ok)` (a vote every rank joins, true when every rank passed ok = true) says rank 0
// succeeded — the others, which load what rank 0 cached. Throws rank 0's Error there, and a
// short Error elsewhere, when any rank failed.
TrainingData make_training_data_rank0_first(const Plan& plan, int64_t train_iters, int world_rank,
                                            const std::function<bool(bool)>& all_ok);

}  // namespace mplan::exec
