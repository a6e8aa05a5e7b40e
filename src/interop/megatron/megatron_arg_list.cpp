// The argument list: occurrences indexed by name, typed reads with Megatron-LM's messages, and
// the reports of what was left unread or undefined.
#include "src/interop/megatron/megatron_arg_list.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "src/common/error.hpp"

namespace mplan {
namespace {

// Shortest text that reads back to the same double.
std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::vector<ArgOccurrence> split_arguments(const std::vector<ShellField>& words,
                                           std::vector<std::string>& warnings) {
  std::vector<ArgOccurrence> occ;
  for (const auto& w : words) {
    if (w.resolved() && w.text.rfind("--", 0) == 0) {
      size_t eq = w.text.find('=');
      if (eq != std::string::npos) {
        occ.push_back({w.text.substr(0, eq), {{w.text.substr(eq + 1), w.unknown}}});
      } else {
        occ.push_back({w.text, {}});
      }
    } else if (!occ.empty()) {
      occ.back().values.push_back(w);
    } else if (!w.resolved()) {
      warnings.push_back(cat("pretrain_gpt.py gets ", w.text, ", which depends on ",
                             join_unknown(w.unknown),
                             " with no value here: any arguments it holds are not read"));
    } else {
      throw Error(cat("pretrain_gpt.py: unexpected argument '", w.text,
                      "' (Megatron-LM takes only --options)"));
    }
  }
  return occ;
}

std::string join_unknown(const std::vector<std::string>& u) {
  std::string s;
  for (const auto& x : u) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string how_to_set(const std::vector<std::string>& unknown) {
  for (const auto& u : unknown)
    if (u.size() > 1 && u[0] == '$' &&
        (std::isalnum(static_cast<unsigned char>(u[1])) || u[1] == '_') &&
        u.find_first_of("({ ") == std::string::npos)
      return cat("give it with --var ", u.substr(1), "=VALUE");
  return "give the value in the script";
}

MegatronArgList::MegatronArgList(std::vector<ArgOccurrence> list,
                                 std::vector<std::string>& warnings)
    : list_(std::move(list)), warnings_(warnings) {
  for (size_t i = 0; i < list_.size(); ++i) {
    auto it = last_.find(list_[i].name);
    if (it != last_.end() && list_[it->second].values != list_[i].values)
      warnings_.push_back(cat(list_[i].name, " is given twice; the last value wins (",
                              text_of(list_[i].values), "), as in Megatron-LM's argparse"));
    last_[list_[i].name] = i;
  }
}

std::string MegatronArgList::text_of(const std::vector<ShellField>& v) {
  std::string s;
  for (const auto& f : v) s += (s.empty() ? "" : " ") + f.text;
  return s;
}

const ArgOccurrence* MegatronArgList::get(std::string_view name) {
  auto it = last_.find(name);
  if (it == last_.end()) return nullptr;
  used_.insert(std::string(name));
  return &list_[it->second];
}

bool MegatronArgList::flag(std::string_view name) {
  const ArgOccurrence* a = get(name);
  if (!a) return false;
  if (!a->values.empty())
    throw Error(cat(name, ": takes no value, got '", text_of(a->values), "'"));
  return true;
}

std::optional<std::string> MegatronArgList::value(std::string_view name, bool layout) {
  const ArgOccurrence* a = get(name);
  if (!a) return std::nullopt;
  if (a->values.size() != 1)
    throw Error(cat(name, ": takes one value, got ",
                    a->values.empty() ? std::string("none") : "'" + text_of(a->values) + "'"));
  const ShellField& f = a->values[0];
  if (f.resolved()) return f.text;
  if (layout)
    throw Error(cat(name, ": its value (", f.text, ") depends on ", join_unknown(f.unknown),
                    ", which has no value here; ", how_to_set(f.unknown)));
  warnings_.push_back(cat(name, ": its value (", f.text, ") depends on ", join_unknown(f.unknown),
                          ", which has no value here; the plan keeps its default"));
  return std::nullopt;
}

std::optional<int64_t> MegatronArgList::int_value(std::string_view name, int64_t min, bool layout) {
  auto v = value(name, layout);
  if (!v) return std::nullopt;
  const std::string& s = *v;
  int64_t x = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), x);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw Error(cat(name, ": must be an integer, got '", s, "'"));
  if (x < min) throw Error(cat(name, ": must be >= ", min, ", got ", x));
  return x;
}

std::optional<double> MegatronArgList::double_value(std::string_view name, double min,
                                                    bool layout) {
  auto v = value(name, layout);
  if (!v) return std::nullopt;
  const std::string& s = *v;
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x))
    throw Error(cat(name, ": must be a number, got '", s, "'"));
  if (x < min) throw Error(cat(name, ": must be >= ", num(min), ", got ", s));
  return x;
}

std::vector<MegatronArgList::Leftover> MegatronArgList::leftovers() const {
  std::vector<Leftover> out;
  std::set<std::string, std::less<>> seen;
  for (const auto& a : list_) {
    if (used_.count(a.name) || !seen.insert(a.name).second) continue;
    const ArgOccurrence& last = list_[last_.find(a.name)->second];
    std::string text = last.name;
    if (!last.values.empty()) {
      text += ' ';
      text += text_of(last.values);
    }
    out.push_back({a.name, std::move(text)});
  }
  return out;
}

std::vector<std::string> MegatronArgList::undefined_report() const {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> users;
  for (const auto& a : list_)
    for (const auto& v : a.values)
      for (const auto& u : v.unknown) {
        if (!users.count(u)) order.push_back(u);
        auto& l = users[u];
        if (std::find(l.begin(), l.end(), a.name) == l.end()) l.push_back(a.name);
      }
  auto rank = [](const std::string& u) -> int64_t {
    int64_t n = 0;
    for (size_t i = 1; i < u.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(u[i]))) return INT64_MAX;
      n = n * 10 + (u[i] - '0');
    }
    return u.size() > 1 ? n : INT64_MAX;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  std::vector<std::string> out;
  for (const auto& u : order) out.push_back(cat(u, " (no value here): ", join_unknown(users[u])));
  return out;
}

}  // namespace mplan
