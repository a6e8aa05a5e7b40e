// libFuzzer target of the strict JSON reader: any byte string either parses into a document
// that JsonObject reads without anything but mplan::Error escaping (as a plan would be read), or
// fails with an mplan::Error. Crashes, sanitizer reports and other exceptions are findings.
// Build and run (clang): see tests/src/common/README.md or docs/architecture.md, "Fuzzing".
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"
#include "src/plan/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const mplan::Json j = mplan::parse_json(text, "fuzz.json");
    (void)mplan::json_excerpt(j);
    (void)mplan::plan_from_json(j);  // every section's reader, with its ranges
  } catch (const mplan::Error&) {
    // A user error, reported with a message: the expected outcome for most inputs.
  }
  return 0;
}
