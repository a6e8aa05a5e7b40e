// PipelineRunner: the walk over a rank's schedule actions.
#include "exec/runner/pipeline_runner.hpp"

#include <vector>

#include "src/common/error.hpp"

namespace mplan::exec {

void Progress::set(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = std::move(what);
  ++count_;
}

std::string Progress::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return what_;
}

PipelineRunner::PipelineRunner(StageModel& model, Comm& pp, Tracer* tracer, Progress* progress)
    : model_(model), pp_(pp), tracer_(tracer), progress_(progress) {}

Tensor PipelineRunner::micro(Tensor all, int64_t mb) const {
  if (all.data == nullptr) return {};
  const GptDims& d = model_.dims();
  return all.flat_slice(mb * d.tokens(), d.tokens()).view({d.seq, d.micro_batch});
}

namespace {

const char* pass_name(ActionKind k, bool split) {
  if (k == ActionKind::kForward) return "forward";
  if (k == ActionKind::kWeightGrad) return "weight_grad";
  return split ? "backward_input" : "backward";
}

// The simulator's op name and stream of a p2p action.
std::pair<const char*, TraceStream> p2p_name(ActionKind k) {
  switch (k) {
    case ActionKind::kSendForward:
      return {"send_fwd", TraceStream::kSendFwd};
    case ActionKind::kRecvForward:
      return {"recv_fwd", TraceStream::kRecvFwd};
    case ActionKind::kSendBackward:
      return {"send_bwd", TraceStream::kSendBwd};
    default:
      return {"recv_bwd", TraceStream::kRecvBwd};
  }
}

}  // namespace

void PipelineRunner::run(const Schedule& s, int64_t pp_rank, const IterationBatch& batch,
                         GradSync& sync, int64_t iteration) {
  MPLAN_CHECK(pp_.size() == s.pp() && pp_.rank() == pp_rank, "pp group rank ", pp_.rank(), " of ",
              pp_.size(), " runs the actions of pipeline rank ", pp_rank, " of ", s.pp());
  const std::span<const Action> acts = s.rank(pp_rank);
  const bool split = s.split_backward;
  // The pass of each chunk that completes its gradients for the step.
  std::vector<int64_t> last_pass(static_cast<size_t>(model_.num_chunks()), -1);
  const ActionKind finishing = split ? ActionKind::kWeightGrad : ActionKind::kBackward;
  for (size_t i = 0; i < acts.size(); ++i)
    if (acts[i].kind == finishing)
      last_pass[static_cast<size_t>(acts[i].chunk)] = static_cast<int64_t>(i);

  for (size_t i = 0; i < acts.size(); ++i) {
    const Action& a = acts[i];
    if (is_p2p(a.kind)) {
      size_t end = i;
      while (!acts[end].ends_group) {
        ++end;
        MPLAN_CHECK(end < acts.size() && is_p2p(acts[end].kind), "unterminated p2p group");
      }
      p2p_group(acts.subspan(i, end - i + 1), s, iteration);
      i = end;
      continue;
    }
    if (progress_) progress_->set(cat("iteration ", iteration, ", action ", i, ": ", to_string(a)));
    const int c = a.chunk;
    const int64_t mb = a.microbatch;
    GradSync* finishing_sync =
        static_cast<int64_t>(i) == last_pass[static_cast<size_t>(c)] ? &sync : nullptr;
    TraceSpan span;
    span.name = pass_name(a.kind, split);
    span.kind = SpanKind::kPass;
    span.microbatch = static_cast<int32_t>(mb);
    span.chunk = c;
    span.action = to_string(a);
    auto pass = [&] {
      switch (a.kind) {
        case ActionKind::kForward:
          model_.forward(c, mb, micro(batch.tokens, mb), micro(batch.targets, mb), batch.grad_scale,
                         batch.loss_sum, &sync);
          break;
        case ActionKind::kBackward:
          model_.backward(c, mb, micro(batch.tokens, mb), finishing_sync);
          break;
        default:
          model_.weight_grad(c, mb, micro(batch.tokens, mb), finishing_sync);
          break;
      }
    };
    if (tracer_)
      tracer_->around(std::move(span), pass);
    else
      pass();
  }
}

void PipelineRunner::p2p_group(std::span<const Action> group, const Schedule&, int64_t iteration) {
  if (progress_) {
    std::string what = cat("iteration ", iteration, ", p2p group:");
    for (const Action& a : group) {
      what.push_back(' ');
      what.append(to_string(a));
    }
    progress_->set(std::move(what));
  }
  std::vector<Tensor> sent;
  std::vector<TraceSpan> spans;
  const int begin = tracer_ ? tracer_->mark(Stream::kCompute) : -1;
  pp_.group_start();
  for (const Action& a : group) {
    const int c = a.chunk;
    const int64_t mb = a.microbatch;
    Tensor t;
    switch (a.kind) {
      case ActionKind::kSendForward:
        t = model_.take_forward_output(c, mb);
        pp_.send(t, a.peer, Stream::kCompute);
        sent.push_back(t);
        break;
      case ActionKind::kRecvForward:
        t = model_.forward_input(c, mb);
        pp_.recv(t, a.peer, Stream::kCompute);
        break;
      case ActionKind::kSendBackward:
        t = model_.take_backward_output(c, mb);
        pp_.send(t, a.peer, Stream::kCompute);
        sent.push_back(t);
        break;
      default:
        t = model_.backward_grad_input(c, mb);
        pp_.recv(t, a.peer, Stream::kCompute);
        break;
    }
    if (tracer_) {
      TraceSpan span;
      auto [name, stream] = p2p_name(a.kind);
      span.name = name;
      span.kind = SpanKind::kP2p;
      span.stream = stream;
      span.microbatch = static_cast<int32_t>(mb);
      span.chunk = c;
      span.peer = a.peer;
      span.bytes = static_cast<int64_t>(t.bytes());
      span.action = to_string(a);
      spans.push_back(std::move(span));
    }
  }
  pp_.group_end();
  if (tracer_) {
    const int end = tracer_->mark(Stream::kCompute);
    for (TraceSpan& s : spans) {
      s.begin = begin;
      s.end = end;
      tracer_->add(std::move(s));
    }
  }
  // The sends are ordered before any later work on the compute stream: the buffers may be reused.
  for (Tensor& t : sent) model_.release(t);
}

}  // namespace mplan::exec
