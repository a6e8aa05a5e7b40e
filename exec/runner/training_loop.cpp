// TrainingLoop: the iteration loop of pretrain() — steps, log lines, evaluations, checkpoints.
#include "exec/runner/training_loop.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "exec/runner/training_log.hpp"
#include "src/common/error.hpp"
#include "src/model/model_stats.hpp"

namespace mplan::exec {

namespace {

bool same_directory(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  if (std::filesystem::exists(a, ec) && std::filesystem::exists(b, ec))
    return std::filesystem::equivalent(a, b, ec);
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

TraceSnapshot snapshot(Tracer& tracer) {
  TraceSnapshot s;
  for (const Tracer::Timed& t : tracer.timed()) {
    s.spans.push_back(*t.span);
    s.begin_ns.push_back(t.begin_ns);
    s.end_ns.push_back(t.end_ns);
  }
  return s;
}

}  // namespace

std::vector<Tracer::Timed> TraceSnapshot::timed() const {
  std::vector<Tracer::Timed> out;
  for (size_t i = 0; i < spans.size(); ++i) out.push_back({&spans[i], begin_ns[i], end_ns[i]});
  return out;
}

TrainingLoop::TrainingLoop(const Plan& plan, TrainingData data, Backend& backend, CommWorld& world,
                           LoopOptions options)
    : plan_(plan), data_(std::move(data)), be_(backend), world_(world), o_(std::move(options)) {
  MPLAN_CHECK(o_.train_iters >= 1 && o_.log_interval >= 1, "train_iters ", o_.train_iters,
              " log_interval ", o_.log_interval);
  TrainerOptions to = o_.trainer;
  to.data = data_.train;
  to.lr_schedule = o_.lr_schedule;
  trainer_ = std::make_unique<Trainer>(plan_, be_, world_, to);
  if (o_.load) {
    const CheckpointInfo& c = *o_.load;
    print(cat(" loading checkpoint from ", c.root, " at iteration ", c.state.iteration,
              " (saved with ", c.saved_layout, ")\n"));
    load_checkpoint(c, *trainer_);
    consumed_valid_ = c.state.consumed_valid_samples;
    if (same_directory(c.root, o_.save)) last_saved_ = c.state.iteration;
    print(cat(" successfully loaded checkpoint from ", c.root, " at iteration ", c.state.iteration,
              "\n"));
  }
  if (!o_.tensorboard_dir.empty() && world_.world_rank() == 0)
    metrics_ = std::make_unique<MetricsLog>(o_.tensorboard_dir);
}

TrainingLoop::~TrainingLoop() = default;

void TrainingLoop::print(const std::string& s) const {
  if (o_.print && world_.world_rank() == 0) o_.print(s);
}

CheckpointState TrainingLoop::state() const {
  CheckpointState s;
  s.iteration = trainer_->iterations_done();
  s.consumed_train_samples = trainer_->consumed_samples();
  s.consumed_valid_samples = consumed_valid_;
  s.optimizer_steps = trainer_->optimizer_steps();
  s.seed = static_cast<uint64_t>(plan_.training.seed);
  s.train_iters = o_.train_iters;
  s.lr_schedule = o_.lr_schedule;
  s.constant_lr = plan_.training.lr;
  return s;
}

void TrainingLoop::evaluate(const TokenSource& source, const std::string& split,
                            const std::string& prefix, int64_t first_sample,
                            TrainingResult& result) {
  const EvalResult e = trainer_->evaluate(source, first_sample, plan_.training.eval_iters);
  EvalRecord r;
  r.iteration = trainer_->iterations_done();
  r.split = split;
  r.prefix = prefix;
  r.loss = e.loss;
  r.samples = e.samples;
  r.first_sample = first_sample;
  result.evaluations.push_back(r);
  print(format_validation(prefix, e.loss));
  if (metrics_) metrics_->evaluation(r.iteration, split, e.loss);
}

void TrainingLoop::save(TrainingResult& result) {
  const int64_t it = trainer_->iterations_done();
  char it7[32];
  std::snprintf(it7, sizeof it7, "%7lld", static_cast<long long>(it));
  print(cat(" saving checkpoint at iteration ", it7, " to ", o_.save, "\n"));
  const auto t0 = std::chrono::steady_clock::now();
  const SaveResult s = save_checkpoint(o_.save, *trainer_, world_, state(), o_.save_hooks);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last_saved_ = it;
  result.saved.push_back(s.dir);
  char size[64];
  std::snprintf(size, sizeof size, "%.1f MB in %.1f s", static_cast<double>(s.bytes) / 1e6, secs);
  print(cat(" successfully saved checkpoint from iteration ", it7, " to ", o_.save, " (", size,
            ")\n"));
}

TrainingResult TrainingLoop::run() {
  Trainer& t = *trainer_;
  TrainingResult res;
  res.start_iteration = t.iterations_done();
  int64_t end = o_.train_iters;
  if (o_.max_iterations >= 0) end = std::min(end, res.start_iteration + o_.max_iterations);
  const TrainingConfig& tc = plan_.training;
  const double gpus = static_cast<double>(world_.world_size());
  const double peak = plan_.cluster.gpu.peak_bf16_tflops;
  const int64_t seq = plan_.model.seq_length;

  using clock = std::chrono::steady_clock;
  std::optional<IterationRecord> open;
  clock::time_point t0;
  struct {
    double loss = 0, seconds = 0, tokens = 0, flops = 0;
    int64_t advanced = 0, nan = 0, count = 0;
  } interval;
  // Iteration `open` ends at `now`: recorded, written to the metrics, logged at the interval.
  auto finish = [&](clock::time_point now) {
    IterationRecord rec = *open;
    open.reset();
    rec.seconds = std::chrono::duration<double>(now - t0).count();
    res.iterations.push_back(rec);
    const double tokens = static_cast<double>(rec.global_batch * seq);
    const double flops = megatron_flops(plan_.model, rec.global_batch, plan_.parallel.tp);
    if (metrics_)
      metrics_->iteration({rec.iteration, rec.consumed_samples, rec.loss,
                           t.lr_at(rec.consumed_samples), rec.grad_norm, rec.seconds * 1e3,
                           tokens / rec.seconds / gpus, rec.global_batch});
    if (std::isnan(rec.loss)) {
      ++interval.nan;
    } else {
      interval.loss += rec.loss;
      ++interval.advanced;
    }
    ++interval.count;
    interval.seconds += rec.seconds;
    interval.tokens += tokens;
    interval.flops += flops;
    if (rec.iteration % o_.log_interval != 0) return;
    LogInterval l;
    l.iteration = rec.iteration;
    l.train_iters = o_.train_iters;
    l.consumed_samples = rec.consumed_samples;
    l.ms_per_iteration = interval.seconds / static_cast<double>(interval.count) * 1e3;
    l.tflops_per_gpu = interval.flops / interval.seconds / gpus / 1e12;
    l.learning_rate = t.lr_at(rec.consumed_samples);
    l.global_batch_size = rec.global_batch;
    l.lm_loss = interval.loss / static_cast<double>(std::max<int64_t>(1, interval.advanced));
    l.grad_norm = rec.grad_norm;
    l.nan_iterations = interval.nan;
    l.tokens_per_s_per_gpu = interval.tokens / interval.seconds / gpus;
    l.mfu = peak > 0 ? l.tflops_per_gpu / peak : 0;
    print(format_log_line(l) + "\n");
    interval = {};
  };

  for (int64_t i = res.start_iteration; i < end; ++i) {
    const clock::time_point now = clock::now();
    if (open) finish(now);
    t0 = now;
    const StepResult r = t.step();
    const int64_t it = i + 1;
    open = IterationRecord{it,
                           r.loss,
                           r.grad_norm,
                           r.lr,
                           r.num_microbatches,
                           r.global_batch_size,
                           t.consumed_samples(),
                           0};
    const bool eval_due = data_.valid && tc.eval_interval > 0 && it % tc.eval_interval == 0;
    const bool save_due = !o_.save.empty() && o_.save_interval > 0 && it % o_.save_interval == 0;
    const bool last = it == end;
    if (eval_due || save_due || last) {
      be_.synchronize();
      finish(clock::now());
    }
    if (last && t.tracer() != nullptr) res.last_trace = snapshot(*t.tracer());
    if (eval_due) {
      evaluate(*data_.valid, "valid", cat("iteration ", it), consumed_valid_, res);
      consumed_valid_ += tc.eval_iters * plan_.parallel.global_batch_size;
    }
    if (save_due) save(res);
  }

  res.reached_end = t.iterations_done() >= o_.train_iters;
  const bool unsaved = !o_.save.empty() && last_saved_ != t.iterations_done();
  if (res.reached_end) {
    // Megatron's pretrain(): the validation split at the end, the checkpoint, the test split.
    if (data_.valid) {
      evaluate(*data_.valid, "valid", "the end of training for val data", consumed_valid_, res);
      consumed_valid_ += tc.eval_iters * plan_.parallel.global_batch_size;
    }
    if (unsaved) save(res);
    if (data_.test) evaluate(*data_.test, "test", "the end of training for test data", 0, res);
  } else if (unsaved) {
    save(res);
  }
  if (metrics_) metrics_->write_plot();
  return res;
}

}  // namespace mplan::exec
