// The depth scanner: declarations at namespace and class scope are skimmed for function bodies;
// a body is read statement by statement (if / for / while / switch / do / try, labels, local
// classes, expressions with their lambdas), counting the blocks each statement is nested in.
#include "tools/codecheck/nesting_depth.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <utility>

#include "tools/codecheck/cpp_tokens.hpp"

namespace mplan::codecheck {
namespace {

bool is_macro_name(const std::string& s) {
  return s.size() > 1 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isupper(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '_';
         });
}

class DepthScanner {
 public:
  explicit DepthScanner(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::vector<FunctionDepth> run() {
    size_t i = 0;
    while (i < t_.size()) {
      i = scope(i, "");
      if (i < t_.size()) ++i;  // a '}' without its '{' (seen through a dropped #if branch)
    }
    std::stable_sort(out_.begin(), out_.end(), [](const FunctionDepth& a, const FunctionDepth& b) {
      return a.line < b.line;
    });
    return std::move(out_);
  }

 private:
  const std::vector<Token> t_;
  std::vector<FunctionDepth> out_;
  int max_depth_ = 0;  // of the function being read
  int deepest_line_ = 0;

  bool p(size_t i, std::string_view s) const {
    return i < t_.size() && t_[i].kind == TokenKind::kPunct && t_[i].text == s;
  }
  bool kw(size_t i, std::string_view s) const {
    return i < t_.size() && t_[i].kind == TokenKind::kIdentifier && t_[i].text == s;
  }
  bool ident(size_t i) const { return i < t_.size() && t_[i].kind == TokenKind::kIdentifier; }
  int line(size_t i) const { return t_[std::min(i, t_.size() - 1)].line; }

  void note(int depth, int at_line) {
    if (depth > max_depth_) {
      max_depth_ = depth;
      deepest_line_ = at_line;
    }
  }

  // Index after the bracket matching the opener at i, skipping what is between.
  size_t skip_balanced(size_t i) const {
    int level = 0;
    for (; i < t_.size(); ++i) {
      if (p(i, "(") || p(i, "[") || p(i, "{")) ++level;
      if ((p(i, ")") || p(i, "]") || p(i, "}")) && --level == 0) return i + 1;
    }
    return i;
  }

  // ---- namespace and class scope ---------------------------------------------------------------

  // Declarations from i to the '}' closing the scope (returned, not consumed) or the end.
  size_t scope(size_t i, const std::string& prefix) {
    size_t decl = i;  // first token of the current declaration
    while (i < t_.size() && !p(i, "}")) {
      if (p(i, ";")) {
        decl = ++i;
      } else if ((kw(i, "public") || kw(i, "private") || kw(i, "protected")) && p(i + 1, ":")) {
        decl = i += 2;
      } else if (p(i, "(") || p(i, "[")) {
        i = skip_balanced(i);
      } else if (!p(i, "{")) {
        ++i;
      } else {
        i = scope_brace(decl, i, prefix);
      }
    }
    return i;
  }

  // A '{' at scope level: a namespace or class body, a function body, or an initializer (which
  // leaves the declaration going on: a constructor's `a_{x}` before its body). Moves `decl` past
  // a body; returns the index after the '}'.
  size_t scope_brace(size_t& decl, size_t i, const std::string& prefix) {
    std::string type_name;
    int kind = opens_type(decl, i, type_name);
    if (kind != 0) {
      size_t end = scope(i + 1, kind == 2 ? prefix + type_name + "::" : prefix);
      decl = end + 1;
      return std::min(end + 1, t_.size());
    }
    if (!is_function_body(decl, i)) return skip_balanced(i);
    FunctionDepth f;
    f.name = prefix + function_name(decl, i);
    f.line = t_[i].line;
    const auto saved = std::make_pair(max_depth_, deepest_line_);
    max_depth_ = 0;
    deepest_line_ = f.line;
    size_t end = block(i + 1, 0);
    f.last_line = line(end == 0 ? 0 : end - 1);
    f.depth = max_depth_;
    f.deepest_line = deepest_line_;
    std::tie(max_depth_, deepest_line_) = saved;
    out_.push_back(std::move(f));
    decl = end;
    return end;
  }

  // Index after a leading `template < ... >` of the declaration at `decl`.
  size_t after_template(size_t decl, size_t end) const {
    if (!kw(decl, "template") || !p(decl + 1, "<")) return decl;
    int level = 0;
    for (size_t k = decl + 1; k < end; ++k) {
      if (p(k, "<")) ++level;
      if (p(k, ">")) --level;
      if (p(k, ">>")) level -= 2;
      if (level <= 0) return k + 1;
    }
    return end;
  }

  // 1: namespace, enum or extern "C" body; 2: class, struct or union body (name set); 0: neither.
  int opens_type(size_t decl, size_t brace, std::string& name) const {
    for (size_t k = after_template(decl, brace); k < brace; ++k) {
      if (p(k, "(") || p(k, "=")) return 0;
      if (kw(k, "namespace") || kw(k, "enum")) return 1;
      if (kw(k, "extern") && k + 1 < brace && t_[k + 1].kind == TokenKind::kLiteral) return 1;
      if (kw(k, "class") || kw(k, "struct") || kw(k, "union")) {
        for (size_t n = k + 1; n < brace; ++n) {
          if (p(n, "[")) n = skip_balanced(n) - 1;
          if (ident(n) && !kw(n, "final") && !kw(n, "alignas")) {
            name = t_[n].text;
            break;
          }
        }
        if (name.empty()) name = "(anonymous)";
        return 2;
      }
    }
    return 0;
  }

  bool is_function_body(size_t decl, size_t brace) const {
    if (brace == decl) return false;
    bool paren = false, colon_after_paren = false, arrow_after_paren = false;
    for (size_t k = decl; k < brace; ++k) {
      if (kw(k, "operator")) {  // its name may hold '=' ("operator==", "operator=")
        k += p(k + 1, "(") ? 2 : 1;
        while (k < brace && !p(k, "(")) ++k;
        --k;
        continue;
      }
      if (p(k, "=") && !paren) return false;  // an initializer
      if (p(k, ")")) paren = true;
      if (paren && p(k, ":")) colon_after_paren = true;
      if (paren && p(k, "->")) arrow_after_paren = true;
    }
    if (!paren) return false;
    const size_t prev = brace - 1;
    if (p(prev, ")") || arrow_after_paren) return true;
    for (const char* q : {"const", "noexcept", "override", "final", "mutable", "volatile"})
      if (kw(prev, q)) return true;
    if (p(prev, "&") || p(prev, "&&")) return true;
    return p(prev, "}") && colon_after_paren;  // a constructor with a brace member initializer
  }

  std::string function_name(size_t decl, size_t brace) const {
    size_t start = after_template(decl, brace);
    for (size_t k = start; k < brace; ++k) {
      if (kw(k, "operator")) {
        std::string name = "operator";
        size_t n = k + 1;
        if (p(n, "(") && p(n + 1, ")")) return qualified(k, "operator()");
        for (; n < brace && !p(n, "("); ++n) name += t_[n].text;
        return qualified(k, name);
      }
      if (!p(k, "(") || k == start) continue;
      size_t name_at = k - 1;
      if (p(name_at, ">")) name_at = template_name(start, name_at);  // f<float>(
      if (!ident(name_at)) continue;
      const std::string& w = t_[name_at].text;
      if (w == "__launch_bounds__" || w == "__attribute__" || w == "alignas" || w == "decltype" ||
          w == "__declspec") {
        k = skip_balanced(k) - 1;
        continue;
      }
      if (!is_macro_name(w)) return qualified(name_at, w);
      std::string name = w + "(";
      size_t end = skip_balanced(k) - 1;
      for (size_t n = k + 1; n < end; ++n) name += t_[n].text + (p(n, ",") ? " " : "");
      return name + ")";
    }
    return "(unnamed)";
  }

  // The token before the '<' matching the '>' at `close` (the name of a template-id), or
  // `close` itself when there is none after `start`.
  size_t template_name(size_t start, size_t close) const {
    int level = 0;
    for (size_t k = close; k > start; --k) {
      if (p(k, ">")) ++level;
      if (p(k, ">>")) level += 2;
      if (p(k, "<") && --level == 0) return k - 1;
    }
    return close;
  }

  // `name` (whose first token is at k) with the `X::` and `~` before it.
  std::string qualified(size_t k, std::string name) const {
    if (k > 0 && p(k - 1, "~")) {
      name = "~" + name;
      --k;
    }
    while (k >= 2 && p(k - 1, "::") && ident(k - 2)) {
      name = t_[k - 2].text + "::" + name;
      k -= 2;
    }
    return name;
  }

  // ---- function bodies -------------------------------------------------------------------------

  // Statements after a '{' (at i) up to its '}'; `depth` is the nesting of this block.
  size_t block(size_t i, int depth) {
    note(depth, line(i == 0 ? 0 : i - 1));
    while (i < t_.size() && !p(i, "}")) i = statement(i, depth);
    return std::min(i + 1, t_.size());
  }

  // The statement an if / for / while / else / do / try controls, one block deeper.
  size_t controlled(size_t i, int depth) {
    if (p(i, "{")) return block(i + 1, depth);
    if (i < t_.size()) note(depth, t_[i].line);
    return statement(i, depth);
  }

  size_t statement(size_t i, int depth) {
    if (i >= t_.size()) return i;
    if (p(i, "{")) return block(i + 1, depth + 1);
    if (p(i, ";")) return i + 1;
    if (ident(i)) {
      const std::string& w = t_[i].text;
      if (w == "if" || w == "for" || w == "while" || w == "switch") return control(i, depth);
      if (w == "else") return controlled(i + 1, depth + 1);
      if (w == "do") return do_while(i, depth);
      if (w == "try") return try_catch(i, depth);
      if (w == "case" || (w == "default" && p(i + 1, ":"))) return label(i, depth);
      if (p(i + 1, ":")) return i + 2;  // a goto label
      if (w == "struct" || w == "class" || w == "union" || w == "enum") {
        size_t k = i;
        while (k < t_.size() && !p(k, "{") && !p(k, ";") && !p(k, "(") && !p(k, "=")) ++k;
        if (p(k, "{")) {
          size_t decl = i;
          k = scope_brace(decl, k, "");
          return expression(k, depth);
        }
      }
    }
    size_t k = expression(i, depth);
    return k == i ? i + 1 : k;
  }

  size_t control(size_t i, int depth) {
    const bool is_if = kw(i, "if");
    size_t k = i + 1;
    if (kw(k, "constexpr")) ++k;
    if (p(k, "(")) k = group(k, depth);
    k = controlled(k, depth + 1);
    if (!is_if || !kw(k, "else")) return k;
    ++k;
    if (kw(k, "if")) return statement(k, depth);  // else if: the same depth as its if
    return controlled(k, depth + 1);
  }

  size_t do_while(size_t i, int depth) {
    size_t k = controlled(i + 1, depth + 1);
    if (kw(k, "while")) ++k;
    if (p(k, "(")) k = group(k, depth);
    return p(k, ";") ? k + 1 : k;
  }

  size_t try_catch(size_t i, int depth) {
    size_t k = controlled(i + 1, depth + 1);
    while (kw(k, "catch")) {
      ++k;
      if (p(k, "(")) k = group(k, depth);
      k = controlled(k, depth + 1);
    }
    return k;
  }

  // `case X:` or `default:`; a { } right after the label is the case's body, not a deeper block.
  size_t label(size_t i, int depth) {
    size_t k = i + 1;
    while (k < t_.size() && !p(k, ":") && !p(k, ";") && !p(k, "{")) ++k;
    if (!p(k, ":")) return k;
    ++k;
    return p(k, "{") ? block(k + 1, depth) : k;
  }

  // An expression or declaration statement up to its ';' (or the '}' ending the block).
  size_t expression(size_t i, int depth) {
    while (i < t_.size()) {
      if (p(i, ";")) return i + 1;
      if (p(i, "}") || p(i, ")") || p(i, "]")) return i;
      if (p(i, "(") || p(i, "[") || p(i, "{")) {
        i = p(i, "{") && lambda_body(i) ? block(i + 1, depth + 1) : group(i, depth);
      } else {
        ++i;
      }
    }
    return i;
  }

  // A bracketed group starting at i (parentheses, brackets, an initializer list), read for the
  // lambdas inside it; returns the index after its closing bracket.
  size_t group(size_t i, int depth) {
    ++i;
    while (i < t_.size()) {
      if (p(i, ")") || p(i, "]") || p(i, "}")) return i + 1;
      if (p(i, "(") || p(i, "[") || p(i, "{")) {
        i = p(i, "{") && lambda_body(i) ? block(i + 1, depth + 1) : group(i, depth);
      } else {
        ++i;
      }
    }
    return i;
  }

  // True when the '{' at i opens a lambda body: after `)`, `]`, a specifier, or a trailing
  // return type `) -> T`.
  bool lambda_body(size_t i) const {
    if (i == 0) return false;
    const size_t prev = i - 1;
    if (p(prev, ")") || p(prev, "]")) return true;
    if (kw(prev, "mutable") || kw(prev, "noexcept") || kw(prev, "constexpr")) return true;
    for (size_t k = prev; k > 0; --k) {
      if (p(k, "->")) return p(k - 1, ")");
      const bool type_token = ident(k) || p(k, "::") || p(k, "<") || p(k, ">") || p(k, ">>") ||
                              p(k, ",") || p(k, "*") || p(k, "&");
      if (!type_token) return false;
    }
    return false;
  }
};

bool is_source_file(const std::filesystem::path& p) {
  static const char* kExtensions[] = {".hpp", ".cpp", ".h", ".cc", ".cu", ".cuh"};
  std::string ext = p.extension().string();
  return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                     [&](const char* e) { return ext == e; });
}

}  // namespace

std::vector<FunctionDepth> function_depths(std::string_view text) {
  return DepthScanner(tokenize(text)).run();
}

std::vector<DeepFunction> deep_functions(const std::filesystem::path& repo_root,
                                         const std::vector<std::string>& dirs, int max_depth) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const std::string& d : dirs) {
    if (!fs::exists(repo_root / d)) continue;
    for (const auto& e : fs::recursive_directory_iterator(repo_root / d))
      if (e.is_regular_file() && is_source_file(e.path())) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<DeepFunction> out;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string rel = fs::relative(f, repo_root).generic_string();
    for (FunctionDepth& fd : function_depths(ss.str()))
      if (fd.depth > max_depth) out.push_back({rel, std::move(fd)});
  }
  return out;
}

}  // namespace mplan::codecheck
