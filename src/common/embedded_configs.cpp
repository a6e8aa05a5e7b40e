// Preset lookup by name over the embedded configs/ tree, or file reading for paths.
#include "src/common/embedded_configs.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(cat(field, ": '", path, "' is a directory, not a file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(field, ": cannot read file '", path, "'"));
  return read_bounded(in, cat(field, ": '", path, "'"));
}

std::string read_bounded(std::istream& in, const std::string& what) {
  // Read at most one byte past the limit, so that /dev/zero or a pipe that never ends cannot
  // make a command run away.
  std::string text;
  char buf[65536];
  while (in && text.size() <= kMaxJsonBytes) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxJsonBytes)
    throw Error(cat(what, ": larger than ", kMaxJsonBytes >> 20,
                    " MiB; plans and presets are a few kilobytes"));
  if (in.bad()) throw Error(cat(what, ": read error"));
  return text;
}

std::string load_config_text(const std::string& kind, const std::string& ref,
                             const std::string& field) {
  if (is_file_reference(ref)) return read_text_file(ref, field);
  for (const auto& c : embedded_configs())
    if (kind == c.kind && ref == c.name) return c.text;
  std::string known;
  for (const auto& n : preset_names(kind)) known += (known.empty() ? "" : ", ") + n;
  throw Error(cat(field, ": unknown ",
                  kind == "models"     ? "model"
                  : kind == "clusters" ? "cluster"
                                       : "plan",
                  " preset '", ref, "' (known: ", known, "; or give a path to a .json file)"));
}

}  // namespace mplan
