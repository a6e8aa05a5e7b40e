// Preset JSON files from configs/, compiled into the binary (see cmake/EmbedConfigs.cmake), and
// the lookup that finds a preset by kind and name. A name that contains '/' or ends in .json is
// read as a file path instead.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace mplan {

struct EmbeddedConfig {
  const char* kind;  // "models", "clusters" or "plans"
  const char* name;  // file name without .json, e.g. "gpt3-175b"
  const char* text;  // the JSON text
};

// All embedded presets, sorted by kind then name.
const std::vector<EmbeddedConfig>& embedded_configs();

// Names of the presets of one kind, sorted.
std::vector<std::string> preset_names(const std::string& kind);

// True when `ref` names a file (contains '/' or ends in ".json") rather than a preset.
bool is_file_reference(const std::string& ref);

// The JSON text of preset `name` of `kind`, or of the file `ref` names. Throws Error naming
// `field` and listing the known presets when there is no such preset or file.
std::string load_config_text(const std::string& kind, const std::string& ref,
                             const std::string& field);

// Reads a whole file of at most kMaxJsonBytes (json_reader.hpp); throws Error naming `field`
// when it cannot, when the path is a directory or when the file is larger.
std::string read_text_file(const std::string& path, const std::string& field);
// Reads `in` to its end, at most kMaxJsonBytes; `what` starts the error messages.
std::string read_bounded(std::istream& in, const std::string& what);

}  // namespace mplan
