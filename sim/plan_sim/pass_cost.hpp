// PassCost: the time of one op on a rank's compute stream, split by what it is spent on (compute
// kernels, exposed tensor-/context-/expert-parallel communication, in-line data-parallel
// communication, the optimizer); and CostItem, one named kernel or collective of a pass, kept
// only for traces. Invariant: an op's duration is its PassCost's total; the items of a pass add up
// to the same total (communication that overlaps compute counts only its exposed part).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace mplan::sim {

enum class Cat : uint8_t { kCompute = 0, kTp, kCp, kEp, kDp, kOptimizer };
inline constexpr int kNumCats = 6;
const char* to_string(Cat c);  // "compute", "tp", "cp", "ep", "dp", "optimizer"

struct PassCost {
  std::array<int64_t, kNumCats> ns{};
  int64_t total_ns() const {
    int64_t t = 0;
    for (int64_t v : ns) t += v;
    return t;
  }
  int64_t operator[](Cat c) const { return ns[static_cast<int>(c)]; }
  void add(Cat c, int64_t v) { ns[static_cast<int>(c)] += v; }
  PassCost& operator+=(const PassCost& o) {
    for (int i = 0; i < kNumCats; ++i) ns[i] += o.ns[i];
    return *this;
  }
  bool operator==(const PassCost&) const = default;
};

inline PassCost operator*(const PassCost& c, int64_t n) {
  PassCost r;
  for (int i = 0; i < kNumCats; ++i) r.ns[i] = c.ns[i] * n;
  return r;
}
inline PassCost operator+(PassCost a, const PassCost& b) { return a += b; }
inline PassCost single_cost(Cat c, int64_t ns) {
  PassCost r;
  r.add(c, ns);
  return r;
}

// One kernel or collective of a pass, for traces: "qkv", "attention", "tp_all_reduce", ...
struct CostItem {
  const char* name = "";  // a string literal
  Cat category = Cat::kCompute;
  bool communication = false;  // a collective or transfer (shown as such in traces)
  bool recompute = false;      // part of a recomputed forward
  int32_t layer = -1;          // global layer index; -1 for embedding, output layer and loss
  int64_t ns = 0;
};

// A pass: its cost and, when recorded, its items in execution order.
struct Pass {
  PassCost cost;
  std::vector<CostItem> items;
  bool record = false;

  void add(const char* name, Cat c, int64_t ns, bool communication = false) {
    cost.add(c, ns);
    if (record && ns > 0) items.push_back({name, c, communication, false, -1, ns});
  }
  // Appends `o` (its items relabelled with `layer` when >= 0, marked recomputed when asked).
  void append(const Pass& o, int32_t layer = -1, bool recompute = false) {
    cost += o.cost;
    if (!record) return;
    for (CostItem it : o.items) {
      if (layer >= 0) it.layer = layer;
      it.recompute = it.recompute || recompute;
      items.push_back(it);
    }
  }
  void clear(bool with_items) {
    cost = {};
    items.clear();
    record = with_items;
  }
};

}  // namespace mplan::sim
