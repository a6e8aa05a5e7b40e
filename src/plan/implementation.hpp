// Implementation: the software stack that runs a plan — mplan's own executor, Megatron-LM with
// Transformer Engine, or Megatron-LM's local implementation. A hardware profile may hold an
// efficiency set per stack (ClusterSpec::gpu_for); the plan's training.implementation picks it.
// Invariant: the names are the plan file's spelling and round-trip through implementation_from.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace mplan {

enum class Implementation : uint8_t {
  kMegatronTe = 0,     // "megatron-te": Megatron-LM, --transformer-impl transformer_engine
  kMegatronLocal = 1,  // "megatron-local": Megatron-LM, --transformer-impl local
  kMplan = 2,          // "mplan": mplan's executor (`mplan run`)
};
inline constexpr int kNumImplementations = 3;
inline constexpr std::array<Implementation, kNumImplementations> kImplementations{
    Implementation::kMegatronTe, Implementation::kMegatronLocal, Implementation::kMplan};

inline const char* to_string(Implementation i) {
  switch (i) {
    case Implementation::kMegatronTe:
      return "megatron-te";
    case Implementation::kMegatronLocal:
      return "megatron-local";
    case Implementation::kMplan:
      return "mplan";
  }
  return "?";
}

// The implementation named `name`, or nothing.
inline std::optional<Implementation> implementation_from(const std::string& name) {
  for (Implementation i : kImplementations)
    if (name == to_string(i)) return i;
  return std::nullopt;
}

// A --stack flag's value: an implementation's name, or "megatron" for megatron-te (Megatron-LM's
// default --transformer-impl).
inline std::optional<Implementation> stack_from(const std::string& name) {
  if (name == "megatron") return Implementation::kMegatronTe;
  return implementation_from(name);
}
inline constexpr const char* kStackNames =
    "megatron (= megatron-te), megatron-te, megatron-local, mplan";

// What each name means, for documentation and error messages.
inline const char* describe(Implementation i) {
  switch (i) {
    case Implementation::kMegatronTe:
      return "Megatron-LM with Transformer Engine";
    case Implementation::kMegatronLocal:
      return "Megatron-LM's local implementation (materialized attention scores)";
    case Implementation::kMplan:
      return "mplan's executor (mplan run)";
  }
  return "?";
}

}  // namespace mplan
