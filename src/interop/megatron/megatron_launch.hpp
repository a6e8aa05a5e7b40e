// MegatronLaunch: a Megatron-LM job as mplan export writes it — torchrun's process layout, the
// environment, pretrain_gpt.py's arguments in named groups, the notes on what the arguments
// cannot express — and its three renderings: a bash script in the style of Megatron-LM's
// examples, a plain argument list, JSON. Invariant: rendering adds nothing to the arguments;
// the script's `# mplan: KEY=VALUE` lines are the only comments mplan import reads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/common/json_reader.hpp"

namespace mplan {

// One argument with its values as given on the command line ({"--num-layers", {"96"}}).
struct MegatronArg {
  std::string name;
  std::vector<std::string> values;  // empty for a flag such as --bf16
  bool operator==(const MegatronArg&) const = default;
};

// A bash array of arguments in the rendered script, named as in Megatron-LM's examples.
struct MegatronArgGroup {
  std::string name;  // "GPT_MODEL_ARGS", "MOE_ARGS", "TRAINING_ARGS", ...
  std::vector<MegatronArg> args;
};

// A Megatron-LM job: torchrun's process layout, the environment and pretrain_gpt.py's arguments.
struct MegatronLaunch {
  int64_t nproc_per_node = 1;
  int64_t nnodes = 1;
  std::string script = "pretrain_gpt.py";
  std::vector<std::pair<std::string, std::string>> env;  // exported before the launch
  std::vector<MegatronArgGroup> groups;
  std::vector<std::string> notes;  // plan fields the arguments cannot express exactly
  // What mplan import needs beyond the arguments to give the plan back (the cluster; a
  // --train-iters that export chose itself), rendered as "# mplan: KEY=VALUE" lines.
  std::vector<std::pair<std::string, std::string>> directives;
};

// A "# mplan: KEY=VALUE" line of a launch script (1-based line number).
struct MplanDirective {
  int line = 0;
  std::string key;
  std::string value;
};
// The directives of a script, in order: lines whose first non-blank characters are "# mplan:".
// A line of that form without KEY=VALUE has an empty key.
std::vector<MplanDirective> read_mplan_directives(const std::string& text);

// pretrain_gpt.py's arguments, flat, in group order.
std::vector<std::string> megatron_argv(const MegatronLaunch& launch);
// A bash script in the style of Megatron-LM's examples: variables, one array per group, and
// `torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py "${GPT_MODEL_ARGS[@]}" ...` with `\` lines.
// `title` becomes the first comment line; the directives follow the notes.
std::string render_megatron_torchrun(const MegatronLaunch& launch, const std::string& title);
// The arguments only, one per line with its values, shell-quoted where needed (no directives).
std::string render_megatron_args(const MegatronLaunch& launch);
Json megatron_launch_to_json(const MegatronLaunch& launch);
// Quotes a word for bash when it holds anything but [A-Za-z0-9_./:=,+@%-].
std::string shell_quote(const std::string& word);

}  // namespace mplan
