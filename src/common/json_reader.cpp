// Strict JSON object reader: types are checked exactly (2.0 is not an integer, "2" is not a
// number), and unknown keys are errors. Messages always start with the full field path.
#include "src/common/json_reader.hpp"

#include <cmath>

#include "src/common/error.hpp"

namespace mplan {

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string msg = e.what();
    auto pos = msg.find("parse error");
    throw Error(cat(what, ": invalid JSON: ", pos == std::string::npos ? msg : msg.substr(pos)));
  }
}

std::string json_excerpt(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

JsonObject::JsonObject(const Json& j, std::string path) : j_(&j), path_(std::move(path)) {
  if (!j.is_object())
    throw Error(cat(path_.empty() ? std::string("document") : path_, ": must be a JSON object, got ",
                    json_excerpt(j)));
}

std::string JsonObject::field(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool JsonObject::has(const std::string& key) const {
  asked_.insert(key);
  auto it = j_->find(key);
  return it != j_->end() && !it->is_null();
}

const Json& JsonObject::at(const std::string& key) const {
  asked_.insert(key);
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) throw Error(cat(field(key), ": missing (required)"));
  return *it;
}

const Json& JsonObject::raw(const std::string& key) const { return at(key); }

void JsonObject::allow(const std::string& key) const { asked_.insert(key); }

namespace {
int64_t as_int(const Json& v, const std::string& name, int64_t min_value) {
  // Exact types: 2.0 is a number, not an integer (the file comment's contract).
  if (!v.is_number_integer()) throw Error(cat(name, ": must be an integer, got ", json_excerpt(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw Error(cat(name, ": integer out of range, got ", json_excerpt(v)));
  int64_t x = v.get<int64_t>();
  if (x < min_value) throw Error(cat(name, ": must be >= ", min_value, ", got ", x));
  return x;
}

double as_number(const Json& v, const std::string& name, double min_value) {
  if (!v.is_number()) throw Error(cat(name, ": must be a number, got ", json_excerpt(v)));
  double x = v.get<double>();
  if (!std::isfinite(x)) throw Error(cat(name, ": must be finite"));
  if (x < min_value) throw Error(cat(name, ": must be >= ", min_value, ", got ", x));
  return x;
}
}  // namespace

int64_t JsonObject::get_int(const std::string& key, int64_t min_value) const {
  return as_int(at(key), field(key), min_value);
}

int64_t JsonObject::get_int(const std::string& key, int64_t def, int64_t min_value) const {
  return has(key) ? as_int(at(key), field(key), min_value) : def;
}

std::optional<int64_t> JsonObject::get_optional_int(const std::string& key,
                                                    int64_t min_value) const {
  if (!has(key)) return std::nullopt;
  return as_int(at(key), field(key), min_value);
}

double JsonObject::get_number(const std::string& key, double min_value) const {
  return as_number(at(key), field(key), min_value);
}

double JsonObject::get_number(const std::string& key, double def, double min_value) const {
  return has(key) ? as_number(at(key), field(key), min_value) : def;
}

bool JsonObject::get_bool(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_boolean())
    throw Error(cat(field(key), ": must be true or false, got ", json_excerpt(v)));
  return v.get<bool>();
}

bool JsonObject::get_bool(const std::string& key, bool def) const {
  return has(key) ? get_bool(key) : def;
}

std::string JsonObject::get_string(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_string()) throw Error(cat(field(key), ": must be a string, got ", json_excerpt(v)));
  return v.get<std::string>();
}

std::string JsonObject::get_string(const std::string& key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

std::string JsonObject::get_enum(const std::string& key,
                                 std::initializer_list<const char*> allowed) const {
  std::string s = get_string(key);
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw Error(cat(field(key), ": must be one of ", list, "; got \"", s, "\""));
}

std::string JsonObject::get_enum(const std::string& key, std::initializer_list<const char*> allowed,
                                 const std::string& def) const {
  return has(key) ? get_enum(key, allowed) : def;
}

JsonObject JsonObject::get_object(const std::string& key) const {
  return JsonObject(at(key), field(key));
}

void JsonObject::finish() const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (asked_.count(it.key())) continue;
    std::string known;
    for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
    throw Error(cat(field(it.key()), ": unknown key (known keys here: ", known, ")"));
  }
}

}  // namespace mplan
