// Routing imbalance of a mixture-of-experts layer: with top-k routing the busiest GPU of an
// expert-parallel group receives more than the average T·k token copies, and the all-to-all and
// the expert GEMMs of a step wait for it. Invariant: the factor is >= 1 and 1 for one GPU.
#pragma once

#include <cstdint>

namespace mplan::cost {

// Expected load of the busiest of `ranks` GPUs over the mean, when `mean_copies` token copies
// per GPU are routed independently and uniformly over the group (a lower bound for a trained
// router, whose choices are correlated): each GPU's load is Binomial(ranks·mean, 1/ranks), and
// the expected maximum of `ranks` such loads is about mean + σ·sqrt(2·ln ranks) (the Gaussian
// extreme-value approximation), so the factor is 1 + sqrt(2·ln(ranks)·(1 − 1/ranks) / mean).
double routing_imbalance(double mean_copies, int64_t ranks);

}  // namespace mplan::cost
