// Strict reading of JSON for user-supplied documents (plans, presets, profiles).
// parse_json() refuses what no such document needs — more than kMaxJsonBytes, nesting deeper than
// kMaxJsonDepth, an object with more than kMaxJsonKeys keys, a key given twice, a number outside
// the double range — with the field path where it happened. JsonObject then reads one object:
// every error names the full field path ("parallel.tp: must be >= 1, got 0"); values outside
// their range are refused; keys never asked for are reported by finish() as unknown.
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

// Limits of parse_json(). Plans, presets and profiles are a few kilobytes, four levels deep and
// have at most a few dozen keys per object; these leave room for hand-written files many times
// larger while bounding the time and memory any input can take.
inline constexpr size_t kMaxJsonBytes = size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxJsonKeys = 1024;  // per object

// Parses `text`. Every error is an Error that starts with `what` (a file name or a flag) followed
// by ": ", then either "invalid JSON: ..." (syntax, with line and column) or the field path of
// the offending value: "parallel.tp: duplicate key", "model.num_layers: number out of range".
Json parse_json(const std::string& text, const std::string& what);

// An inclusive range for a number read by JsonObject.
struct IntRange {
  int64_t min = INT64_MIN;
  int64_t max = INT64_MAX;
};
struct NumberRange {
  double min = -1e300;
  double max = 1e300;
};

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

  // Numbers outside `range` are errors: "<field>: must be >= min, got x" or "... <= max ...".
  int64_t get_int(const std::string& key, IntRange range) const;
  int64_t get_int(const std::string& key, int64_t def, IntRange range) const;
  std::optional<int64_t> get_optional_int(const std::string& key, IntRange range) const;
  double get_number(const std::string& key, NumberRange range) const;
  double get_number(const std::string& key, double def, NumberRange range) const;
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

// Checks a number read outside JsonObject (an array element, a flag) against `range`; `name`
// names it in the message.
int64_t check_int_range(int64_t x, IntRange range, const std::string& name);
double check_number_range(double x, NumberRange range, const std::string& name);

// Short rendering of a JSON value for error messages (strings quoted and escaped, long values
// cut): always one line.
std::string json_excerpt(const Json& v);

}  // namespace mplan
