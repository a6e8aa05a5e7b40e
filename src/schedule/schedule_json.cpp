// schedule_to_json: the --json document, keys in the documented order.
#include "src/schedule/schedule_json.hpp"

namespace mplan {

Json schedule_to_json(const Schedule& s, const Timeline& t) {
  const std::vector<int64_t> peak = peak_inflight(s);
  Json j;
  j["pp"] = s.spec.pp;
  j["microbatches"] = s.spec.microbatches;
  j["vpp"] = s.spec.vpp;
  j["schedule"] = to_string(s.spec.kind);
  Json ranks = Json::array();
  for (int64_t r = 0; r < s.pp(); ++r) {
    Json rank;
    rank["rank"] = r;
    rank["warmup"] = s.warmup[r];
    Json ops = Json::array();
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      Json op;
      op["op"] = to_string(a.kind);
      op["microbatch"] = a.microbatch;
      op["chunk"] = a.chunk;
      if (is_p2p(a.kind)) op["peer"] = a.peer;
      op["start"] = t.start[i];
      op["end"] = t.end[i];
      ops.push_back(std::move(op));
    }
    rank["ops"] = std::move(ops);
    rank["peak_inflight"] = peak[r];
    ranks.push_back(std::move(rank));
  }
  j["ranks"] = std::move(ranks);
  j["makespan"] = t.makespan;
  j["bubble_fraction"] = t.bubble_fraction;
  return j;
}

}  // namespace mplan
