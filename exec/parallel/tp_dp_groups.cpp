// tp_dp_group_members(): Megatron's RankGenerator for order tp-cp-ep-dp-pp with cp = ep = pp = 1.
#include "exec/parallel/tp_dp_groups.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

GroupMembers tp_dp_group_members(int64_t tp, int64_t dp, int world_rank) {
  MPLAN_CHECK(tp >= 1 && dp >= 1 && world_rank >= 0 && world_rank < tp * dp, "tp ", tp, " dp ", dp,
              " rank ", world_rank);
  int64_t tp_rank = world_rank % tp, dp_rank = world_rank / tp;
  GroupMembers g;
  for (int64_t i = 0; i < tp; ++i) g["tp"].push_back(static_cast<int>(dp_rank * tp + i));
  for (int64_t j = 0; j < dp; ++j) g["dp"].push_back(static_cast<int>(tp_rank + tp * j));
  for (int64_t r = 0; r < tp * dp; ++r) g["tp-dp"].push_back(static_cast<int>(r));
  return g;
}

}  // namespace mplan::exec
