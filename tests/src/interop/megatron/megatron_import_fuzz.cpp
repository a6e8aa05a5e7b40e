// libFuzzer target of the launch-script importer: any text is either imported into a plan or
// refused with an mplan::Error naming the argument or line; crashes, sanitizer reports, hangs
// and other exceptions are findings. Calls import_megatron as `mplan import --megatron` does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mplan::ClusterSpec cluster = mplan::load_cluster("dgx-h100");
  const std::string text(reinterpret_cast<const char*>(data), size);
  mplan::MegatronImportOptions options;
  options.cluster = cluster;
  try {
    (void)mplan::import_megatron(text, options);
  } catch (const mplan::Error&) {
    // Refused with a message.
  }
  return 0;
}
