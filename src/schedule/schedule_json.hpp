// JSON form of a schedule and its timeline (the `mplan show-schedule --json` document):
// {"pp", "microbatches", "vpp", "schedule", "ranks": [{"rank", "warmup", "ops": [{"op",
// "microbatch", "chunk", "peer" (p2p only), "start", "end"}], "peak_inflight"}], "makespan",
// "bubble_fraction"}. "op" is "F", "B", "W" or a p2p kind ("send-forward", ...).
#pragma once

#include "src/common/json_reader.hpp"
#include "src/schedule/schedule.hpp"
#include "src/schedule/timeline.hpp"

namespace mplan {

Json schedule_to_json(const Schedule& s, const Timeline& t);

}  // namespace mplan
