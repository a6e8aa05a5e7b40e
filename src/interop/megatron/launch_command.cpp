// Finding the training command and torchrun's process layout. torchrun's defaults: one process
// per node, one node; an elastic --nnodes MIN:MAX reads as MAX.
#include "src/interop/megatron/launch_command.hpp"

#include <algorithm>
#include <charconv>

#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_arg_list.hpp"

namespace mplan {
namespace {

std::string basename_of(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A whole decimal integer >= 1, or nullopt.
std::optional<int64_t> positive_int(const std::string& text) {
  int64_t x = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), x);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || x < 1) return std::nullopt;
  return x;
}

// Where torchrun's own options start in `words` (before the script at `script_at`), or npos.
size_t launcher_options_start(const std::vector<ShellField>& words, size_t script_at) {
  size_t start = std::string::npos;
  for (size_t i = 0; i < script_at; ++i) {
    const std::string& w = words[i].text;
    if (basename_of(w) == "torchrun") start = i + 1;
    if (w == "-m" && i + 1 < script_at &&
        (words[i + 1].text == "torch.distributed.run" ||
         words[i + 1].text == "torch.distributed.launch"))
      start = i + 2;
  }
  return start;
}

struct LayoutRead {
  int64_t nproc = 1, nnodes = 1;  // torchrun's defaults
  bool known = true;
};

// One of --nproc_per_node / --nproc-per-node / --nnodes with its value text.
void read_layout_option(const std::string& name, const std::string& val, int64_t gpus_per_node,
                        LayoutRead& l, std::vector<std::string>& warnings) {
  if (name != "--nnodes") {
    if (val == "gpu" || val == "auto") {
      l.nproc = gpus_per_node;
      warnings.push_back(
          cat(name, " ", val, ": read as the cluster's ", l.nproc, " GPUs per node"));
      return;
    }
    auto x = positive_int(val);
    if (!x) throw Error(cat(name, ": must be an integer >= 1, got '", val, "'"));
    l.nproc = *x;
    return;
  }
  std::string v = val;
  size_t colon = v.find(':');
  if (colon != std::string::npos) {
    warnings.push_back(cat("--nnodes ", v, ": an elastic range; read as its maximum"));
    v = v.substr(colon + 1);
  }
  auto x = positive_int(v);
  if (!x) throw Error(cat("--nnodes: must be an integer >= 1, got '", val, "'"));
  l.nnodes = *x;
}

// torchrun's (or python -m torch.distributed.run/launch's) process count, from the words before
// the script at `script_at`.
void read_launcher(const std::vector<ShellField>& words, size_t script_at, int64_t gpus,
                   int64_t gpus_per_node, LaunchCommand& l, std::vector<std::string>& warnings) {
  size_t start = launcher_options_start(words, script_at);
  if (start == std::string::npos) {
    std::string prog = basename_of(words[0].text);
    if (prog.rfind("python", 0) == 0) {
      l.world = 1;
      l.nproc_per_node = l.nnodes = 1;
      l.description = "plain " + prog + " (one process)";
    } else {
      warnings.push_back(cat("the script launches ", words[script_at].text, " with ", words[0].text,
                             ": its process count is not known here"));
    }
    return;
  }
  LayoutRead layout;
  for (size_t i = start; i < script_at; ++i) {
    const std::string& w = words[i].text;
    std::string name = w, val;
    const ShellField* vf = nullptr;
    size_t eq = w.find('=');
    if (w.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = w.substr(0, eq);
      val = w.substr(eq + 1);
      vf = &words[i];
    } else if (i + 1 < script_at) {
      vf = &words[i + 1];
      val = vf->text;
    }
    if (name != "--nproc_per_node" && name != "--nproc-per-node" && name != "--nnodes") continue;
    if (!vf) throw Error(cat(name, ": missing its value"));
    if (eq == std::string::npos) ++i;
    if (vf->resolved()) {
      read_layout_option(name, val, gpus_per_node, layout, warnings);
    } else if (gpus > 0) {
      layout.known = false;
    } else {
      throw Error(cat(name, ": its value (", vf->text, ") depends on ", join_unknown(vf->unknown),
                      ", which has no value here; ", how_to_set(vf->unknown),
                      ", or size the plan with --gpus N"));
    }
  }
  if (!layout.known) return;
  l.world = layout.nproc * layout.nnodes;
  l.nproc_per_node = layout.nproc;
  l.nnodes = layout.nnodes;
  l.description = cat("--nproc_per_node ", layout.nproc, " x --nnodes ", layout.nnodes);
}

}  // namespace

LaunchCommand find_launch_command(const ShellScript& sh, int64_t gpus, int64_t gpus_per_node,
                                  std::vector<std::string>& warnings) {
  // The training program: the last command running a pretrain*/train* Python file, else the
  // last command running any Python file.
  const ShellCommand* launch = nullptr;
  size_t script_at = 0;
  int candidates = 0;
  bool launch_is_training = false;
  for (const auto& c : sh.commands) {
    auto py = std::find_if(c.words.begin(), c.words.end(), [](const ShellField& w) {
      return w.resolved() && ends_with(w.text, ".py");
    });
    if (py == c.words.end()) continue;
    bool training = basename_of(py->text).find("train") != std::string::npos;
    ++candidates;
    if (training || !launch_is_training) {
      launch = &c;
      script_at = static_cast<size_t>(py - c.words.begin());
      launch_is_training = training;
    }
  }
  LaunchCommand l;
  if (!launch) {
    for (const auto& c : sh.commands)
      if (!c.words.empty() && c.words[0].text.rfind("--", 0) == 0)
        l.arguments.insert(l.arguments.end(), c.words.begin(), c.words.end());
    if (l.arguments.empty())
      throw Error(
          "no Megatron-LM launch command (torchrun ... pretrain_gpt.py ...) and no "
          "argument list (--num-layers ...) found");
    return l;
  }
  if (candidates > 1)
    warnings.push_back(cat("the script runs ", candidates,
                           " Python programs; reading the one on line ", launch->line, " (",
                           launch->words[script_at].text, ")"));
  std::string base = basename_of(launch->words[script_at].text);
  if (base.rfind("pretrain_", 0) == 0 && base != "pretrain_gpt.py")
    throw Error(cat(base, ": mplan imports GPT decoder jobs (pretrain_gpt.py) only"));
  if (base != "pretrain_gpt.py")
    warnings.push_back(cat("the script runs ", base, ", read as Megatron-LM's pretrain_gpt.py"));
  read_launcher(launch->words, script_at, gpus, gpus_per_node, l, warnings);
  l.arguments.assign(launch->words.begin() + static_cast<long>(script_at) + 1, launch->words.end());
  return l;
}

}  // namespace mplan
