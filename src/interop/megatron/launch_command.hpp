// LaunchCommand: which command of a launch script runs the training, how many processes it
// starts (torchrun, python -m torch.distributed.run|launch, plain python), and the words it passes
// to pretrain_gpt.py; a script of bare argument lines is an argument list of unknown size.
// Invariant: a process count is known only when every value it depends on is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/interop/megatron/shell_script.hpp"

namespace mplan {

struct LaunchCommand {
  std::vector<ShellField> arguments;  // the words after the Python script, or the bare lines
  std::optional<int64_t> world;       // processes launched, when known
  std::string description;            // "--nproc_per_node 8 x --nnodes 1"
  int64_t nproc_per_node = 0;
  int64_t nnodes = 0;
};

// The training command of `script`: the last command running a pretrain*/train* Python file,
// else the last running any Python file, else the lines starting with "--". `gpus` > 0 (the
// plan's size is given) tolerates a process count that depends on an unknown; torchrun's
// --nproc_per_node gpu|auto reads as `gpus_per_node`. Throws Error when there is no such command
// or it runs another Megatron-LM program (pretrain_bert.py, ...).
LaunchCommand find_launch_command(const ShellScript& script, int64_t gpus, int64_t gpus_per_node,
                                  std::vector<std::string>& warnings);

}  // namespace mplan
