// FixedAxes: the values `mplan sweep --fix tp=8,pp=16,...` pins, one optional per axis of the
// sweep. Parsing names the flag and the offending item; each axis may be given once. A pinned
// value may lie outside the default search space (e.g. tp 16 across nodes); validate() still
// judges every candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/parallel/parallel_config.hpp"

namespace mplan::sweep {

struct FixedAxes {
  std::optional<int64_t> tp, cp, ep, etp, pp, vpp, dp;
  std::optional<int64_t> micro_batch_size;    // key "mbs" (or "micro_batch_size")
  std::optional<bool> sequence_parallel;      // key "sp": on/off
  std::optional<Recompute> recompute;         // none / selective / full
  std::optional<bool> distributed_optimizer;  // key "dist_opt": on/off
  std::optional<ScheduleKind> schedule;       // gpipe / 1f1b / interleaved / zb-h1
  bool operator==(const FixedAxes&) const = default;
  bool empty() const { return *this == FixedAxes{}; }
};

// Parses "key=value[,key=value...]" (spaces around items ignored; "" gives no fixes). Keys: tp,
// cp, ep, etp, pp, vpp, dp, mbs, sp, recompute, dist_opt, schedule. Throws Error naming `flag`.
FixedAxes parse_fixed_axes(const std::string& text, const std::string& flag = "--fix");

// The same, written back in the canonical key order ("tp=8,pp=16"); "" when nothing is fixed.
std::string to_string(const FixedAxes& f);

}  // namespace mplan::sweep
