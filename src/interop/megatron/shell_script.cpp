// The bash subset launch scripts use, in three steps: a lexer (quotes, expansions, arrays,
// comments, continuations, redirections, here-documents) -> a parser (lists, &&/||, pipelines,
// if/elif/else, loops, case and functions, the last three only skipped) -> an evaluator that
// expands words the way bash does (unquoted expansions split on whitespace, "${ARR[@]}" one word
// per element) and records the commands. Tests and conditions are three-valued: true, false, or
// unknown when they depend on a value the script does not define; unknown branches are skipped.
#include "src/interop/megatron/shell_script.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <set>

#include "src/common/error.hpp"

namespace mplan {
namespace {

// How deep compound commands, ${...} inside ${...}, test and arithmetic parentheses may nest
// (launch scripts nest a few levels): every recursion of the reader over the script's nesting
// counts its levels, so that no script exhausts the stack.
constexpr int kMaxNesting = 64;

// How much text all substitutions of a script may produce together: launch scripts produce a few
// kilobytes; a value that doubles itself on every line would exhaust memory.
constexpr size_t kMaxExpandedBytes = size_t{64} << 20;

// One level of such a recursion, for the scope of the call; past kMaxNesting an Error names the
// line and what is nested.
class Nesting {
 public:
  Nesting(int& depth, int line, const char* what) : depth_(depth) {
    if (depth_ >= kMaxNesting)
      throw Error(cat("line ", line, ": ", what, " nested deeper than ", kMaxNesting, " levels"));
    ++depth_;
  }
  ~Nesting() { --depth_; }
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;

 private:
  int& depth_;
};

// ---------------------------------------------------------------------------------------------
// Lexer

enum class PartKind { kLiteral, kParam, kArith, kCommand };

struct Part {
  PartKind kind = PartKind::kLiteral;
  bool quoted = false;
  std::string text;  // literal text, or the inside of ${...} / $((...)) / $(...)
};

struct Word {
  std::vector<Part> parts;
  int line = 0;
  // The word as plain text when it is one unquoted literal (keywords, assignment names).
  std::optional<std::string> plain() const {
    if (parts.size() == 1 && parts[0].kind == PartKind::kLiteral && !parts[0].quoted)
      return parts[0].text;
    return std::nullopt;
  }
};

enum class TokKind { kWord, kArray, kOp };

struct Token {
  TokKind kind = TokKind::kWord;
  int line = 0;
  Word word;                   // kWord
  std::string op;              // kOp: "\n" ";" ";;" "&&" "||" "|" "&" "(" ")"
  std::string name;            // kArray: NAME of NAME=( ... )
  bool append = false;         // kArray: NAME+=( ... )
  std::vector<Word> elements;  // kArray
};

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_valid_name(const std::string& s) {
  if (s.empty() || !is_name_start(s[0])) return false;
  return std::all_of(s.begin(), s.end(), is_name_char);
}
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool is_meta(char c) {
  return is_blank(c) || c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' ||
         c == '<' || c == '>';
}

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (is_blank(c)) {
        ++i_;
      } else if (c == '\\' && peek(1) == '\n') {
        i_ += 2;
        ++line_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '\n') {
        out.push_back(op_token("\n"));
        ++i_;
        ++line_;
        skip_heredocs();
      } else if (c == ';') {
        out.push_back(op_token(peek(1) == ';' ? ";;" : ";"));
        i_ += out.back().op.size();
      } else if (c == '&' && peek(1) == '>') {
        read_redirect();
      } else if (c == '&') {
        out.push_back(op_token(peek(1) == '&' ? "&&" : "&"));
        i_ += out.back().op.size();
      } else if (c == '|') {
        out.push_back(op_token(peek(1) == '|' ? "||" : "|"));
        i_ += (peek(1) == '|' || peek(1) == '&') ? 2 : 1;
      } else if (c == '(' || c == ')') {
        out.push_back(op_token(std::string(1, c)));
        ++i_;
      } else if (c == '<' || c == '>') {
        read_redirect();
      } else {
        Token t;
        if (read_word_or_array(t)) out.push_back(std::move(t));
      }
    }
    return out;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
  std::vector<std::pair<std::string, bool>> heredocs_;  // delimiter, strip leading tabs

  char peek(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  Token op_token(const std::string& op) const {
    Token t;
    t.kind = TokKind::kOp;
    t.line = line_;
    t.op = op;
    return t;
  }
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(cat("line ", line, ": ", what));
  }

  static void add_literal(Word& w, const std::string& text, bool quoted) {
    if (!w.parts.empty() && w.parts.back().kind == PartKind::kLiteral &&
        w.parts.back().quoted == quoted) {
      w.parts.back().text += text;
    } else {
      w.parts.push_back({PartKind::kLiteral, quoted, text});
    }
  }

  // Skips here-document bodies announced on the line just ended.
  void skip_heredocs() {
    for (const auto& [delim, strip_tabs] : heredocs_) {
      int start = line_;
      bool found = false;
      while (i_ < s_.size()) {
        size_t end = s_.find('\n', i_);
        std::string ln = s_.substr(i_, end == std::string::npos ? std::string::npos : end - i_);
        i_ = end == std::string::npos ? s_.size() : end + 1;
        ++line_;
        if (strip_tabs) ln.erase(0, ln.find_first_not_of('\t'));
        if (!ln.empty() && ln.back() == '\r') ln.pop_back();
        if (ln == delim) {
          found = true;
          break;
        }
      }
      if (!found) fail(start - 1, cat("here-document <<", delim, " has no closing ", delim));
    }
    heredocs_.clear();
  }

  // A redirection and its target are dropped: they do not change the command's arguments.
  void read_redirect() {
    std::string op;
    while (i_ < s_.size() && (s_[i_] == '<' || s_[i_] == '>' || s_[i_] == '&' || s_[i_] == '|' ||
                              (s_[i_] == '-' && !op.empty() && op.back() == '<'))) {
      op += s_[i_++];
      if (op.size() >= 3) break;
    }
    if ((op.back() == '&') &&
        (std::isdigit(static_cast<unsigned char>(peek(0))) || peek(0) == '-')) {
      while (std::isdigit(static_cast<unsigned char>(peek(0))) || peek(0) == '-') ++i_;
      return;
    }
    while (i_ < s_.size() && is_blank(s_[i_])) ++i_;
    if (i_ >= s_.size() || is_meta(s_[i_])) fail(line_, cat("'", op, "' needs a target"));
    bool heredoc = op == "<<" || op == "<<-";
    Token target;
    int line = line_;
    read_word_or_array(target);
    if (heredoc) {
      std::string delim;
      for (const Part& p : target.word.parts) delim += p.text;
      if (delim.empty()) fail(line, "here-document without a delimiter");
      heredocs_.push_back({delim, op == "<<-"});
    }
  }

  // Scans from i_ (just after an opening bracket) to the matching `close`, honouring quotes and
  // nesting of `open`; returns the text in between and leaves i_ after the close.
  std::string scan_balanced(char open, char close, const char* what, int start_line) {
    int depth = 0;
    size_t begin = i_;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') ++line_;
      if (c == '\\' && i_ + 1 < s_.size()) {
        if (s_[i_ + 1] == '\n') ++line_;
        i_ += 2;
        continue;
      }
      if (c == '\'') {
        size_t end = s_.find('\'', i_ + 1);
        if (end == std::string::npos) fail(start_line, cat("unterminated ", what));
        line_ += static_cast<int>(std::count(s_.begin() + i_, s_.begin() + end, '\n'));
        i_ = end + 1;
        continue;
      }
      if (c == '"') {
        ++i_;
        while (i_ < s_.size() && s_[i_] != '"') {
          if (s_[i_] == '\\') ++i_;
          if (i_ < s_.size() && s_[i_] == '\n') ++line_;
          ++i_;
        }
        if (i_ >= s_.size()) fail(start_line, cat("unterminated ", what));
        ++i_;
        continue;
      }
      if (c == open) ++depth;
      if (c == close) {
        if (depth == 0) {
          std::string inner = s_.substr(begin, i_ - begin);
          ++i_;
          return inner;
        }
        --depth;
      }
      ++i_;
    }
    fail(start_line, cat("unterminated ", what));
  }

  // At '$': appends the expansion (or a literal '$') to w.
  void read_dollar(Word& w, bool quoted) {
    int start = line_;
    char n = peek(1);
    if (n == '{') {
      i_ += 2;
      w.parts.push_back({PartKind::kParam, quoted, scan_balanced('{', '}', "${...}", start)});
    } else if (n == '(' && peek(2) == '(') {
      i_ += 3;
      std::string inner = scan_balanced('(', ')', "$((...))", start);
      if (peek(0) != ')') fail(start, "unterminated $((...))");
      ++i_;
      w.parts.push_back({PartKind::kArith, quoted, inner});
    } else if (n == '(') {
      i_ += 2;
      w.parts.push_back({PartKind::kCommand, quoted, scan_balanced('(', ')', "$(...)", start)});
    } else if (is_name_start(n)) {
      size_t b = ++i_;
      while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
      w.parts.push_back({PartKind::kParam, quoted, s_.substr(b, i_ - b)});
    } else if (std::isdigit(static_cast<unsigned char>(n)) ||
               std::string_view("@*#?$!-").find(n) != std::string_view::npos) {
      if (n == '\0') {
        add_literal(w, "$", quoted);
        ++i_;
        return;
      }
      w.parts.push_back({PartKind::kParam, quoted, std::string(1, n)});
      i_ += 2;
    } else if (n == '\'' && !quoted) {  // $'...': ANSI-C quoting, read as single-quoted text
      i_ += 2;
      size_t end = s_.find('\'', i_);
      if (end == std::string::npos) fail(start, "unterminated $'...'");
      add_literal(w, s_.substr(i_, end - i_), true);
      i_ = end + 1;
    } else if (n == '"' && !quoted) {  // $"...": a double-quoted string
      ++i_;
    } else {
      add_literal(w, "$", quoted);
      ++i_;
    }
  }

  void read_double_quoted(Word& w) {
    int start = line_;
    ++i_;  // opening quote
    bool any = false;
    while (true) {
      if (i_ >= s_.size()) fail(start, "unterminated double quote");
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        break;
      }
      if (c == '\\') {
        char n = peek(1);
        if (n == '\n') {
          i_ += 2;
          ++line_;
        } else if (n == '$' || n == '`' || n == '"' || n == '\\') {
          add_literal(w, std::string(1, n), true);
          i_ += 2;
        } else {
          add_literal(w, "\\", true);
          ++i_;
        }
      } else if (c == '$') {
        read_dollar(w, true);
      } else if (c == '`') {
        read_backtick(w, true);
      } else {
        if (c == '\n') ++line_;
        add_literal(w, std::string(1, c), true);
        ++i_;
      }
      any = true;
    }
    if (!any) add_literal(w, "", true);  // "" is an empty word, not nothing
  }

  void read_backtick(Word& w, bool quoted) {
    int start = line_;
    size_t end = s_.find('`', i_ + 1);
    if (end == std::string::npos) fail(start, "unterminated `...`");
    std::string inner = s_.substr(i_ + 1, end - i_ - 1);
    line_ += static_cast<int>(std::count(inner.begin(), inner.end(), '\n'));
    i_ = end + 1;
    w.parts.push_back({PartKind::kCommand, quoted, inner});
  }

  // Reads one word into t (kWord), or NAME=( ... ) into t (kArray). Returns false when the word
  // turned out to be a file-descriptor number of a redirection (2>&1), which is dropped.
  bool read_word_or_array(Token& t) {
    t.kind = TokKind::kWord;
    t.line = line_;
    Word& w = t.word;
    w.line = line_;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '(' && !w.parts.empty()) {
        auto p = w.plain();
        if (p && p->size() >= 2 && p->back() == '=') {
          std::string name = p->substr(0, p->size() - 1);
          bool append = !name.empty() && name.back() == '+';
          if (append) name.pop_back();
          if (is_valid_name(name)) {
            read_array(t, name, append);
            return true;
          }
        }
      }
      if (is_meta(c)) break;
      if (c == '\\') {
        if (peek(1) == '\n') {
          i_ += 2;
          ++line_;
          continue;
        }
        if (i_ + 1 < s_.size()) add_literal(w, std::string(1, s_[i_ + 1]), true);
        i_ += 2;
      } else if (c == '\'') {
        size_t end = s_.find('\'', i_ + 1);
        if (end == std::string::npos) fail(line_, "unterminated single quote");
        std::string inner = s_.substr(i_ + 1, end - i_ - 1);
        line_ += static_cast<int>(std::count(inner.begin(), inner.end(), '\n'));
        add_literal(w, inner, true);
        i_ = end + 1;
      } else if (c == '"') {
        read_double_quoted(w);
      } else if (c == '$') {
        read_dollar(w, false);
      } else if (c == '`') {
        read_backtick(w, false);
      } else {
        add_literal(w, std::string(1, c), false);
        ++i_;
      }
    }
    if (i_ < s_.size() && (s_[i_] == '<' || s_[i_] == '>')) {
      auto p = w.plain();
      if (p && !p->empty() && std::all_of(p->begin(), p->end(), [](char ch) {
            return std::isdigit(static_cast<unsigned char>(ch));
          }))
        return false;
    }
    return true;
  }

  void read_array(Token& t, const std::string& name, bool append) {
    int start = line_;
    t.kind = TokKind::kArray;
    t.name = name;
    t.append = append;
    t.word = Word{};
    ++i_;  // '('
    while (true) {
      if (i_ >= s_.size())
        fail(start, cat("unterminated array ", name, "=( ... ): no closing ')'"));
      char c = s_[i_];
      if (is_blank(c)) {
        ++i_;
      } else if (c == '\n') {
        ++i_;
        ++line_;
      } else if (c == '\\' && peek(1) == '\n') {
        i_ += 2;
        ++line_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ')') {
        ++i_;
        return;
      } else if (is_meta(c)) {
        fail(line_, cat("unexpected '", c, "' inside array ", name, "=( ... )"));
      } else {
        Token e;
        read_word_or_array(e);
        if (e.kind == TokKind::kArray) fail(e.line, cat("nested array inside ", name, "=( ... )"));
        t.elements.push_back(std::move(e.word));
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Parser

struct Statement;
using StatementList = std::vector<Statement>;

struct Statement {
  enum class Kind { kSimple, kIf, kAndOr, kGroup, kSkipped };
  Kind kind = Kind::kSimple;
  int line = 0;
  bool negate = false;
  std::vector<Token> items;               // kSimple: words and array assignments
  std::vector<StatementList> conditions;  // kIf
  std::vector<StatementList> bodies;      // kIf (one per condition), kGroup / kSkipped: [0]
  StatementList else_body;                // kIf
  bool has_else = false;                  // kIf
  StatementList parts;                    // kAndOr
  std::vector<std::string> ops;           // kAndOr: "&&" / "||" between parts
  std::string what;                       // kSkipped: "for loop", "function f", ...
};

const std::set<std::string>& reserved_words() {
  static const std::set<std::string> r = {"then", "elif", "else", "fi", "do", "done", "esac", "}"};
  return r;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}

  StatementList parse_all() {
    StatementList l = parse_list({});
    if (p_ < t_.size()) fail_unexpected();
    return l;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;  // compound commands being parsed

  bool at_end() const { return p_ >= t_.size(); }
  bool at_op(const char* op) const {
    return !at_end() && t_[p_].kind == TokKind::kOp && t_[p_].op == op;
  }
  bool at_word(const std::string& kw) const {
    if (at_end() || t_[p_].kind != TokKind::kWord) return false;
    auto p = t_[p_].word.plain();
    return p && *p == kw;
  }
  int line() const { return at_end() ? (t_.empty() ? 1 : t_.back().line) : t_[p_].line; }
  [[noreturn]] void fail_unexpected() const {
    const Token& t = t_[p_];
    std::string what = t.kind == TokKind::kOp ? (t.op == "\n" ? "newline" : t.op)
                                              : t.word.plain().value_or("word");
    throw Error(cat("line ", t.line, ": unexpected '", what, "'"));
  }
  void expect(const std::string& kw, const char* opener, int opener_line) {
    if (!at_word(kw))
      throw Error(cat("line ", opener_line, ": '", opener, "' without matching '", kw, "'"));
    ++p_;
  }
  void skip_newlines() {
    while (at_op("\n")) ++p_;
  }

  StatementList parse_list(const std::set<std::string>& terms) {
    StatementList out;
    while (true) {
      while (at_op("\n") || at_op(";") || at_op("&")) ++p_;
      if (at_end()) return out;
      if (at_op(")")) {
        if (terms.count(")")) return out;
        fail_unexpected();
      }
      if (t_[p_].kind == TokKind::kWord) {
        auto w = t_[p_].word.plain();
        if (w && terms.count(*w)) return out;
        if (w && reserved_words().count(*w)) fail_unexpected();
      }
      out.push_back(parse_and_or());
    }
  }

  Statement parse_and_or() {
    Statement first = parse_pipeline();
    if (!at_op("&&") && !at_op("||")) return first;
    Statement s;
    s.kind = Statement::Kind::kAndOr;
    s.line = first.line;
    s.parts.push_back(std::move(first));
    while (at_op("&&") || at_op("||")) {
      s.ops.push_back(t_[p_].op);
      ++p_;
      skip_newlines();
      s.parts.push_back(parse_pipeline());
    }
    return s;
  }

  Statement parse_pipeline() {
    bool negate = false;
    if (at_word("!")) {
      negate = true;
      ++p_;
    }
    Statement first = parse_command();
    if (!at_op("|")) {
      first.negate = first.negate != negate;
      return first;
    }
    Statement g;
    g.kind = Statement::Kind::kGroup;
    g.line = first.line;
    g.negate = negate;
    g.bodies.emplace_back();
    g.bodies[0].push_back(std::move(first));
    while (at_op("|")) {
      ++p_;
      skip_newlines();
      g.bodies[0].push_back(parse_command());
    }
    return g;
  }

  Statement skipped(const std::string& what, int line, StatementList body) {
    Statement s;
    s.kind = Statement::Kind::kSkipped;
    s.line = line;
    s.what = what;
    s.bodies.push_back(std::move(body));
    return s;
  }

  Statement parse_command() {
    if (at_end()) throw Error(cat("line ", line(), ": a command is missing at the end"));
    int ln = line();
    Nesting nesting(depth_, ln, "commands");
    if (at_word("if")) return parse_if();
    if (at_word("for") || at_word("select")) {
      std::string kw = *t_[p_].word.plain();
      ++p_;
      while (!at_end() && !at_word("do")) ++p_;
      expect("do", kw.c_str(), ln);
      StatementList body = parse_list({"done"});
      expect("done", kw.c_str(), ln);
      return skipped(kw + " loop", ln, std::move(body));
    }
    if (at_word("while") || at_word("until")) {
      std::string kw = *t_[p_].word.plain();
      ++p_;
      StatementList cond = parse_list({"do"});
      expect("do", kw.c_str(), ln);
      StatementList body = parse_list({"done"});
      expect("done", kw.c_str(), ln);
      for (auto& c : cond) body.push_back(std::move(c));
      return skipped(kw + " loop", ln, std::move(body));
    }
    if (at_word("case")) {
      ++p_;
      int depth = 1;
      while (!at_end()) {
        if (at_word("case")) ++depth;
        if (at_word("esac") && --depth == 0) break;
        ++p_;
      }
      expect("esac", "case", ln);
      return skipped("case statement", ln, {});
    }
    if (at_word("function") ||
        (t_[p_].kind == TokKind::kWord && p_ + 2 < t_.size() && t_[p_ + 1].kind == TokKind::kOp &&
         t_[p_ + 1].op == "(" && t_[p_ + 2].kind == TokKind::kOp && t_[p_ + 2].op == ")")) {
      if (at_word("function")) ++p_;
      std::string name = at_end() ? "" : t_[p_].word.plain().value_or("?");
      ++p_;
      if (at_op("(")) {
        ++p_;
        if (!at_op(")")) fail_unexpected();
        ++p_;
      }
      skip_newlines();
      Statement body = parse_command();
      StatementList b;
      b.push_back(std::move(body));
      return skipped("function " + name, ln, std::move(b));
    }
    if (at_word("{")) {
      ++p_;
      Statement g;
      g.kind = Statement::Kind::kGroup;
      g.line = ln;
      g.bodies.push_back(parse_list({"}"}));
      expect("}", "{", ln);
      return g;
    }
    if (at_op("(")) {
      ++p_;
      Statement g;
      g.kind = Statement::Kind::kGroup;
      g.line = ln;
      g.bodies.push_back(parse_list({")"}));
      if (!at_op(")")) throw Error(cat("line ", ln, ": '(' without matching ')'"));
      ++p_;
      return g;
    }
    Statement s;
    s.kind = Statement::Kind::kSimple;
    s.line = ln;
    if (at_word("[[")) {  // inside [[ ]], && || ( ) are words of the test
      while (!at_end() && !at_word("]]")) {
        Token t = t_[p_++];
        if (t.kind == TokKind::kOp) {
          if (t.op == "\n") throw Error(cat("line ", ln, ": '[[' without matching ']]'"));
          t.kind = TokKind::kWord;
          t.word.parts = {{PartKind::kLiteral, false, t.op}};
          t.word.line = t.line;
        }
        s.items.push_back(std::move(t));
      }
      if (at_end()) throw Error(cat("line ", ln, ": '[[' without matching ']]'"));
      s.items.push_back(t_[p_++]);
      return s;
    }
    while (!at_end() && t_[p_].kind != TokKind::kOp) s.items.push_back(t_[p_++]);
    if (s.items.empty()) fail_unexpected();
    return s;
  }

  Statement parse_if() {
    int ln = line();
    ++p_;  // if
    Statement s;
    s.kind = Statement::Kind::kIf;
    s.line = ln;
    s.conditions.push_back(parse_list({"then"}));
    expect("then", "if", ln);
    s.bodies.push_back(parse_list({"elif", "else", "fi"}));
    while (at_word("elif")) {
      ++p_;
      s.conditions.push_back(parse_list({"then"}));
      expect("then", "elif", ln);
      s.bodies.push_back(parse_list({"elif", "else", "fi"}));
    }
    if (at_word("else")) {
      ++p_;
      s.has_else = true;
      s.else_body = parse_list({"fi"});
    }
    expect("fi", "if", ln);
    return s;
  }
};

// ---------------------------------------------------------------------------------------------
// Evaluator

enum class Tri { kTrue, kFalse, kUnknown };
Tri tri_not(Tri t) { return t == Tri::kTrue ? Tri::kFalse : t == Tri::kFalse ? Tri::kTrue : t; }
Tri tri_and(Tri a, Tri b) {
  if (a == Tri::kFalse || b == Tri::kFalse) return Tri::kFalse;
  return a == Tri::kTrue && b == Tri::kTrue ? Tri::kTrue : Tri::kUnknown;
}
Tri tri_or(Tri a, Tri b) {
  if (a == Tri::kTrue || b == Tri::kTrue) return Tri::kTrue;
  return a == Tri::kFalse && b == Tri::kFalse ? Tri::kFalse : Tri::kUnknown;
}
Tri tri_of(bool b) { return b ? Tri::kTrue : Tri::kFalse; }

void merge_unknown(std::vector<std::string>& into, const std::vector<std::string>& from) {
  for (const auto& u : from)
    if (std::find(into.begin(), into.end(), u) == into.end()) into.push_back(u);
}

std::string shorten(const std::string& s, size_t n = 40) {
  std::string one;
  for (char c : s) one += (c == '\n' ? ' ' : c);
  return one.size() > n ? one.substr(0, n - 3) + "..." : one;
}

// Glob match of [[ a == pattern ]] (only * and ?).
bool glob_match(const std::string& s, const std::string& p) {
  size_t si = 0, pi = 0, star = std::string::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++si;
      ++pi;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t k = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (k == s.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t i = k; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    if (v > (INT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return s[0] == '-' ? -v : v;
}

// Bash's integer arithmetic on the text of $((...)) once its variables are substituted: + - * / %,
// unary signs and parentheses, decimal and octal (leading 0) constants, in 64 bits. Bash stops a
// script on a division by zero and wraps a result beyond 64 bits around; both are an Error naming
// the expression and its line here, as is nesting past kMaxNesting. Text outside this subset
// leaves the value unknown (nullopt).
class Arithmetic {
 public:
  Arithmetic(const std::string& text, int line, std::string shown)
      : s_(text), line_(line), shown_(std::move(shown)) {}

  std::optional<int64_t> value() {
    std::optional<int64_t> v = sum();
    skip_ws();
    if (p_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  const std::string& s_;
  size_t p_ = 0;
  int line_;
  std::string shown_;
  int depth_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(cat("line ", line_, ": ", shown_, ": ", what));
  }
  void skip_ws() {
    while (p_ < s_.size() && (is_blank(s_[p_]) || s_[p_] == '\n')) ++p_;
  }
  int64_t checked(bool overflowed, int64_t v) const {
    if (overflowed) fail("the result overflows 64-bit integers (bash would wrap it around)");
    return v;
  }
  std::optional<int64_t> constant() {
    const size_t b = p_;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    if (p_ == b) return std::nullopt;
    const std::string digits = s_.substr(b, p_ - b);
    const int base = digits.size() > 1 && digits[0] == '0' ? 8 : 10;
    int64_t v = 0;
    for (char c : digits) {
      const int d = c - '0';
      if (d >= base) fail(cat(digits, ": value too great for base (octal, a leading 0)"));
      if (v > (INT64_MAX - d) / base) fail(cat(digits, ": the constant overflows 64-bit integers"));
      v = v * base + d;
    }
    return v;
  }
  std::optional<int64_t> atom() {
    skip_ws();
    if (p_ >= s_.size()) return std::nullopt;
    if (s_[p_] == '-' || s_[p_] == '+' || s_[p_] == '(') {
      Nesting nesting(depth_, line_, "arithmetic signs and parentheses");
      const char c = s_[p_++];
      std::optional<int64_t> v = c == '(' ? sum() : atom();
      if (v && c == '(') {
        skip_ws();
        if (p_ >= s_.size() || s_[p_] != ')') return std::nullopt;
        ++p_;
      }
      if (!v || c != '-') return v;
      return checked(*v == INT64_MIN, v == INT64_MIN ? 0 : -*v);
    }
    return constant();
  }
  std::optional<int64_t> product() {
    std::optional<int64_t> v = atom();
    while (v) {
      skip_ws();
      if (p_ >= s_.size() || (s_[p_] != '*' && s_[p_] != '/' && s_[p_] != '%')) break;
      const char op = s_[p_++];
      const std::optional<int64_t> r = atom();
      if (!r) return std::nullopt;
      int64_t out = 0;
      if (op == '*') {
        const bool overflowed = __builtin_mul_overflow(*v, *r, &out);  // before out is read
        v = checked(overflowed, out);
        continue;
      }
      if (*r == 0) fail("division by zero");
      if (*r == -1) {  // INT64_MIN / -1 overflows; any x % -1 is 0
        v = op == '%' ? 0 : checked(*v == INT64_MIN, *v == INT64_MIN ? 0 : -*v);
        continue;
      }
      v = op == '/' ? *v / *r : *v % *r;
    }
    return v;
  }
  std::optional<int64_t> sum() {
    std::optional<int64_t> v = product();
    while (v) {
      skip_ws();
      if (p_ >= s_.size() || (s_[p_] != '+' && s_[p_] != '-')) break;
      const char op = s_[p_++];
      const std::optional<int64_t> r = product();
      if (!r) return std::nullopt;
      int64_t out = 0;
      // The flag before the call to checked(): its arguments are evaluated in no set order.
      const bool overflowed =
          op == '+' ? __builtin_add_overflow(*v, *r, &out) : __builtin_sub_overflow(*v, *r, &out);
      v = checked(overflowed, out);
    }
    return v;
  }
};

class Evaluator {
 public:
  explicit Evaluator(const ShellReadOptions& o) : opt_(o) {}

  ShellScript run(const StatementList& l) {
    run_list(l);
    return std::move(out_);
  }

 private:
  const ShellReadOptions& opt_;
  ShellScript out_;
  std::map<std::string, std::vector<ShellField>> vars_;
  std::set<std::string> overridden_noted_;
  std::vector<std::string> last_unknown_;  // what the last unknown test depended on
  int depth_ = 0;                          // substitutions and test parentheses being expanded
  int test_line_ = 0;                      // the line of the test being evaluated
  size_t expanded_bytes_ = 0;              // text produced by substitutions so far

  void note(int line, const std::string& what) {
    out_.notes.push_back(cat("line ", line, ": ", what));
  }
  void mark_undefined(const std::string& name) {
    if (std::find(out_.undefined.begin(), out_.undefined.end(), name) == out_.undefined.end())
      out_.undefined.push_back(name);
  }

  // --- variables -----------------------------------------------------------------------------

  std::optional<std::vector<ShellField>> lookup(const std::string& name) const {
    auto o = opt_.vars.find(name);
    if (o != opt_.vars.end()) return std::vector<ShellField>{{o->second, {}}};
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) {
      if (name == "0") return std::vector<ShellField>{{"script", {}}};
      return std::nullopt;
    }
    auto v = vars_.find(name);
    if (v != vars_.end()) return v->second;
    return std::nullopt;
  }

  std::vector<ShellField> positional_all() const {
    std::vector<ShellField> out;
    for (int k = 1; k <= 9; ++k) {
      auto o = opt_.vars.find(std::to_string(k));
      if (o == opt_.vars.end()) break;
      out.push_back({o->second, {}});
    }
    return out;
  }

  void assign(int line, const std::string& name, std::vector<ShellField> value, bool append) {
    if (opt_.vars.count(name)) {
      if (overridden_noted_.insert(name).second)
        note(line, cat("the script's assignment to ", name, " is overridden by the given value ",
                       name, "=", opt_.vars.at(name)));
      return;
    }
    auto& v = vars_[name];
    if (!append) v.clear();
    for (auto& f : value) v.push_back(std::move(f));
  }

  void assign_scalar(int line, const std::string& name, ShellField value, bool append) {
    if (append) {
      auto it = vars_.find(name);
      if (it != vars_.end() && !it->second.empty() && !opt_.vars.count(name)) {
        it->second[0].text += value.text;
        merge_unknown(it->second[0].unknown, value.unknown);
        return;
      }
    }
    assign(line, name, {std::move(value)}, false);
  }

  // --- expansion -----------------------------------------------------------------------------

  struct Expansion {
    std::vector<ShellField> values;
    bool at = false;  // "${ARR[@]}" / "$@": one word per element when quoted
  };

  static ShellField join(const std::vector<ShellField>& v) {
    ShellField f;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) f.text += ' ';
      f.text += v[i].text;
      merge_unknown(f.unknown, v[i].unknown);
    }
    return f;
  }

  ShellField expand_text(const std::string& text, int line) {
    // The operand of ${X:-word} is lexed like a command line: quotes honoured, words joined.
    std::vector<Token> toks;
    try {
      toks = Lexer(text).run();
    } catch (const Error&) {
      return {text, {}};
    }
    std::vector<ShellField> all;
    for (const auto& tk : toks) {
      if (tk.kind != TokKind::kWord) continue;
      all.push_back(expand_joined(tk.word, line));
    }
    return join(all);
  }

  // Every substitution's text counts against kMaxExpandedBytes, so that a value that doubles
  // itself line after line (X=$X$X) ends in an Error, not in exhausted memory.
  Expansion expand_param(const std::string& inner, int line) {
    Nesting nesting(depth_, line, "substitutions ${...}");
    Expansion e = substitute(inner, line);
    for (const ShellField& f : e.values) expanded_bytes_ += f.text.size();
    if (expanded_bytes_ > kMaxExpandedBytes)
      throw Error(cat("line ", line, ": ", shorten("${" + inner + "}"),
                      ": the script's substitutions produce more than ", kMaxExpandedBytes >> 20,
                      " MiB of text (a value that doubles itself?)"));
    return e;
  }

  Expansion substitute(const std::string& inner, int line) {
    Expansion e;
    std::string display = "${" + inner + "}";
    if (inner.empty()) {
      note(line, "bad substitution ${}");
      e.values.push_back({display, {display}});
      return e;
    }
    size_t k = 0;
    bool length = false;
    if (inner[0] == '#' && inner.size() > 1) {
      length = true;
      k = 1;
    }
    std::string name;
    if (std::isdigit(static_cast<unsigned char>(inner[k]))) {
      while (k < inner.size() && std::isdigit(static_cast<unsigned char>(inner[k])))
        name += inner[k++];
    } else if (is_name_start(inner[k])) {
      while (k < inner.size() && is_name_char(inner[k])) name += inner[k++];
    } else {
      name = std::string(1, inner[k++]);
    }
    std::string index;
    bool has_index = false;
    if (k < inner.size() && inner[k] == '[') {
      size_t end = inner.find(']', k);
      if (end == std::string::npos) {
        note(line, cat("bad substitution ", display));
        e.values.push_back({display, {display}});
        return e;
      }
      index = inner.substr(k + 1, end - k - 1);
      has_index = true;
      k = end + 1;
    }
    std::string rest = inner.substr(k);
    std::string op, operand;
    if (rest.size() >= 2 && rest[0] == ':' &&
        std::string_view("-=+?").find(rest[1]) != std::string_view::npos) {
      op = rest.substr(0, 2);
      operand = rest.substr(2);
    } else if (!rest.empty() && std::string_view("-=+?").find(rest[0]) != std::string_view::npos) {
      op = rest.substr(0, 1);
      operand = rest.substr(1);
    } else if (!rest.empty()) {
      note(line, cat("substitution ", display, " is not evaluated; its value is unknown"));
      e.values.push_back({display, {display}});
      return e;
    }

    // Look the variable up.
    std::optional<std::vector<ShellField>> val;
    std::string shown = "$" + name;
    if (name == "@" || name == "*") {
      auto all = positional_all();
      if (all.empty() && !opt_.vars.count("1")) {
        val = std::nullopt;
      } else {
        val = all;
      }
      e.at = name == "@";
    } else if (name == "#") {
      auto all = positional_all();
      val = std::vector<ShellField>{{std::to_string(all.size()), {}}};
      if (all.empty()) val = std::nullopt;
    } else if (name == "?") {
      val = std::vector<ShellField>{{"0", {}}};
    } else if (name == "$" || name == "!" || name == "-") {
      val = std::nullopt;
    } else {
      val = lookup(name);
    }
    if (val && has_index) {
      if (index == "@" || index == "*") {
        e.at = index == "@";
      } else {
        auto ix = parse_int(index);
        if (!ix) {
          note(line, cat("array index in ", display, " is not a number; its value is unknown"));
          e.values.push_back({display, {display}});
          return e;
        }
        std::vector<ShellField> one;
        if (*ix >= 0 && static_cast<size_t>(*ix) < val->size()) one.push_back((*val)[*ix]);
        val = one;
      }
    } else if (val && !has_index && !e.at && val->size() > 1 && name != "*") {
      val = std::vector<ShellField>{(*val)[0]};  // $ARR is ${ARR[0]}
    }

    bool is_set = val.has_value();
    bool null_or_unknown =
        !is_set || val->empty() || (val->size() == 1 && (*val)[0].text.empty()) ||
        std::any_of(val->begin(), val->end(), [](const ShellField& f) { return !f.resolved(); });
    if (length) {
      if (!is_set || !join(*val).resolved()) {
        e.values.push_back({display, {shown}});
        return e;
      }
      size_t n = has_index && (index == "@" || index == "*") ? val->size() : join(*val).text.size();
      e.values.push_back({std::to_string(n), {}});
      e.at = false;
      return e;
    }
    if (op == ":-" || op == "-" || op == ":=" || op == "=") {
      bool use_default = op[0] == ':' ? null_or_unknown : !is_set;
      if (use_default) {
        ShellField d = expand_text(operand, line);
        if (!is_set || null_or_unknown) mark_default(name, d.text);
        if (op.back() == '=' && is_valid_name(name)) assign_scalar(line, name, d, false);
        e.values = {d};
        e.at = false;
        return e;
      }
    } else if (op == ":+" || op == "+") {
      bool use_alt = op[0] == ':' ? !null_or_unknown : is_set;
      e.values.clear();
      if (use_alt) e.values.push_back(expand_text(operand, line));
      e.at = false;
      return e;
    } else if (op == ":?" || op == "?") {
      // ${X:?message} stops the script when X is unset; here the value just stays unknown.
    }
    if (!is_set) {
      mark_undefined(shown);
      e.values.push_back({shown, {shown}});
      e.at = false;
      return e;
    }
    e.values = *val;
    return e;
  }

  void mark_default(const std::string& name, const std::string& value) {
    std::string shown = "$" + name;
    for (const auto& n : defaults_noted_)
      if (n == shown) return;
    defaults_noted_.push_back(shown);
    out_.defaults_used.push_back(cat(shown, " -> \"", value, "\""));
  }
  std::vector<std::string> defaults_noted_;

  // $((expr)): integer arithmetic on + - * / % and parentheses.
  ShellField expand_arith(const std::string& expr, int line) {
    std::string flat;
    std::vector<std::string> unknown;
    for (size_t i = 0; i < expr.size();) {
      char c = expr[i];
      if (c == '$') {
        size_t j = i + 1;
        std::string inner;
        if (j < expr.size() && expr[j] == '{') {
          size_t end = expr.find('}', j);
          if (end == std::string::npos) return {"$((" + expr + "))", {"$((" + expr + "))"}};
          inner = expr.substr(j + 1, end - j - 1);
          i = end + 1;
        } else {
          while (j < expr.size() && (is_name_char(expr[j]))) inner += expr[j++];
          i = j;
        }
        ShellField f = join(expand_param(inner, line).values);
        merge_unknown(unknown, f.unknown);
        flat += f.text;
      } else if (is_name_start(c)) {
        std::string name;
        while (i < expr.size() && is_name_char(expr[i])) name += expr[i++];
        ShellField f = join(expand_param(name, line).values);
        merge_unknown(unknown, f.unknown);
        flat += f.text;
      } else {
        flat += c;
        ++i;
      }
    }
    std::string shown = "$((" + expr + "))";
    if (!unknown.empty()) return {shown, unknown};
    std::optional<int64_t> v = Arithmetic(flat, line, shorten(shown)).value();
    if (!v) {
      note(line, cat("arithmetic ", shown, " is not evaluated; its value is unknown"));
      return {shown, {shown}};
    }
    return {std::to_string(*v), {}};
  }
  // Word splitting of a value that holds placeholders ("--cache $PWD/x"): split on whitespace
  // outside the placeholders; a piece depends on the placeholders it overlaps.
  template <class Cut, class Add>
  static void split_unknown(const ShellField& v, Cut& cut, Add& add) {
    const std::string& t = v.text;
    std::vector<std::pair<size_t, size_t>> spans;  // placeholder [begin, end) in t
    std::vector<std::string> names;
    for (const auto& u : v.unknown)
      for (size_t at = t.find(u); at != std::string::npos; at = t.find(u, at + u.size())) {
        spans.push_back({at, at + u.size()});
        names.push_back(u);
      }
    if (spans.empty()) {  // cannot tell where the unknown part is: keep the value whole
      add(v);
      return;
    }
    auto inside = [&](size_t i) {
      for (auto [b, e] : spans)
        if (i >= b && i < e) return true;
      return false;
    };
    auto ws = [&](size_t i) { return (t[i] == ' ' || t[i] == '\t' || t[i] == '\n') && !inside(i); };
    for (size_t p = 0; p < t.size();) {
      if (ws(p)) {
        cut();
        while (p < t.size() && ws(p)) ++p;
        continue;
      }
      size_t b = p;
      while (p < t.size() && !ws(p)) ++p;
      ShellField piece{t.substr(b, p - b), {}};
      for (size_t k = 0; k < spans.size(); ++k)
        if (spans[k].first < p && spans[k].second > b) merge_unknown(piece.unknown, {names[k]});
      add(piece);
    }
    if (!t.empty() && ws(t.size() - 1)) cut();
  }

  // Expands one word into fields, with word splitting of unquoted expansions.
  std::vector<ShellField> expand_word(const Word& w, int line) {
    std::vector<ShellField> fields;
    ShellField cur;
    bool have = false;
    auto cut = [&] {
      if (have) fields.push_back(std::move(cur));
      cur = ShellField{};
      have = false;
    };
    auto add = [&](const ShellField& f) {
      cur.text += f.text;
      merge_unknown(cur.unknown, f.unknown);
      have = true;
    };
    for (const Part& part : w.parts) {
      if (part.kind == PartKind::kLiteral) {
        cur.text += part.text;
        if (part.quoted || !part.text.empty()) have = true;
        continue;
      }
      Expansion e;
      if (part.kind == PartKind::kParam) {
        e = expand_param(part.text, line);
      } else if (part.kind == PartKind::kArith) {
        e.values.push_back(expand_arith(part.text, line));
      } else {
        std::string shown = "$(" + shorten(part.text) + ")";
        e.values.push_back({shown, {shown}});
      }
      if (part.quoted) {
        if (e.at) {
          for (size_t i = 0; i < e.values.size(); ++i) {
            if (i) cut();
            add(e.values[i]);
          }
        } else {
          add(join(e.values));
        }
        continue;
      }
      for (size_t i = 0; i < e.values.size(); ++i) {
        const ShellField& v = e.values[i];
        if (i) cut();
        if (!v.resolved()) {
          split_unknown(v, cut, add);
          continue;
        }
        const std::string& t = v.text;
        if (t.empty()) continue;  // an empty unquoted expansion is no word at all
        auto ws = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; };
        std::vector<std::string> tokens;
        for (size_t p = 0; p < t.size();) {
          while (p < t.size() && ws(t[p])) ++p;
          size_t b = p;
          while (p < t.size() && !ws(t[p])) ++p;
          if (p > b) tokens.push_back(t.substr(b, p - b));
        }
        if (ws(t.front()) || tokens.empty()) cut();
        for (size_t j = 0; j < tokens.size(); ++j) {
          if (j) cut();
          cur.text += tokens[j];
          have = true;
        }
        if (ws(t.back()) && !tokens.empty()) cut();
      }
    }
    if (have) fields.push_back(std::move(cur));
    return fields;
  }

  // Expands a word without splitting (assignments, operands of ${X:-word}).
  ShellField expand_joined(const Word& w, int line) {
    ShellField f;
    for (const Part& part : w.parts) {
      if (part.kind == PartKind::kLiteral) {
        f.text += part.text;
      } else if (part.kind == PartKind::kParam) {
        ShellField v = join(expand_param(part.text, line).values);
        f.text += v.text;
        merge_unknown(f.unknown, v.unknown);
      } else if (part.kind == PartKind::kArith) {
        ShellField v = expand_arith(part.text, line);
        f.text += v.text;
        merge_unknown(f.unknown, v.unknown);
      } else {
        std::string shown = "$(" + shorten(part.text) + ")";
        f.text += shown;
        merge_unknown(f.unknown, {shown});
      }
    }
    return f;
  }

  // --- statements ----------------------------------------------------------------------------

  // NAME=value or NAME+=value: the name, the append flag and the value's word.
  static std::optional<std::tuple<std::string, bool, Word>> split_assignment(const Word& w) {
    if (w.parts.empty() || w.parts[0].kind != PartKind::kLiteral || w.parts[0].quoted)
      return std::nullopt;
    const std::string& t = w.parts[0].text;
    size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    std::string name = t.substr(0, eq);
    bool append = name.back() == '+';
    if (append) name.pop_back();
    if (!is_valid_name(name)) return std::nullopt;
    Word value;
    value.line = w.line;
    if (eq + 1 < t.size()) value.parts.push_back({PartKind::kLiteral, false, t.substr(eq + 1)});
    for (size_t i = 1; i < w.parts.size(); ++i) value.parts.push_back(w.parts[i]);
    return std::make_tuple(name, append, value);
  }

  bool do_assignment_item(const Token& t, int line) {
    if (t.kind == TokKind::kArray) {
      std::vector<ShellField> vals;
      for (const Word& e : t.elements) {
        auto f = expand_word(e, line);
        vals.insert(vals.end(), f.begin(), f.end());
      }
      assign(line, t.name, std::move(vals), t.append);
      return true;
    }
    auto a = split_assignment(t.word);
    if (!a) return false;
    auto& [name, append, value] = *a;
    assign_scalar(line, name, expand_joined(value, line), append);
    return true;
  }

  Tri run_list(const StatementList& l) {
    Tri st = Tri::kTrue;
    for (const auto& s : l) st = run(s);
    return st;
  }

  static bool matters(const StatementList& l) {
    for (const auto& s : l) {
      switch (s.kind) {
        case Statement::Kind::kSimple:
          for (const auto& t : s.items) {
            if (t.kind == TokKind::kArray) return true;
            for (const auto& p : t.word.parts) {
              if (p.kind != PartKind::kLiteral) continue;
              if (p.text.find('=') != std::string::npos && &t == &s.items.front()) return true;
              if (p.text.size() > 3 && p.text.compare(p.text.size() - 3, 3, ".py") == 0)
                return true;
              if (p.text == "torchrun" || p.text == "export") return true;
            }
          }
          break;
        case Statement::Kind::kIf:
          for (const auto& c : s.conditions)
            if (matters(c)) return true;
          for (const auto& b : s.bodies)
            if (matters(b)) return true;
          if (matters(s.else_body)) return true;
          break;
        case Statement::Kind::kAndOr:
          if (matters(s.parts)) return true;
          break;
        case Statement::Kind::kGroup:
        case Statement::Kind::kSkipped:
          for (const auto& b : s.bodies)
            if (matters(b)) return true;
          break;
      }
    }
    return false;
  }

  std::string unknown_list() const {
    std::string s;
    for (const auto& u : last_unknown_) s += (s.empty() ? "" : ", ") + u;
    return s.empty() ? "something not known here" : s;
  }

  Tri run(const Statement& s) {
    Tri st = Tri::kTrue;
    switch (s.kind) {
      case Statement::Kind::kSimple:
        st = run_simple(s);
        break;
      case Statement::Kind::kIf: {
        st = Tri::kTrue;
        bool decided = false;
        for (size_t i = 0; i < s.conditions.size() && !decided; ++i) {
          last_unknown_.clear();
          Tri c = run_list(s.conditions[i]);
          if (c == Tri::kTrue) {
            st = run_list(s.bodies[i]);
            decided = true;
          } else if (c == Tri::kUnknown) {
            bool m = matters(s.else_body);
            for (size_t j = i; j < s.bodies.size(); ++j) m = m || matters(s.bodies[j]);
            if (m)
              note(s.line, cat("skipped an if block: its condition depends on ", unknown_list()));
            decided = true;
          }
        }
        if (!decided && s.has_else) st = run_list(s.else_body);
        break;
      }
      case Statement::Kind::kAndOr: {
        last_unknown_.clear();
        st = run(s.parts[0]);
        for (size_t i = 0; i < s.ops.size(); ++i) {
          if (st == Tri::kUnknown) {
            StatementList rest(s.parts.begin() + static_cast<long>(i) + 1, s.parts.end());
            if (matters(rest))
              note(s.line, cat("skipped the part after '", s.ops[i],
                               "': the test before it depends on ", unknown_list()));
            break;
          }
          bool go = (s.ops[i] == "&&") == (st == Tri::kTrue);
          if (go) st = run(s.parts[i + 1]);
        }
        break;
      }
      case Statement::Kind::kGroup:
        st = run_list(s.bodies[0]);
        break;
      case Statement::Kind::kSkipped:
        if (matters(s.bodies[0]))
          note(s.line, cat("skipped a ", s.what, ": loops, case and functions are not followed"));
        st = Tri::kTrue;
        break;
    }
    return s.negate ? tri_not(st) : st;
  }

  Tri run_simple(const Statement& s) {
    size_t k = 0;
    // Leading assignments; alone they set variables, before a command they only set its
    // environment.
    while (k < s.items.size()) {
      const Token& t = s.items[k];
      if (t.kind == TokKind::kArray || split_assignment(t.word)) {
        ++k;
      } else {
        break;
      }
    }
    if (k == s.items.size()) {
      for (const Token& t : s.items) do_assignment_item(t, s.line);
      return Tri::kTrue;
    }
    const Token& cmd_tok = s.items[k];
    if (cmd_tok.kind == TokKind::kArray) return Tri::kTrue;
    auto head = cmd_tok.word.plain();
    if (head && (*head == "export" || *head == "declare" || *head == "typeset" ||
                 *head == "local" || *head == "readonly")) {
      for (size_t i = k + 1; i < s.items.size(); ++i) {
        const Token& t = s.items[i];
        if (t.kind == TokKind::kWord) {
          auto p = t.word.plain();
          if (p && !p->empty() && (*p)[0] == '-') continue;
        }
        do_assignment_item(t, s.line);
      }
      return Tri::kTrue;
    }
    if (head && *head == "unset") {
      for (size_t i = k + 1; i < s.items.size(); ++i) {
        auto p = s.items[i].word.plain();
        if (p && !opt_.vars.count(*p)) vars_.erase(*p);
      }
      return Tri::kTrue;
    }
    std::vector<ShellField> words;
    for (size_t i = k; i < s.items.size(); ++i) {
      const Token& t = s.items[i];
      if (t.kind == TokKind::kArray) continue;
      auto f = expand_word(t.word, s.line);
      words.insert(words.end(), f.begin(), f.end());
    }
    if (words.empty()) return Tri::kTrue;
    const std::string& prog = words[0].text;
    if (prog == "[" || prog == "test" || prog == "[[") {
      std::vector<ShellField> args(words.begin() + 1, words.end());
      std::string close = prog == "[" ? "]" : prog == "[[" ? "]]" : "";
      if (!close.empty()) {
        if (args.empty() || args.back().text != close) {
          note(s.line, cat("'", prog, "' without '", close, "': the test is unknown"));
          return Tri::kUnknown;
        }
        args.pop_back();
      }
      size_t p = 0;
      test_line_ = s.line;
      Tri t = test_or(args, p, prog == "[[");
      if (p != args.size()) {
        note(s.line, "test not understood: its result is unknown");
        return Tri::kUnknown;
      }
      return t;
    }
    if (prog == "true" || prog == ":") return Tri::kTrue;
    if (prog == "false") return Tri::kFalse;
    if (prog == "source" || prog == ".") {
      note(s.line, cat("did not read the sourced file ", words.size() > 1 ? words[1].text : ""));
      return Tri::kTrue;
    }
    if (prog == "shift" || prog == "set" || prog == "exit" || prog == "return" || prog == "cd" ||
        prog == "echo" || prog == "printf" || prog == "mkdir")
      return Tri::kTrue;
    out_.commands.push_back({s.line, std::move(words)});
    return Tri::kTrue;
  }

  // --- tests ---------------------------------------------------------------------------------

  Tri unknown_from(const std::vector<const ShellField*>& fs) {
    for (const auto* f : fs) merge_unknown(last_unknown_, f->unknown);
    return Tri::kUnknown;
  }

  Tri test_or(const std::vector<ShellField>& a, size_t& p, bool dbl) {
    Tri v = test_and(a, p, dbl);
    while (p < a.size() && (a[p].text == "-o" || a[p].text == "||")) {
      ++p;
      v = tri_or(v, test_and(a, p, dbl));
    }
    return v;
  }
  Tri test_and(const std::vector<ShellField>& a, size_t& p, bool dbl) {
    Tri v = test_not(a, p, dbl);
    while (p < a.size() && (a[p].text == "-a" || a[p].text == "&&")) {
      ++p;
      v = tri_and(v, test_not(a, p, dbl));
    }
    return v;
  }
  Tri test_not(const std::vector<ShellField>& a, size_t& p, bool dbl) {
    Nesting nesting(depth_, test_line_, "test operators ! and (");
    if (p < a.size() && a[p].text == "!" && a[p].resolved()) {
      ++p;
      return tri_not(test_not(a, p, dbl));
    }
    return test_primary(a, p, dbl);
  }
  Tri test_primary(const std::vector<ShellField>& a, size_t& p, bool dbl) {
    if (p >= a.size()) return Tri::kFalse;
    if (a[p].text == "(" && a[p].resolved()) {
      ++p;
      Tri v = test_or(a, p, dbl);
      if (p < a.size() && a[p].text == ")") ++p;
      return v;
    }
    static const std::set<std::string> binops = {"=",   "==",  "!=",  "-eq", "-ne", "-lt",
                                                 "-le", "-gt", "-ge", "=~",  "<",   ">"};
    if (p + 2 < a.size() && binops.count(a[p + 1].text)) {
      const ShellField& l = a[p];
      const std::string op = a[p + 1].text;
      const ShellField& r = a[p + 2];
      p += 3;
      if (!l.resolved() || !r.resolved()) return unknown_from({&l, &r});
      if (op == "=" || op == "==")
        return tri_of(dbl ? glob_match(l.text, r.text) : l.text == r.text);
      if (op == "!=") return tri_of(dbl ? !glob_match(l.text, r.text) : l.text != r.text);
      if (op == "<") return tri_of(l.text < r.text);
      if (op == ">") return tri_of(l.text > r.text);
      if (op == "=~") return Tri::kUnknown;
      auto x = parse_int(l.text), y = parse_int(r.text);
      if (!x || !y) return Tri::kUnknown;
      if (op == "-eq") return tri_of(*x == *y);
      if (op == "-ne") return tri_of(*x != *y);
      if (op == "-lt") return tri_of(*x < *y);
      if (op == "-le") return tri_of(*x <= *y);
      if (op == "-gt") return tri_of(*x > *y);
      return tri_of(*x >= *y);
    }
    const std::string& t = a[p].text;
    if (t.size() == 2 && t[0] == '-' && p + 1 < a.size() && a[p].resolved()) {
      const ShellField& arg = a[p + 1];
      p += 2;
      if (t == "-n" || t == "-z") {
        if (!arg.resolved()) return unknown_from({&arg});
        return tri_of((t == "-n") == !arg.text.empty());
      }
      if (t == "-v") return tri_of(lookup(arg.text).has_value());
      // File tests (-f, -d, -e, ...) depend on the machine the script runs on.
      last_unknown_.push_back(cat("the file test ", t, " ", arg.text));
      return Tri::kUnknown;
    }
    const ShellField& one = a[p++];
    if (!one.resolved()) return unknown_from({&one});
    return tri_of(!one.text.empty());
  }
};

}  // namespace

ShellScript read_shell_script(const std::string& text, const ShellReadOptions& options) {
  Lexer lexer(text);
  Parser parser(lexer.run());
  StatementList program = parser.parse_all();
  Evaluator ev(options);
  return ev.run(program);
}

}  // namespace mplan
