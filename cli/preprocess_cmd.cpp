// `mplan preprocess`: Megatron-LM's tools/preprocess_data.py for GPT-2 BPE (or already-tokenized)
// JSON lines: writes <output-prefix>_<key>_document.bin/.idx that Megatron-LM reads. A progress
// bar on stderr when it is a terminal; the token rate at the end. Bad input: one line naming the
// flag or the file (and line), exit 2; no output file is left behind.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "src/common/error.hpp"

#ifdef MPLAN_HAVE_EXEC
#include "exec/data/gpt2_bpe_tokenizer.hpp"
#include "exec/data/indexed_dataset.hpp"
#include "exec/data/null_tokenizer.hpp"
#include "exec/data/preprocess.hpp"
#endif

namespace mplan::cli {
namespace {

struct PreprocessCliOptions {
  std::string input, output_prefix, vocab_file, merge_file;
  std::string tokenizer_type = "GPT2BPETokenizer";
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  int workers = 1;
  int64_t vocab_size = 0;
};

#ifdef MPLAN_HAVE_EXEC
// "[=========>        ] 45 %  12.3 / 27.0 MB  1.52 M tokens/s" on stderr, redrawn in place.
void draw_progress(const exec::PreprocessProgress& p) {
  constexpr int kWidth = 30;
  const double frac =
      p.total_bytes > 0
          ? std::min(1.0, static_cast<double>(p.bytes_read) / static_cast<double>(p.total_bytes))
          : 0.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const double rate = p.seconds > 0 ? static_cast<double>(p.tokens) / p.seconds : 0;
  std::fprintf(stderr, "\r[%s] %3.0f %%  %.1f / %.1f MB  %.2f M tokens/s\033[K", bar.c_str(),
               frac * 100, static_cast<double>(p.bytes_read) / 1e6,
               static_cast<double>(p.total_bytes) / 1e6, rate / 1e6);
  std::fflush(stderr);
}

void run_preprocess(const PreprocessCliOptions& o) {
  std::unique_ptr<exec::Tokenizer> tokenizer;
  if (o.tokenizer_type == "GPT2BPETokenizer") {
    if (o.vocab_file.empty() || o.merge_file.empty())
      throw Error(
          "--vocab-file and --merge-file: GPT2BPETokenizer needs both (encoder.json and "
          "vocab.bpe)");
    tokenizer = std::make_unique<exec::Gpt2BpeTokenizer>(
        exec::Gpt2BpeTokenizer::from_files(o.vocab_file, o.merge_file));
  } else {
    if (o.vocab_size <= 0) throw Error("--vocab-size: NullTokenizer needs the vocabulary size");
    tokenizer = std::make_unique<exec::NullTokenizer>(o.vocab_size);
  }
  const std::filesystem::path parent = std::filesystem::path(o.output_prefix).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent))
    throw Error(cat("--output-prefix: directory '", parent.string(), "' does not exist"));
  if (!std::filesystem::is_regular_file(o.input))
    throw Error(cat("--input: cannot read '", o.input, "' (no such file)"));
  exec::PreprocessOptions po;
  po.input = o.input;
  po.output_prefix = o.output_prefix;
  po.json_keys = o.json_keys;
  po.append_eod = o.append_eod;
  po.workers = o.workers;
  const bool bar = stderr_is_terminal();
  const exec::PreprocessResult r =
      exec::preprocess_jsonl(po, *tokenizer, bar ? draw_progress : nullptr);
  if (bar) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  const double s = std::max(r.seconds, 1e-9);
  for (const std::string& prefix : r.output_prefixes)
    std::cout << "wrote " << prefix << ".bin and .idx ("
              << exec::to_string(exec::optimal_token_dtype(tokenizer->vocab_size()))
              << " tokens)\n";
  std::cout << r.documents << " documents, " << r.tokens << " tokens from "
            << format_fixed(static_cast<double>(r.bytes) / 1e6, 1) << " MB in "
            << format_fixed(r.seconds, 2)
            << " s: " << format_fixed(static_cast<double>(r.tokens) / s, 0) << " tokens/s, "
            << format_fixed(static_cast<double>(r.bytes) / 1e6 / s, 2) << " MB/s with " << o.workers
            << " worker" << (o.workers == 1 ? "" : "s") << "\n";
}
#endif

void add_preprocess(CLI::App& app) {
  auto opts = std::make_shared<PreprocessCliOptions>();
  auto* cmd =
      app.add_subcommand("preprocess",
                         "Tokenize JSON lines into a Megatron-LM indexed dataset (.bin/.idx), as "
                         "tools/preprocess_data.py does");
  cmd->add_option("--input", opts->input, "JSON-lines file, one document per line")->required();
  cmd->add_option("--output-prefix", opts->output_prefix,
                  "Output path prefix: writes PREFIX_<key>_document.bin and .idx")
      ->required();
  cmd->add_option("--vocab-file", opts->vocab_file,
                  "GPT-2 vocabulary JSON (encoder.json / vocab.json)");
  cmd->add_option("--merge-file", opts->merge_file, "GPT-2 merges (vocab.bpe / merges.txt)");
  cmd->add_option("--tokenizer-type", opts->tokenizer_type,
                  "GPT2BPETokenizer (default) or NullTokenizer (the text is token ids already)")
      ->check(CLI::IsMember({"GPT2BPETokenizer", "NullTokenizer"}));
  cmd->add_option("--vocab-size", opts->vocab_size,
                  "Vocabulary size for NullTokenizer (its end-of-document id is size - 1)");
  cmd->add_option("--json-keys", opts->json_keys,
                  "Keys of the text to tokenize, one output pair each (default: text)")
      ->expected(1, 1 << 10);
  cmd->add_flag("--append-eod", opts->append_eod,
                "End every non-empty document with the end-of-document token");
  cmd->add_option("--workers", opts->workers, "Tokenizer threads (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "The output's token type is uint16 below 65500 ids (GPT-2: 50257), int32 otherwise, as in\n"
      "Megatron-LM. A text may be a string or a list of strings (one sequence each); blank lines\n"
      "are skipped. A progress bar is drawn on stderr when it is a terminal.\n"
      "Examples:\n"
      "  mplan preprocess --input corpus.jsonl --output-prefix data/corpus \\\n"
      "      --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod\n"
      "  mplan preprocess --input ids.jsonl --output-prefix data/ids --tokenizer-type "
      "NullTokenizer \\\n"
      "      --vocab-size 50257 --workers 2\n");
#ifdef MPLAN_HAVE_EXEC
  cmd->callback([opts] { run_preprocess(*opts); });
#else
  cmd->callback([] {
    throw Error("preprocess: this mplan was built without the executor library (MPI not found)");
  });
#endif
}

MPLAN_REGISTER_COMMAND(75, add_preprocess);

}  // namespace
}  // namespace mplan::cli
