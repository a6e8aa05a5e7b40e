// mplan_cli_fuzz: a seeded mutation fuzzer of plan files, launch scripts (`mplan import`), run
// reports (`mplan accuracy`) and command-line flags of every command but calibrate and preprocess.
// Each mutant runs run_mplan() (the whole `mplan` command line) in a forked child with its output
// discarded, and
// must end with exit code 0, 1 or 2 — never 3 (a broken invariant), another code, an escaped
// exception ("mplan: failed: ..."), a signal, or a hang (the child's alarm). Invariant: the
// mutants depend only on --seed and the shipped configs, so a failure is reproduced by its seed and
// index; every failing input is written to --crashers DIR for the regression corpus.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/mplan_app.hpp"
#include "src/common/json_reader.hpp"

// AddressSanitizer's build flag: GCC defines __SANITIZE_ADDRESS__, clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define MPLAN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MPLAN_ASAN 1
#endif
#endif
#ifndef MPLAN_ASAN
#define MPLAN_ASAN 0
#endif

namespace fs = std::filesystem;

namespace {

using Rng = std::mt19937_64;
using mplan::Json;

// ---- Inputs ---------------------------------------------------------------------------------

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The files of `dir` (and its folders) that end in `ext`, in name order.
std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The shipped plans (configs/plans and its folders) and the fuzzer's own seeds of the newest plan
// fields (tests/cli/fuzz/seeds: MLA, MTP, fp8/fp4 recipes, pipeline layouts and splits, Megatron-
// FSDP, the precision-aware optimizer, implementations, ramp-up, context-parallel exchanges,
// pipeline p2p overlap, activation and optimizer offloading) with their model and cluster
// written out, so mutations reach every field.
std::vector<Json> seed_plans(const fs::path& source) {
  std::vector<Json> plans;
  std::vector<fs::path> files = files_in(source / "configs/plans", ".json");
  for (const fs::path& f : files_in(source / "tests/cli/fuzz/seeds", ".json")) files.push_back(f);
  for (const fs::path& f : files) {
    Json p = Json::parse(read_file(f));
    for (const char* kind : {"model", "cluster"}) {
      if (!p[kind].is_string()) continue;
      const std::string dir = std::string(kind) + "s";
      p[kind] =
          Json::parse(read_file(source / "configs" / dir / (p[kind].get<std::string>() + ".json")));
    }
    plans.push_back(std::move(p));
  }
  std::sort(plans.begin(), plans.end(),
            [](const Json& a, const Json& b) { return a.dump() < b.dump(); });
  // The layout of the issue: groups that straddle nodes (tp 4 · pp 8 · dp 3 on 8-GPU nodes).
  plans.push_back(Json::parse(R"({"schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-h100",
      "parallel": {"tp": 4, "pp": 8, "dp": 3, "micro_batch_size": 1, "global_batch_size": 96}})"));
  plans.push_back(
      Json::parse(R"({"schema_version": 1, "model": "mixtral-8x7b", "cluster": "dgx-h100",
      "parallel": {"tp": 2, "ep": 4, "pp": 2, "dp": 4, "micro_batch_size": 1,
                   "global_batch_size": 64, "sequence_parallel": true}})"));
  return plans;
}

// Megatron-LM launch scripts for `mplan import`: the importer's fixtures and the CLI's.
std::vector<std::string> seed_scripts(const fs::path& source) {
  std::vector<std::string> scripts;
  for (const char* dir : {"tests/src/interop/megatron/fixtures", "tests/cli/fixtures"})
    for (const fs::path& f : files_in(source / dir, ".sh")) scripts.push_back(read_file(f));
  return scripts;
}

// Command lines whose flags are mutated ("{out}" is the child's scratch file, "{outdir}" a scratch
// folder, "{report}" a run report of a shipped plan for `mplan accuracy`). `mplan run` trains the
// tiny CPU plans only, and its flags take only small edge values (a mutant trains for seconds).
std::vector<std::vector<std::string>> seed_commands(const fs::path& source) {
  const std::string plans = (source / "configs/plans").string() + "/";
  const std::string scripts = (source / "tests/src/interop/megatron/fixtures").string() + "/";
  const std::string seeds = (source / "tests/cli/fuzz/seeds").string() + "/";
  std::vector<std::vector<std::string>> cmds = {
      {"export", "--megatron", plans + "gpt3-1.3b-tp2-pp2.json", "--format", "args",
       "--train-iters", "100", "--stack", "megatron-local", "--out", "{out}"},
      {"export", "--megatron", seeds + "llama3-8b-b200-mxfp8-fsdp.json", "--format", "json",
       "--legacy-rampup"},
      {"export", "--megatron", seeds + "deepseek-v3-mla-mtp-fp8.json", "--stack", "megatron",
       "--out", "{out}"},
      {"import", "--megatron", scripts + "deepseek_v3_flex_pp16.sh", "--cluster", "dgx-h100",
       "--var", "NUM_NODES=4", "--gpus", "64", "--out", "{out}"},
      {"import", "--megatron", scripts + "llama3_8b_gb200_mxfp8.sh", "--vocab-size", "128256",
       "--name", "fuzz", "--json", "--out", "{out}"},
      {"accuracy", "{report}", "--cluster", "h200x4", "--out-dir", "{outdir}", "--title", "t"},
      {"run", plans + "tiny-gpt.json", "--backend", "cpu", "--iters", "2", "--warmup", "1",
       "--train-iters", "3", "--eval-interval", "2", "--eval-iters", "1", "--lr", "0.001", "--json",
       "{out}"},
      {"run", plans + "tiny-gpt-tp2-sp.json", "--backend", "cpu", "--iters", "1", "--warmup", "0",
       "--seed", "7", "--lr-decay-style", "cosine", "--clip-grad", "1"},
      {"sweep", "--gpus", "8", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--global-batch",
       "64", "--top", "3", "--out", "{out}"},
      {"sweep", "--gpus", "16", "--model", "llama3-8b", "--cluster", "dgx-h100", "--fix", "tp=2",
       "--memory-headroom", "10", "--threads", "1", "--out", "{out}"},
      {"sweep", "--gpus", "4", "--model", "gpt3-1.3b", "--cluster", "h200x4", "--seq-length",
       "1024", "--objective", "memory", "--json", "--out", "{out}"},
      {"show-schedule", "--pp", "4", "--microbatches", "8", "--vpp", "2", "--forward-cost", "1",
       "--backward-cost", "2"},
      {"show-schedule", "--pp", "4", "--microbatches", "8", "--schedule", "zb-h1", "--width", "60",
       "--svg", "{out}"},
      {"show-groups", "--tp", "2", "--pp", "2", "--dp", "2", "--cp", "1", "--gpus-per-node", "8"},
      {"show-groups", "--tp", "4", "--pp", "2", "--dp", "4", "--ep", "2", "--rank", "5", "--json"},
      {"microbatches", "--global-batch", "64", "--micro-batch", "4", "--dp", "4"},
      {"microbatches", "--global-batch", "1536", "--micro-batch", "1", "--dp", "64", "--rampup",
       "64", "64", "1000000", "--consumed-samples", "0", "500000"},
  };
  return cmds;
}

// A run report of `plan` as `mplan run --json` writes it ("{plan}" is the plan file's path).
Json run_report(const Json& plan) {
  Json r = {
      {"schema_version", 2},
      {"plan", "{plan}"},
      {"summary", {{"median_ms", 1234.5}}},
      {"memory", {{"ranks", Json::array({{{"rank", 0}, {"device_peak_bytes", 40L << 30}}})}}}};
  r["parallel"] = plan.is_object() && plan.contains("parallel") ? plan["parallel"] : Json();
  return r;
}

// ---- Mutations ------------------------------------------------------------------------------

// Values that sit on the edges of every range and type.
const std::vector<std::string>& edge_texts() {
  static const std::vector<std::string> v = {"0",
                                             "-1",
                                             "1",
                                             "2",
                                             "3",
                                             "7",
                                             "96",
                                             "100",
                                             "1024",
                                             "1048577",
                                             "2147483648",
                                             "4294967296",
                                             "1e999",
                                             "-1e999",
                                             "1e308",
                                             "1e-308",
                                             "0.5",
                                             "1e29",
                                             "nan",
                                             "inf",
                                             "-0",
                                             "\"\"",
                                             "\"x\"",
                                             "true",
                                             "null",
                                             "[]",
                                             "{}",
                                             "[[1, 2]]",
                                             "9223372036854775807",
                                             "9223372036854775808",
                                             "18446744073709551616",
                                             "1099511627776"};
  return v;
}

// The edges for `mplan run`'s flags: none asks for more than a few iterations.
const std::vector<std::string>& small_edge_texts() {
  static const std::vector<std::string> v = {
      "0",   "-1",    "1",    "2",     "3",    "-0",         "0.5",        "nan",
      "inf", "1e999", "\"\"", "\"x\"", "true", "2147483648", "4294967296", "9223372036854775808"};
  return v;
}

template <class T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

// Every (container, key or index) of a document, for picking a random leaf or object.
void collect(Json& j, std::vector<Json*>& values, std::vector<Json*>& objects) {
  values.push_back(&j);
  if (j.is_object()) objects.push_back(&j);
  if (!j.is_structured()) return;
  for (auto& child : j) collect(child, values, objects);
}

// A structural mutation of a parsed plan.
void mutate_tree(Json& plan, Rng& rng) {
  std::vector<Json*> values, objects;
  collect(plan, values, objects);
  if (objects.empty()) objects.push_back(&plan);  // (then only the root, which may be no object)
  Json& v = *pick(rng, values);
  switch (std::uniform_int_distribution<int>(0, 8)(rng)) {
    case 0:  // an edge value (as JSON text, so 1e999 stays what it is at the text level below)
    case 1:
      v = Json("@@EDGE:" + pick(rng, edge_texts()) + "@@");
      break;
    case 7:  // a plausible size, so that more mutants pass validation and are simulated
    case 8:
      if (v.is_number_integer())
        v = pick(rng, std::vector<int64_t>{1,  2,  3,  4,  5,   6,   8,   12,  16,   24,
                                           32, 48, 64, 96, 128, 192, 256, 512, 1024, 4096});
      break;
    case 2: {  // remove a key
      Json& o = *pick(rng, objects);
      if (!o.is_object() || o.empty()) break;
      const auto n = static_cast<long>(o.size());
      o.erase(std::next(o.begin(), std::uniform_int_distribution<long>(0, n - 1)(rng)).key());
      break;
    }
    case 3:  // an unknown key
      if (Json& o = *pick(rng, objects); o.is_object()) o["fuzz_key"] = 1;
      break;
    case 4: {  // a preset name, an unknown one, or a path where a section is expected
      static const std::vector<std::string> refs = {
          "gpt3-175b", "llama3-405b", "mixtral-8x7b",        "dgx-h100",     "h200x4", "nope",
          "/",         "/dev/zero",   "/nonexistent/x.json", "configs/plans"};
      if (plan.is_object()) (rng() % 2 ? plan["model"] : plan["cluster"]) = pick(rng, refs);
      break;
    }
    case 5:  // multiply a number by a power of two (no overflow in the fuzzer itself)
      if (v.is_number_integer() && std::abs(v.get<int64_t>()) < (int64_t{1} << 20))
        v = v.get<int64_t>() * (int64_t{1} << (rng() % 40));
      if (v.is_number_float())
        v = v.get<double>() * std::ldexp(1.0, static_cast<int>(rng() % 200) - 100);
      break;
    default:  // nest a value
      v = Json::array({v});
      break;
  }
}

// Text-level mutations: what no structured mutation makes (duplicate keys, broken syntax, deep
// nesting, out-of-range literals).
std::string mutate_text(std::string text, Rng& rng) {
  if (text.empty()) text = "{}";
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0: {  // duplicate a "key": value pair
      const size_t at =
          text.find("\": ", std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng));
      const size_t start = at == std::string::npos ? std::string::npos : text.rfind('"', at - 1);
      const size_t end = at == std::string::npos ? at : text.find_first_of(",}", at);
      if (start != std::string::npos && end != std::string::npos)
        text.insert(end, ", " + text.substr(start, end - start));
      break;
    }
    case 1:  // flip a byte
      if (!text.empty()) text[rng() % text.size()] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 2:  // truncate
      text.resize(rng() % (text.size() + 1));
      break;
    case 3: {  // nest deeply around the whole document or a value
      const size_t depth = pick(rng, std::vector<size_t>{31, 32, 33, 1000, 100000});
      text = std::string(depth, '[') + text + std::string(depth, ']');
      break;
    }
    case 4:  // an exponent out of range inside a number
      if (size_t p = text.find_first_of("123456789", rng() % (text.size() + 1));
          p != std::string::npos)
        text.insert(p + 1, "e999");
      break;
    default:  // insert a random character
      text.insert(rng() % (text.size() + 1), 1, static_cast<char>(rng() % 128));
      break;
  }
  return text;
}

// The plan text with its edge markers replaced by raw JSON text.
std::string render(const Json& plan) {
  std::string s = plan.dump(1);
  for (size_t p; (p = s.find("\"@@EDGE:")) != std::string::npos;) {
    const size_t end = s.find("@@\"", p + 8);
    // dump() escaped the quotes of string edges: drop the backslashes.
    std::string raw;
    for (size_t i = p + 8; i < end; ++i)
      if (s[i] != '\\' || i + 1 >= end || s[i + 1] != '"') raw.push_back(s[i]);
    s = s.substr(0, p) + raw + s.substr(end + 3);
  }
  return s;
}

// A flag value mutation of a command line: an edge value, a dropped or repeated flag, garbage.
std::vector<std::string> mutate_command(std::vector<std::string> args, Rng& rng) {
  const int n = 1 + static_cast<int>(rng() % 3);
  const std::vector<std::string>& edges = args[0] == "run" ? small_edge_texts() : edge_texts();
  for (int k = 0; k < n && args.size() > 1; ++k) {
    const size_t i = 1 + rng() % (args.size() - 1);
    switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
      case 0:
      case 1:
      case 2: {
        std::string e = pick(rng, edges);
        if (e.size() >= 2 && e.front() == '"') e = e.substr(1, e.size() - 2);
        if (args[i].rfind("--", 0) != 0) args[i] = e;
        break;
      }
      case 3:  // drop an argument
        args.erase(args.begin() + static_cast<long>(i));
        break;
      case 4:  // repeat one
        args.insert(args.begin() + static_cast<long>(i), args[i]);
        break;
      default:
        args[i] = pick(rng, std::vector<std::string>{"--bogus", "-", "", "--gpus", "tp=99999",
                                                     "/dev/zero", "--json", "--full"});
        break;
    }
  }
  return args;
}

// Bash nesting `depth` deep around a statement: arithmetic, substitutions, subshells, groups,
// tests.
std::string nested_bash(Rng& rng) {
  struct Form {
    const char *open, *inner, *close;
  };
  static const std::vector<Form> forms = {
      {"$((", "1", "))"},   {"(", "1", ")"},       {"${X:-", "1", "}"},
      {"( ", "true", " )"}, {"{ ", "true;", " }"}, {"if true; then ", "true;", " fi;"}};
  const Form& f = pick(rng, forms);
  const size_t depth = pick(rng, std::vector<size_t>{63, 64, 65, 1000, 20000});
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += f.open;
  s += f.inner;
  for (size_t i = 0; i < depth; ++i) s += f.close;
  if (f.inner[0] == '1') return "N=" + (f.open[0] == '(' ? "$((" + s + "))" : s);
  return s;
}

// A mutation of a launch script: a number or a line changed, deep nesting, arithmetic that bash
// stops at or wraps around, a value that doubles itself, or a text-level mutation.
std::string mutate_script(std::string text, Rng& rng) {
  if (text.empty()) text = "\n";
  const size_t at = text.find('\n', rng() % text.size());
  const size_t line_end = at == std::string::npos ? text.size() : at;
  const size_t line_start = text.rfind('\n', line_end == 0 ? 0 : line_end - 1);
  const size_t b = line_start == std::string::npos || line_start >= line_end ? 0 : line_start + 1;
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 0: {  // a number becomes an edge value
      const size_t p = text.find_first_of("0123456789", rng() % text.size());
      if (p == std::string::npos) break;
      const size_t e = text.find_first_not_of("0123456789", p);
      text.replace(p, (e == std::string::npos ? text.size() : e) - p, pick(rng, edge_texts()));
      break;
    }
    case 1:  // a line dropped
      text.erase(b, line_end - b);
      break;
    case 2:  // a line repeated
      text.insert(b, text.substr(b, line_end - b) + "\n");
      break;
    case 3:
      text.insert(b, nested_bash(rng) + "\n");
      break;
    case 4:
      text.insert(b, pick(rng, std::vector<std::string>{
                                   "GPUS_PER_NODE=$((8 / 0))\n", "NNODES=$((1 % 0))\n",
                                   "N=$((9223372036854775807 + 1))\n", "N=$((09))\n",
                                   "N=$((-9223372036854775807 - 1))\nM=$((N / -1))\n"}));
      break;
    case 5: {  // a value doubling itself
      std::string d = "X=a\n";
      for (int k = 0; k < 64; ++k) d += "X=$X$X\n";
      text.insert(b, d);
      break;
    }
    default:
      text = mutate_text(text, rng);
      break;
  }
  return text;
}

// ---- Running one mutant ---------------------------------------------------------------------

struct Mutant {
  std::string label;              // "validate", "sweep", ...
  std::vector<std::string> args;  // "{plan}": the mutant plan file; "{script}", "{report}" alike
  std::string plan_text;          // empty: no plan file
  std::string script_text;        // empty: no launch script
  std::string report_text;        // empty: no run report ("{plan}" in it: the plan file's path)
};

enum class Outcome { kExit0, kExit1, kExit2, kBadExit, kEscaped, kSignal, kHang };
const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::kExit0:
      return "exit 0";
    case Outcome::kExit1:
      return "exit 1";
    case Outcome::kExit2:
      return "exit 2";
    case Outcome::kBadExit:
      return "other exit code";
    case Outcome::kEscaped:
      return "escaped exception";
    case Outcome::kSignal:
      return "signal";
    case Outcome::kHang:
      return "hang";
  }
  return "?";
}
bool allowed(Outcome o) {
  return o == Outcome::kExit0 || o == Outcome::kExit1 || o == Outcome::kExit2;
}

struct Scratch {
  fs::path dir, plan, script, report, out, outdir, err;
};

std::vector<std::string> expand(const Mutant& m, const Scratch& s) {
  const std::map<std::string, std::string> paths = {{"{plan}", s.plan.string()},
                                                    {"{script}", s.script.string()},
                                                    {"{report}", s.report.string()},
                                                    {"{out}", s.out.string()},
                                                    {"{outdir}", s.outdir.string()}};
  std::vector<std::string> a{"mplan"};
  for (const std::string& x : m.args) a.push_back(paths.count(x) ? paths.at(x) : x);
  return a;
}

// Writes the mutant's files into the scratch folder.
void write_inputs(const Mutant& m, const Scratch& s) {
  if (!m.plan_text.empty()) std::ofstream(s.plan, std::ios::binary) << m.plan_text;
  if (!m.script_text.empty()) std::ofstream(s.script, std::ios::binary) << m.script_text;
  std::string report = m.report_text;
  for (size_t p; (p = report.find("{plan}")) != std::string::npos;)
    report.replace(p, 6, s.plan.string());
  if (!report.empty()) std::ofstream(s.report, std::ios::binary) << report;
}

// Runs run_mplan in a child: stdout discarded, stderr to a file, memory and time capped.
Outcome run_child(const Mutant& m, const Scratch& s, int timeout_s, std::string& err) {
  write_inputs(m, s);
  const std::vector<std::string> args = expand(m, s);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen(s.err.c_str(), "w", stderr);
    std::freopen("/dev/null", "r", stdin);
#if !MPLAN_ASAN  // AddressSanitizer reserves more address space than any limit
    const rlimit mem{size_t{4} << 30, size_t{4} << 30};  // a runaway allocation fails, not the host
    ::setrlimit(RLIMIT_AS, &mem);
#endif
    ::alarm(static_cast<unsigned>(timeout_s));
    std::vector<char*> argv;
    for (const std::string& x : args) argv.push_back(const_cast<char*>(x.c_str()));
    argv.push_back(nullptr);
    const int code = mplan::cli::run_mplan(static_cast<int>(args.size()), argv.data());
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  err = read_file(s.err);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGALRM ? Outcome::kHang : Outcome::kSignal;
  switch (WEXITSTATUS(status)) {
    case 0:
      return Outcome::kExit0;
    case 1:
      return err.find("mplan: failed:") != std::string::npos ? Outcome::kEscaped : Outcome::kExit1;
    case 2:
      return Outcome::kExit2;
    default:
      return Outcome::kBadExit;
  }
}

// ---- The campaign ---------------------------------------------------------------------------

struct Seeds {
  std::vector<Json> plans;
  std::vector<std::string> scripts;
  std::vector<std::vector<std::string>> commands;
};

// A mutated command line; `mplan accuracy` gets a run report of a shipped plan.
Mutant command_mutant(const Seeds& seeds, Rng& rng) {
  Mutant m;
  m.args = mutate_command(pick(rng, seeds.commands), rng);
  if (m.args.front() == "sweep") {  // bounded by the sweep's own guard, never mutated
    m.args.push_back("--time-limit");
    m.args.push_back("10");
  }
  if (std::find(m.args.begin(), m.args.end(), "{report}") != m.args.end()) {
    const Json& plan = pick(rng, seeds.plans);
    m.plan_text = render(plan);
    m.report_text = run_report(plan).dump(1);
  }
  m.label = m.args.front();
  return m;
}

// A mutated launch script through `mplan import`.
Mutant script_mutant(const Seeds& seeds, Rng& rng) {
  Mutant m;
  m.script_text = pick(rng, seeds.scripts);
  const int mutations = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < mutations; ++k) m.script_text = mutate_script(m.script_text, rng);
  static const std::vector<std::vector<std::string>> uses = {
      {"import", "--megatron", "{script}", "--out", "{out}"},
      {"import", "--megatron", "{script}", "--json", "--var", "1=8", "--out", "{out}"},
  };
  m.args = pick(rng, uses);
  m.label = "import SCRIPT";
  return m;
}

Mutant make_mutant(const Seeds& seeds, Rng& rng) {
  if (rng() % 4 == 0) return command_mutant(seeds, rng);
  if (rng() % 6 == 0) return script_mutant(seeds, rng);
  Mutant m;
  Json plan = pick(rng, seeds.plans);
  const int tree_mutations = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < tree_mutations; ++k) mutate_tree(plan, rng);
  m.plan_text = render(plan);
  if (rng() % 4 == 0) m.plan_text = mutate_text(m.plan_text, rng);
  static const std::vector<std::vector<std::string>> uses = {
      {"validate", "{plan}"},
      {"validate", "{plan}", "--json"},
      {"simulate", "{plan}"},
      {"simulate", "{plan}", "--json", "--trace", "{out}"},
      {"simulate", "{plan}", "--full-grid", "--allow-oom"},
      {"show-schedule", "--plan", "{plan}"},
      {"compare", "{plan}", "{plan}"},
      {"export", "--megatron", "{plan}", "--format", "args"},
      {"export", "--megatron", "{plan}", "--out", "{out}"},
      {"accuracy", "{report}"},
  };
  m.args = pick(rng, uses);
  if (m.args.front() == "accuracy") {  // a report of the mutant, sometimes mutated itself
    Json report = run_report(plan);
    if (rng() % 2 == 0) mutate_tree(report, rng);
    m.report_text = render(report);
  }
  m.label = m.args.front() + " PLAN";
  return m;
}

struct Tally {
  std::map<std::string, std::map<std::string, int64_t>> by_label;  // label -> outcome -> count
  std::map<std::string, int64_t> total;
  int64_t failures = 0;
};

// NAME.args with NAME.json (the plan), NAME.sh (the script) and NAME.report (the run report,
// naming NAME.json beside it) in the form of tests/cli/fixtures/crashers.
void save_crasher(const fs::path& dir, uint64_t seed, int64_t index, const Mutant& m) {
  fs::create_directories(dir);
  const std::string stem = "seed" + std::to_string(seed) + "_" + std::to_string(index);
  const std::map<std::string, std::string> names = {{"{plan}", "$PLAN"},
                                                    {"{out}", "$OUT"},
                                                    {"{outdir}", "$OUT"},
                                                    {"{script}", "$FIXTURES/" + stem + ".sh"},
                                                    {"{report}", "$FIXTURES/" + stem + ".report"}};
  std::ofstream args(dir / (stem + ".args"));
  for (const std::string& a : m.args) args << (names.count(a) ? names.at(a) : a) << "\n";
  if (!m.plan_text.empty()) std::ofstream(dir / (stem + ".json"), std::ios::binary) << m.plan_text;
  if (!m.script_text.empty())
    std::ofstream(dir / (stem + ".sh"), std::ios::binary) << m.script_text;
  std::string report = m.report_text;
  for (size_t p; (p = report.find("{plan}")) != std::string::npos;)
    report.replace(p, 6, stem + ".json");
  if (!report.empty()) std::ofstream(dir / (stem + ".report"), std::ios::binary) << report;
}

void print_summary(const Tally& t, int64_t mutants, double seconds, uint64_t seed) {
  std::cout << "mplan_cli_fuzz: seed " << seed << ", " << mutants << " mutants in "
            << static_cast<int64_t>(seconds) << " s\n";
  for (const auto& [label, outcomes] : t.by_label) {
    std::cout << "  " << label << ":";
    for (const auto& [o, n] : outcomes) std::cout << "  " << o << " " << n;
    std::cout << "\n";
  }
  std::cout << "  total:";
  for (const auto& [o, n] : t.total) std::cout << "  " << o << " " << n;
  std::cout << "\n  " << t.failures << " failing (signals, hangs, exit codes other than 0, 1, 2, "
            << "escaped exceptions)\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Seeded mutation fuzzer of mplan's plan files and flags"};
  uint64_t seed = 1;
  int64_t mutants = 1000;
  double seconds = 0;
  int timeout_s = 60;
  std::string source = MPLAN_SOURCE_DIR, crashers;
  app.add_option("--seed", seed, "Seed of the mutations (default 1)");
  app.add_option("--mutants", mutants, "Mutants to run (default 1000)");
  app.add_option("--seconds", seconds, "Stop after this many seconds (default: no limit)");
  app.add_option("--timeout", timeout_s, "Seconds after which a run counts as a hang (default 60)");
  app.add_option("--crashers", crashers, "Write every failing input to this directory");
  app.add_option("--source", source, "The source tree (its configs/)");
  CLI11_PARSE(app, argc, argv);

  const Seeds seeds{seed_plans(source), seed_scripts(source), seed_commands(source)};
  Scratch s;
  s.dir = fs::temp_directory_path() / ("mplan_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(s.dir);
  s.plan = s.dir / "plan.json";
  s.script = s.dir / "train.sh";
  s.report = s.dir / "run.json";
  s.out = s.dir / "out";
  s.outdir = s.dir / "outdir";
  s.err = s.dir / "stderr.txt";
  fs::current_path(s.dir);  // a sweep's default best.json lands here

  Rng rng(seed);
  Tally tally;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int64_t i = 0;
  for (; i < mutants && (seconds <= 0 || elapsed() < seconds); ++i) {
    const Mutant m = make_mutant(seeds, rng);
    std::string err;
    const Outcome o = run_child(m, s, timeout_s, err);
    ++tally.by_label[m.label][to_string(o)];
    ++tally.total[to_string(o)];
    if (allowed(o)) continue;
    ++tally.failures;
    std::cout << "FAIL #" << i << " (" << to_string(o) << "): mplan";
    for (const std::string& a : m.args) std::cout << " " << a;
    std::cout << "\n  " << err.substr(0, 400) << "\n";
    if (!crashers.empty()) save_crasher(crashers, seed, i, m);
  }
  print_summary(tally, i, elapsed(), seed);
  fs::remove_all(s.dir);
  return tally.failures == 0 ? 0 : 1;
}
