// The layers of src/ and the check that keeps them one way: a file under src/<layer>/ may include
// only files of its own layer and of the layers listed before it (src_layers()); nothing under
// src/ includes sim/, exec/, cli/ or any other part of the repository. Invariant: an include
// that points up the list, a quoted include outside src/, or a folder of src/ that is in no
// layer is reported with its file and line.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mplan::codecheck {

// The folders of src/, lowest first: common, parallel, model, batch, schedule, plan, interop.
const std::vector<std::string>& src_layers();

// The layer index of a repository path "src/<folder>/...", or -1 when it is not under src/ or
// its folder is in no layer.
int layer_of(std::string_view repo_path);

// A quoted #include of a file: what it names and where.
struct IncludeLine {
  int line = 0;        // 1-based
  std::string target;  // as written: "src/plan/plan.hpp"
};

// The quoted includes of a source text (#include "..."; <...> system headers are left out).
std::vector<IncludeLine> quoted_includes(std::string_view text);

struct LayerViolation {
  std::string file;  // repository path of the including file
  int line = 0;
  std::string target;
  std::string rule;  // why it is refused, one line
  bool operator==(const LayerViolation&) const = default;
};

// The includes of the file at repository path `file` (under src/) that break the layering.
std::vector<LayerViolation> layer_violations(std::string_view file,
                                             const std::vector<IncludeLine>& includes);

// Every violation in the .hpp/.cpp/.h/.cc/.cu/.cuh files under `repo_root`/src, in path order.
std::vector<LayerViolation> check_src_layers(const std::filesystem::path& repo_root);

}  // namespace mplan::codecheck
