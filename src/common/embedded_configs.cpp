// Preset lookup by name over the embedded configs/ tree, or file reading for paths.
#include "src/common/embedded_configs.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "src/common/error.hpp"

namespace mplan {

std::vector<std::string> preset_names(const std::string& kind) {
  std::vector<std::string> names;
  for (const auto& c : embedded_configs())
    if (kind == c.kind) names.emplace_back(c.name);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_file_reference(const std::string& ref) {
  return ref.find('/') != std::string::npos ||
         (ref.size() > 5 && ref.compare(ref.size() - 5, 5, ".json") == 0);
}

std::string read_text_file(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(field, ": cannot read file '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string load_config_text(const std::string& kind, const std::string& ref,
                             const std::string& field) {
  if (is_file_reference(ref)) return read_text_file(ref, field);
  for (const auto& c : embedded_configs())
    if (kind == c.kind && ref == c.name) return c.text;
  std::string known;
  for (const auto& n : preset_names(kind)) known += (known.empty() ? "" : ", ") + n;
  throw Error(cat(field, ": unknown ", kind == "models" ? "model" : kind == "clusters" ? "cluster" : "plan",
                  " preset '", ref, "' (known: ", known, "; or give a path to a .json file)"));
}

}  // namespace mplan
