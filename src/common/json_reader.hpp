// Strict reading of a JSON object for user-supplied documents (plans, presets, profiles).
// Every error is an mplan::Error naming the full field path ("parallel.tp: must be an integer
// >= 1, got 0"). Keys never asked for are reported by finish() as unknown, listing the known ones.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mplan {

using Json = nlohmann::ordered_json;

// Parses `text`; a syntax error becomes an Error naming `what` (a file name or field).
Json parse_json(const std::string& text, const std::string& what);

class JsonObject {
 public:
  // `path` is the field path of this object ("" at the top, "parallel", "model.moe").
  JsonObject(const Json& j, std::string path);

  // The path of `key` inside this object, e.g. "parallel.tp".
  std::string field(const std::string& key) const;
  const std::string& path() const { return path_; }
  // Present and not null.
  bool has(const std::string& key) const;
  const Json& raw(const std::string& key) const;  // requires has(key)

  int64_t get_int(const std::string& key, int64_t min_value = INT64_MIN) const;
  int64_t get_int(const std::string& key, int64_t def, int64_t min_value) const;
  std::optional<int64_t> get_optional_int(const std::string& key, int64_t min_value) const;
  double get_number(const std::string& key, double min_value = -1e300) const;
  double get_number(const std::string& key, double def, double min_value) const;
  bool get_bool(const std::string& key) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  // A string that must be one of `allowed`.
  std::string get_enum(const std::string& key, std::initializer_list<const char*> allowed) const;
  std::string get_enum(const std::string& key, std::initializer_list<const char*> allowed,
                       const std::string& def) const;
  JsonObject get_object(const std::string& key) const;
  // Marks `key` as known without reading it (documentation fields such as "sources").
  void allow(const std::string& key) const;
  // Throws an Error for the first key that no getter asked for.
  void finish() const;

 private:
  const Json* j_;
  std::string path_;
  mutable std::set<std::string> asked_;
  const Json& at(const std::string& key) const;  // marks asked; throws "missing"
};

// Short rendering of a JSON value for error messages (strings quoted, long values cut).
std::string json_excerpt(const Json& v);

}  // namespace mplan
