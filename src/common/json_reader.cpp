// Strict JSON reading. parse_json() builds the document through nlohmann's SAX interface so that
// it can refuse, with the field path, what the DOM parser accepts silently (a key given twice, a
// number beyond the double range, nesting that would exhaust the stack of any recursive reader).
// JsonObject checks types exactly (2.0 is not an integer, "2" is not a number), ranges, and
// unknown keys. Messages always start with the full field path.
#include "src/common/json_reader.hpp"

#include <cctype>
#include <cmath>
#include <unordered_set>

#include "src/common/error.hpp"

namespace mplan {

namespace {

// A key as it appears in a field path: plain when it is a short identifier, else quoted and
// escaped (a key may hold anything, a message is one line).
std::string key_text(const std::string& k) {
  bool plain = !k.empty() && k.size() <= 40;
  for (char c : k)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  return plain ? k : json_excerpt(Json(k));
}

// Builds a Json value from SAX events, keeping the path of the value being read for messages.
class StrictBuilder {
 public:
  StrictBuilder(Json& root, const std::string& what) : root_(root), what_(what) {}

  bool null() { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(Json(v)) != nullptr; }
  bool number_integer(int64_t v) { return put(Json(v)) != nullptr; }
  bool number_unsigned(uint64_t v) { return put(Json(v)) != nullptr; }
  bool number_float(double v, const std::string&) { return put(Json(v)) != nullptr; }
  bool string(std::string& v) { return put(Json(std::move(v))) != nullptr; }
  bool binary(Json::binary_t&) { fail("binary values are not JSON"); }
  bool start_object(size_t) { return open(Json::object(), true); }
  bool start_array(size_t) { return open(Json::array(), false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) fail("duplicate key (each key may appear once in an object)");
    if (f.keys.size() > kMaxJsonKeys) fail(cat("more than ", kMaxJsonKeys, " keys in one object"));
    return true;
  }

  bool parse_error(size_t, const std::string& token, const nlohmann::detail::exception& ex) {
    // 406: a number the lexer read as infinite ("1e999"); the value sits at the current path.
    if (ex.id == 406) fail(cat("number out of range (", token, ")"));
    std::string msg = ex.what();
    const auto pos = msg.find("parse error");
    throw Error(cat(what_.empty() ? "" : what_ + ": ",
                    "invalid JSON: ", pos == std::string::npos ? msg : msg.substr(pos)));
  }

 private:
  struct Frame {
    Json* value = nullptr;
    bool object = false;
    std::string key;   // objects: the key of the value being read
    size_t index = 0;  // arrays: the index of the value being read
    std::unordered_set<std::string> keys;
  };

  // The field path of the value being read: "parallel.tp", "cluster.gpu.gemm_efficiency[3]".
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.object) {
        if (!p.empty()) p += '.';
        p += key_text(f.key);
      } else {
        p += cat("[", f.index, "]");
      }
    }
    return p;
  }

  [[noreturn]] void fail(const std::string& msg) const {
    const std::string p = path();
    throw Error(cat(what_.empty() ? "" : what_ + ": ", p.empty() ? "" : p + ": ", msg));
  }

  Json* put(Json v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.object) {
      Json& slot = (*f.value)[f.key];
      slot = std::move(v);
      return &slot;
    }
    f.value->push_back(std::move(v));
    ++f.index;
    return &f.value->back();
  }

  bool open(Json empty, bool object) {
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth))
      fail(cat("nested deeper than ", kMaxJsonDepth, " levels"));
    Json* v = put(std::move(empty));
    // put() advanced an array's index past the new element: point it back while inside.
    if (!frames_.empty() && !frames_.back().object) --frames_.back().index;
    frames_.push_back(Frame{v, object, {}, 0, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }

  Json& root_;
  const std::string& what_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json(const std::string& text, const std::string& what) {
  if (text.size() > kMaxJsonBytes)
    throw Error(cat(what.empty() ? "" : what + ": ", "larger than ", kMaxJsonBytes >> 20, " MiB (",
                    text.size(), " bytes); plans and presets are a few kilobytes"));
  Json root;
  StrictBuilder builder(root, what);
  Json::sax_parse(text, &builder);  // every failure throws from the builder
  return root;
}

std::string json_excerpt(const Json& v) {
  // Values come from parse_json (nesting bounded), so dump() cannot recurse far; invalid UTF-8
  // (a flag's text) is replaced rather than thrown.
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

int64_t check_int_range(int64_t x, IntRange range, const std::string& name) {
  if (x < range.min) throw Error(cat(name, ": must be >= ", range.min, ", got ", x));
  if (x > range.max) throw Error(cat(name, ": must be <= ", range.max, ", got ", x));
  return x;
}

double check_number_range(double x, NumberRange range, const std::string& name) {
  if (!std::isfinite(x)) throw Error(cat(name, ": must be finite, got ", x));
  if (x < range.min) throw Error(cat(name, ": must be >= ", range.min, ", got ", x));
  if (x > range.max) throw Error(cat(name, ": must be <= ", range.max, ", got ", x));
  return x;
}

JsonObject::JsonObject(const Json& j, std::string path) : j_(&j), path_(std::move(path)) {
  if (!j.is_object())
    throw Error(cat(path_.empty() ? std::string("document") : path_,
                    ": must be a JSON object, got ", json_excerpt(j)));
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
int64_t as_int(const Json& v, const std::string& name, IntRange range) {
  // Exact types: 2.0 is a number, not an integer (the file comment's contract).
  if (!v.is_number_integer()) throw Error(cat(name, ": must be an integer, got ", json_excerpt(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw Error(cat(name, ": integer out of range, got ", json_excerpt(v)));
  return check_int_range(v.get<int64_t>(), range, name);
}

double as_number(const Json& v, const std::string& name, NumberRange range) {
  if (!v.is_number()) throw Error(cat(name, ": must be a number, got ", json_excerpt(v)));
  return check_number_range(v.get<double>(), range, name);
}
}  // namespace

int64_t JsonObject::get_int(const std::string& key, IntRange range) const {
  return as_int(at(key), field(key), range);
}

int64_t JsonObject::get_int(const std::string& key, int64_t def, IntRange range) const {
  return has(key) ? as_int(at(key), field(key), range) : def;
}

std::optional<int64_t> JsonObject::get_optional_int(const std::string& key, IntRange range) const {
  if (!has(key)) return std::nullopt;
  return as_int(at(key), field(key), range);
}

double JsonObject::get_number(const std::string& key, NumberRange range) const {
  return as_number(at(key), field(key), range);
}

double JsonObject::get_number(const std::string& key, double def, NumberRange range) const {
  return has(key) ? as_number(at(key), field(key), range) : def;
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
  throw Error(cat(field(key), ": must be one of ", list, "; got ", json_excerpt(Json(s))));
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
    throw Error(cat(field(key_text(it.key())), ": unknown key (known keys here: ", known, ")"));
  }
}

}  // namespace mplan
