// The Hopper attention kernels' tile orders (exec/cuda/attention_layout.cuh), on the host (no GPU
// needed): each is a bijection onto its tiles for any section size, the backward's dQ
// dependencies (a head set's lower key blocks) come before the tiles that wait on them, which is
// what keeps its counter-ordered dQ free of deadlock, and the forward's sections alternate their
// direction with the last one heaviest first.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "exec/cuda/attention_layout.cuh"

namespace mplan::exec::cuda::attention_layout {
namespace {

TEST(AttentionTileOrder, BackwardTilesAreABijectionWithEachHeadSetsKeyBlocksAscending) {
  for (int n_hs = 1; n_hs <= 9; ++n_hs) {
    for (int n_kb = 1; n_kb <= 6; ++n_kb) {
      for (int sec = 1; sec <= n_hs; ++sec) {
        const BwdTileOrder order{n_hs, n_kb, sec};
        ASSERT_EQ(order.count(), n_hs * n_kb);
        std::set<std::pair<int, int>> seen;
        std::vector<int> last_kb(n_hs, -1);
        for (int t = 0; t < order.count(); ++t) {
          int hs = -1, kb = -1;
          order.at(t, hs, kb);
          ASSERT_TRUE(hs >= 0 && hs < n_hs && kb >= 0 && kb < n_kb)
              << "n_hs " << n_hs << " n_kb " << n_kb << " sec " << sec << " t " << t;
          EXPECT_TRUE(seen.insert({hs, kb}).second) << "tile " << t << " repeats";
          // The tile that adds after key block kb - 1 of its head set comes after it.
          EXPECT_EQ(kb, last_kb[hs] + 1) << "n_hs " << n_hs << " sec " << sec << " t " << t;
          last_kb[hs] = kb;
        }
        EXPECT_EQ(static_cast<int>(seen.size()), n_hs * n_kb);
      }
    }
  }
}

TEST(AttentionTileOrder, BackwardSectionsGoHeaviestFirst) {
  // 5 head sets in sections of 2 (2, 2, 1), 3 key blocks: key block 0 of a section's head sets
  // before its key block 1.
  const BwdTileOrder order{5, 3, 2};
  const std::vector<std::pair<int, int>> want = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2},
                                                 {1, 2}, {2, 0}, {3, 0}, {2, 1}, {3, 1},
                                                 {2, 2}, {3, 2}, {4, 0}, {4, 1}, {4, 2}};
  for (int t = 0; t < order.count(); ++t) {
    int hs = -1, kb = -1;
    order.at(t, hs, kb);
    EXPECT_EQ(std::make_pair(hs, kb), want[static_cast<size_t>(t)]) << "t " << t;
  }
}

TEST(AttentionTileOrder, ForwardTilesAreABijectionAndTheLastSectionGoesHeaviestFirst) {
  for (int n_bh = 1; n_bh <= 9; ++n_bh) {
    for (int n_qb = 1; n_qb <= 6; ++n_qb) {
      for (int sec = 1; sec <= n_bh; ++sec) {
        const FwdTileOrder order{n_bh, n_qb, sec};
        const int n_sec = (n_bh + sec - 1) / sec;
        std::set<std::pair<int, int>> seen;
        for (int t = 0; t < n_bh * n_qb; ++t) {
          int bh = -1, qb = -1;
          order.at(t, bh, qb);
          ASSERT_TRUE(bh >= 0 && bh < n_bh && qb >= 0 && qb < n_qb)
              << "n_bh " << n_bh << " n_qb " << n_qb << " sec " << sec << " t " << t;
          EXPECT_TRUE(seen.insert({bh, qb}).second) << "tile " << t << " repeats";
          // A section's first tile: its direction, heaviest first for the last section and
          // alternating before it.
          const int si = bh / sec;
          if (t == si * sec * n_qb) {
            EXPECT_EQ(qb, (n_sec - 1 - si) % 2 == 0 ? n_qb - 1 : 0)
                << "n_bh " << n_bh << " sec " << sec << " section " << si;
          }
        }
        EXPECT_EQ(static_cast<int>(seen.size()), n_bh * n_qb);
      }
    }
  }
}

}  // namespace
}  // namespace mplan::exec::cuda::attention_layout
