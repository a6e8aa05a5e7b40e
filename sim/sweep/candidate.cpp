// Candidate -> ParallelConfig and its short label. The fields the sweep does not vary keep the
// plan file's defaults, so that parse(to_json(to_parallel(c))) == to_parallel(c).
#include "sim/sweep/candidate.hpp"

#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"

namespace mplan::sweep {

int64_t num_microbatches(const Candidate& c, int64_t global_batch_size) {
  return microbatches_if_valid(global_batch_size, c.micro_batch_size, c.dp).value_or(0);
}

ParallelConfig to_parallel(const Candidate& c, int64_t global_batch_size) {
  ParallelConfig p;
  p.tp = c.tp;
  p.cp = c.cp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.pp = c.pp;
  p.vpp = c.vpp;
  p.dp = c.dp;
  p.sequence_parallel = c.sequence_parallel;
  p.micro_batch_size = c.micro_batch_size;
  p.global_batch_size = global_batch_size;
  p.schedule = c.schedule;
  p.recompute = c.recompute;
  p.recompute_method = RecomputeMethod::kUniform;
  p.recompute_num_layers = 1;
  p.distributed_optimizer = c.distributed_optimizer;
  if (c.first_stage_layers > 0) p.decoder_first_pipeline_num_layers = c.first_stage_layers;
  if (c.last_stage_layers > 0) p.decoder_last_pipeline_num_layers = c.last_stage_layers;
  return p;
}

std::string layout_label(const Candidate& c) {
  std::string s = cat("tp", c.tp);
  if (c.cp > 1) s += cat(" cp", c.cp);
  if (c.ep > 1) s += cat(" ep", c.ep);
  if (c.etp != c.tp) s += cat(" etp", c.etp);
  s += cat(" pp", c.pp);
  if (c.vpp > 1) s += cat(" vpp", c.vpp);
  s += cat(" dp", c.dp);
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0)
    s += cat(" (first ", c.first_stage_layers, ", last ", c.last_stage_layers, " layers)");
  return s;
}

}  // namespace mplan::sweep
