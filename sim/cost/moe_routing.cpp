// MoE routing imbalance. Sources: the maximum of n independent normal variables is about
// μ + σ·sqrt(2·ln n) for large n (the Gaussian extreme-value asymptote; e.g. Cramér 1946, §28.6);
// a Binomial(N, 1/r) load has mean N/r and variance (N/r)(1 − 1/r).
#include "sim/cost/moe_routing.hpp"

#include <cmath>

#include "src/common/error.hpp"

namespace mplan::cost {

double routing_imbalance(double mean_copies, int64_t ranks) {
  MPLAN_CHECK(ranks >= 1 && mean_copies >= 0, "routing_imbalance(", mean_copies, ", ", ranks, ")");
  if (ranks == 1 || mean_copies <= 0) return 1.0;
  const double r = static_cast<double>(ranks);
  return 1.0 + std::sqrt(2.0 * std::log(r) * (1.0 - 1.0 / r) / mean_copies);
}

}  // namespace mplan::cost
