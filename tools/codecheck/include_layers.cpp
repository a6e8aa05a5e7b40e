// The layer table and the include reader. The order of src_layers() is the architecture: changing
// it is a design decision to record in docs/architecture.md, not a way to silence the check.
#include "tools/codecheck/include_layers.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mplan::codecheck {

const std::vector<std::string>& src_layers() {
  static const std::vector<std::string> layers = {"common",   "parallel", "model",  "batch",
                                                  "schedule", "plan",     "interop"};
  return layers;
}

namespace {

// "src/plan/x.hpp" -> "plan"; "" when `path` is not a file below a folder of src/.
std::string_view src_folder(std::string_view path) {
  if (path.rfind("src/", 0) != 0) return {};
  std::string_view rest = path.substr(4);
  size_t slash = rest.find('/');
  return slash == std::string_view::npos ? std::string_view{} : rest.substr(0, slash);
}

bool is_source_file(const std::filesystem::path& p) {
  static const char* kExtensions[] = {".hpp", ".cpp", ".h", ".cc", ".cu", ".cuh"};
  std::string ext = p.extension().string();
  return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                     [&](const char* e) { return ext == e; });
}

}  // namespace

int layer_of(std::string_view repo_path) {
  std::string_view folder = src_folder(repo_path);
  const auto& layers = src_layers();
  auto it = std::find(layers.begin(), layers.end(), folder);
  return it == layers.end() ? -1 : static_cast<int>(it - layers.begin());
}

std::vector<IncludeLine> quoted_includes(std::string_view text) {
  std::vector<IncludeLine> out;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    ++line_no;
    pos = end + 1;
    size_t k = line.find_first_not_of(" \t");
    if (k == std::string_view::npos || line[k] != '#') continue;
    k = line.find_first_not_of(" \t", k + 1);
    if (k == std::string_view::npos || line.substr(k, 7) != "include") continue;
    k = line.find_first_not_of(" \t", k + 7);
    if (k == std::string_view::npos || line[k] != '"') continue;
    size_t close = line.find('"', k + 1);
    if (close == std::string_view::npos) continue;
    out.push_back({line_no, std::string(line.substr(k + 1, close - k - 1))});
  }
  return out;
}

std::vector<LayerViolation> layer_violations(std::string_view file,
                                             const std::vector<IncludeLine>& includes) {
  std::vector<LayerViolation> out;
  const int own = layer_of(file);
  const std::string from(src_folder(file));
  if (own < 0) {
    out.push_back({std::string(file), 1, "",
                   "src/" + from +
                       "/ is in no layer: add it to src_layers() and to the diagram "
                       "in docs/architecture.md"});
    return out;
  }
  for (const IncludeLine& inc : includes) {
    const int target = layer_of(inc.target);
    std::string rule;
    if (inc.target.rfind("src/", 0) != 0) {
      rule = "src/ includes only src/ (quoted includes are rooted at the repository)";
    } else if (target < 0) {
      rule = "src/" + std::string(src_folder(inc.target)) + "/ is in no layer";
    } else if (target > own) {
      rule = "upward include: src/" + from + " (layer " + std::to_string(own) +
             ") may include only its own layer and those below it, not src/" +
             src_layers()[static_cast<size_t>(target)] + " (layer " + std::to_string(target) + ")";
    }
    if (!rule.empty()) out.push_back({std::string(file), inc.line, inc.target, rule});
  }
  return out;
}

std::vector<LayerViolation> check_src_layers(const std::filesystem::path& repo_root) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(repo_root / "src"))
    if (e.is_regular_file() && is_source_file(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<LayerViolation> out;
  for (const fs::path& p : files) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string rel = fs::relative(p, repo_root).generic_string();
    for (auto& v : layer_violations(rel, quoted_includes(ss.str()))) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace mplan::codecheck
