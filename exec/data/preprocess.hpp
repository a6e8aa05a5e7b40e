// preprocess_jsonl: Megatron-LM's tools/preprocess_data.py without sentence splitting. Each line
// of a JSON-lines file is one document; for every --json-keys key its text (a string, or a list
// of strings, one sequence each) is tokenized and written to
// <output_prefix>_<key>_document.bin/.idx (token dtype uint16 below 65500 ids, else int32).
// With append_eod a non-empty document ends with the tokenizer's end-of-document id.
// Invariant: the output equals a single-worker run whatever the number of workers (documents
// are written in input order), and no output file appears unless the whole input was read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exec/data/tokenizer.hpp"

namespace mplan::exec {

struct PreprocessOptions {
  std::string input;                           // --input
  std::string output_prefix;                   // --output-prefix
  std::vector<std::string> json_keys{"text"};  // --json-keys
  bool append_eod = false;                     // --append-eod
  int workers = 1;                             // --workers (threads)
};

struct PreprocessProgress {
  int64_t bytes_read = 0, total_bytes = 0, documents = 0, tokens = 0;
  double seconds = 0;
};

struct PreprocessResult {
  int64_t documents = 0, tokens = 0, bytes = 0;
  double seconds = 0;
  std::vector<std::string> output_prefixes;  // one per key: <prefix>_<key>_document
};

// Bad input (unreadable file, a line that is not a JSON object, a missing key, text the
// tokenizer refuses) is an mplan::Error naming the file and line. `progress` is called after
// each batch of lines.
PreprocessResult preprocess_jsonl(const PreprocessOptions& options, const Tokenizer& tokenizer,
                                  const std::function<void(const PreprocessProgress&)>& progress);

}  // namespace mplan::exec
