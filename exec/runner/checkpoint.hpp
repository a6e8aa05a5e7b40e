// Checkpoints in Megatron-LM's directory layout, layout-independent and crash-safe.
//   DIR/latest_checkpointed_iteration.txt   the current checkpoint's iteration (Megatron's marker)
//   DIR/iter_0000100/model.safetensors      every parameter at full size by Megatron's name, in the
//                                           activation dtype (PyTorch's safetensors reads it)
//   DIR/iter_0000100/optimizer.safetensors  f32 master weights and Adam's moments: "master.NAME",
//                                           "exp_avg.NAME", "exp_avg_sq.NAME"
//   DIR/iter_0000100/checkpoint.json        iteration, consumed train/valid samples, optimizer
//                                           steps, seed (the only RNG state: data and init are
//                                           counter-based), learning-rate schedule, model, the
//                                           layout it was saved under, file sizes and checksums
// Full tensors (tensor-parallel shards joined by exec/model/param_layout's full_index, pipeline
// stages merged, distributed-optimizer shards gathered) make a checkpoint loadable under any
// (tp, pp, dp, vpp, distributed optimizer or not): each rank reads only its own elements. QKV
// weights are [Q heads; K heads; V heads] (the executor's order, not Megatron's per-group one).
// Saving is collective over the "world" group: every state is summed into rank 0's full tensor
// (non-owners add -0.0, so the sum is exact) and rank 0 writes it, one tensor at a time, into
// DIR/iter_N.tmp; only when every file is on the disk is the directory renamed and the marker
// replaced (written aside, then renamed), so a kill at any moment leaves the previous checkpoint
// current and loadable. A failed save (a full disk) removes its temporary directory and throws
// CheckpointSaveError on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "exec/data/lr_schedule.hpp"
#include "exec/runner/trainer.hpp"
#include "src/plan/plan.hpp"

namespace mplan::exec {

inline constexpr const char* kLatestCheckpointFile = "latest_checkpointed_iteration.txt";
inline constexpr int kCheckpointSchemaVersion = 1;

// Megatron's directory name of an iteration: iter_0000100.
std::string checkpoint_iteration_dir(int64_t iteration);

// What a checkpoint holds besides the tensors.
struct CheckpointState {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t optimizer_steps = 0;  // Adam's step count (bias correction)
  uint64_t seed = 0;
  int64_t train_iters = 0;
  std::optional<LrSchedule> lr_schedule;  // none: the constant lr below
  double constant_lr = 0;
};

// A checked checkpoint that --load found.
struct CheckpointInfo {
  std::string root;  // --load DIR
  std::string dir;   // DIR/iter_NNNNNNN
  CheckpointState state;
  DType weights_dtype = DType::kBF16;
  std::string saved_layout;        // "tp 2, pp 2, dp 1" (messages)
  std::vector<std::string> notes;  // e.g. vocabulary padding that differs from this layout's
};

// --load DIR. nullopt when DIR is absent, empty, or holds only unfinished saves (nothing to load;
// `mplan run` starts fresh only where DIR is also --save); `ignored` (may be null) then counts
// the unfinished saves. Otherwise the checkpoint the marker names, checked against `plan`'s
// model: Error naming --load and the file when the marker or its directory is missing, partial,
// corrupt (sizes, headers, checksums) or holds another model.
// The file checksums are verified when `verify_checksums` (one rank reading everything is enough).
std::optional<CheckpointInfo> find_checkpoint(const std::string& dir, const Plan& plan,
                                              bool verify_checksums = true, int* ignored = nullptr);

// The iteration the marker of DIR names, or nullopt (no marker). Error when it is unreadable.
std::optional<int64_t> latest_checkpoint_iteration(const std::string& dir);

class CheckpointSaveError : public std::runtime_error {
 public:
  explicit CheckpointSaveError(const std::string& what) : std::runtime_error(what) {}
};

// Test hooks: called on rank 0 at "written" (every file on the disk, before the rename) and
// "renamed" (before the marker is replaced); an exception thrown there stands for a kill.
struct SaveHooks {
  std::function<void(const std::string& stage)> at;
};

struct SaveResult {
  std::string dir;    // DIR/iter_NNNNNNN
  int64_t bytes = 0;  // written (rank 0)
};

// Saves `trainer`'s weights, master weights, Adam's moments and `state` under DIR (created when
// absent). Collective over world.group("world"); every rank returns, or every rank throws
// CheckpointSaveError (the message, rank 0's, names the file).
SaveResult save_checkpoint(const std::string& dir, Trainer& trainer, CommWorld& world,
                           const CheckpointState& state, const SaveHooks& hooks = {});

// Loads a found checkpoint into `trainer` (each rank its own shards of every state) and restores
// its iteration, consumed samples and optimizer steps.
void load_checkpoint(const CheckpointInfo& info, Trainer& trainer);

}  // namespace mplan::exec
