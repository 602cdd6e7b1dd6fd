#include "giant/parallel/pipeline/executor.h"

#include <map>
#include <optional>
#include <tuple>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/work.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

uint32_t pipeline_tag(bool gradient, int consumer_stage, int64_t micro_batch) {
  GIANT_CHECK(consumer_stage >= 0 && consumer_stage < (1 << 11), "pipeline stage ", consumer_stage,
              " out of the tag's range");
  GIANT_CHECK(micro_batch >= 0 && micro_batch < (1 << 20), "micro-batch ", micro_batch, " out of the tag's range");
  return (gradient ? 1u << 31 : 0u) | static_cast<uint32_t>(consumer_stage) << 20 |
         static_cast<uint32_t>(micro_batch);
}

namespace {

// One step of one rank: what is in flight between its actions.
class StepRun {
 public:
  StepRun(ccl::Communicator& comm, const std::vector<PipelineChunk>& chunks, const PipelineShape& shape,
          const PipelineStepFunctions& functions, at::IntArrayRef activation_shape,
          const at::TensorOptions& options, double loss_factor, bool with_backward)
      : comm_(comm), chunks_(chunks), shape_(shape), functions_(functions),
        activation_shape_(activation_shape.vec()), options_(options), loss_factor_(loss_factor),
        with_backward_(with_backward) {
    result_.peak_in_flight.assign(chunks.size(), 0);
    in_flight_.assign(chunks.size(), 0);
  }

  void act(const Action& action) {
    switch (action.kind) {
      case ActionKind::recv_activation:
      case ActionKind::recv_gradient:
        post_receive(action);
        break;
      case ActionKind::send_activation:
      case ActionKind::send_gradient:
        send(action);
        break;
      case ActionKind::forward:
        release_finished_sends();
        forward(action);
        break;
      case ActionKind::backward:
        release_finished_sends();
        backward(action);
        break;
      case ActionKind::weight_gradient:
        throw Error("the pipeline executor runs no weight-gradient actions yet (" + describe(action) + ")");
    }
  }

  PipelineStepResult finish() {
    Stopwatch watch;
    for (auto& pending : sends_) pending.work.wait();
    sends_.clear();
    result_.wait_s += watch.seconds();
    GIANT_CHECK(receives_.empty(), receives_.size(), " receive(s) of the schedule were never consumed");
    return result_;
  }

 private:
  using Key = std::tuple<int, int64_t>;  // (stage, micro-batch)
  struct Received {
    ccl::Work work;
    at::Tensor buffer;
  };
  struct Sent {
    ccl::Work work;
    at::Tensor buffer;
    at::Tensor release;  // defined: the activation whose storage goes once sent
  };

  size_t chunk_of(int stage) const {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      if (chunks_[c].stage == stage) return c;
    }
    throw Error(detail::concat("pipeline stage ", stage, " is not held by pp rank ", comm_.rank()));
  }
  bool last_stage(int stage) const { return stage == shape_.stages() - 1; }
  int peer_rank(const Action& action) const { return shape_.rank_of_stage(action.peer_stage); }

  void post_receive(const Action& action) {
    const bool gradient = action.kind == ActionKind::recv_gradient;
    Received received;
    received.buffer = at::empty(activation_shape_, options_);
    ccl::RecvOptions options;
    set_memory(options, received.buffer);
    options.buffer = received.buffer.data_ptr();
    options.nbytes = received.buffer.nbytes();
    options.peer = peer_rank(action);
    options.tag = pipeline_tag(gradient, action.stage, action.micro_batch);
    received.work = ccl::recv(comm_, options);
    auto& into = gradient ? gradients_in_ : receives_;
    GIANT_CHECK(into.emplace(Key{action.stage, action.micro_batch}, std::move(received)).second,
                "received twice: ", describe(action));
  }

  at::Tensor take_received(std::map<Key, Received>& from, int stage, int64_t micro_batch, const char* what) {
    auto found = from.find({stage, micro_batch});
    GIANT_CHECK(found != from.end(), "stage ", stage, " micro-batch ", micro_batch, " needs its ", what,
                " but the schedule posted no receive for it");
    Stopwatch watch;
    found->second.work.wait();
    result_.wait_s += watch.seconds();
    at::Tensor buffer = std::move(found->second.buffer);
    from.erase(found);
    return buffer;
  }

  void check_activation(const at::Tensor& tensor, int stage, const char* what) const {
    GIANT_CHECK(tensor.sizes() == at::IntArrayRef(activation_shape_) && tensor.scalar_type() == options_.dtype(),
                "pipeline stage ", stage, "'s ", what, " is ", tensor.sizes(), " ", tensor.scalar_type(),
                ", but the tensors between stages are ", at::IntArrayRef(activation_shape_), " ",
                options_.dtype(), " (model.hidden, model.seq_len, train.micro_batch, train.precision)");
  }

  void forward(const Action& action) {
    const size_t chunk = chunk_of(action.stage);
    at::Tensor input;
    if (action.stage == 0) {
      input = functions_.input(action.micro_batch);
    } else {
      input = take_received(receives_, action.stage, action.micro_batch, "input activation");
      if (with_backward_) input.requires_grad_(true);
    }
    Stopwatch watch;
    at::Tensor output = chunks_[chunk].forward(input);
    Entry& entry = entries_[{action.stage, action.micro_batch}];
    entry.input = input;
    if (last_stage(action.stage)) {
      entry.loss = functions_.loss(action.micro_batch, output);
      result_.loss_sum += entry.loss.item<double>();
    } else {
      check_activation(output, action.stage, "output");
      entry.output = output;
    }
    result_.forward_s += watch.seconds();
    if (!with_backward_) entry.input = at::Tensor();
    result_.peak_in_flight[chunk] = std::max(result_.peak_in_flight[chunk], ++in_flight_[chunk]);
    if (!with_backward_) --in_flight_[chunk];
  }

  void backward(const Action& action) {
    GIANT_CHECK(with_backward_, "a backward in a forward-only run: ", describe(action));
    auto found = entries_.find({action.stage, action.micro_batch});
    GIANT_CHECK(found != entries_.end(), "backward before forward: ", describe(action));
    Entry entry = std::move(found->second);
    entries_.erase(found);
    if (functions_.before_backward) functions_.before_backward(action.stage, action.micro_batch);
    at::Tensor output_grad;
    if (!last_stage(action.stage)) {
      output_grad = take_received(gradients_in_, action.stage, action.micro_batch, "output gradient");
    }
    Stopwatch watch;
    if (last_stage(action.stage)) {
      (loss_factor_ != 1.0 ? entry.loss * loss_factor_ : entry.loss).backward();
    } else {
      torch::autograd::backward({entry.output}, {output_grad});
    }
    if (action.stage != 0) {
      at::Tensor input_grad = entry.input.grad();
      GIANT_CHECK(input_grad.defined(), "stage ", action.stage, "'s input got no gradient");
      check_activation(input_grad, action.stage, "input gradient");
      input_gradients_[{action.stage, action.micro_batch}] = input_grad.contiguous();
    }
    result_.backward_s += watch.seconds();
    --in_flight_[chunk_of(action.stage)];
  }

  void send(const Action& action) {
    const bool gradient = action.kind == ActionKind::send_gradient;
    Sent sent;
    const Key key{action.stage, action.micro_batch};
    if (gradient) {
      auto found = input_gradients_.find(key);
      GIANT_CHECK(found != input_gradients_.end(), "sent before its backward: ", describe(action));
      sent.buffer = std::move(found->second);
      input_gradients_.erase(found);
    } else {
      auto found = entries_.find(key);
      GIANT_CHECK(found != entries_.end() && found->second.output.defined(),
                  "sent before its forward: ", describe(action));
      at::Tensor& output = found->second.output;
      sent.buffer = output.contiguous();
      // Backward needs only the output's graph: its data can go once sent
      // (a copy autograd saved keeps its own reference to the storage).
      if (sent.buffer.is_same(output)) sent.release = output;
      if (!with_backward_) entries_.erase(found);
    }
    ccl::SendOptions options;
    set_memory(options, sent.buffer);
    options.buffer = sent.buffer.data_ptr();
    options.nbytes = sent.buffer.nbytes();
    options.peer = peer_rank(action);
    options.tag = pipeline_tag(gradient, action.peer_stage, action.micro_batch);
    sent.work = ccl::send(comm_, options);
    sends_.push_back(std::move(sent));
  }

  void release_finished_sends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (!it->work.test()) {
        ++it;
        continue;
      }
      it->work.wait();  // raises the send's error, if any
      if (it->release.defined()) it->release.set_data(at::empty({0}, it->release.options()));
      it = sends_.erase(it);
    }
  }

  struct Entry {
    at::Tensor input, output, loss;
  };

  ccl::Communicator& comm_;
  const std::vector<PipelineChunk>& chunks_;
  const PipelineShape& shape_;
  const PipelineStepFunctions& functions_;
  std::vector<int64_t> activation_shape_;
  at::TensorOptions options_;
  double loss_factor_;
  bool with_backward_;
  std::map<Key, Received> receives_, gradients_in_;
  std::map<Key, Entry> entries_;
  std::map<Key, at::Tensor> input_gradients_;
  std::vector<Sent> sends_;
  std::vector<int64_t> in_flight_;
  PipelineStepResult result_;
};

}  // namespace

PipelineExecutor::PipelineExecutor(ccl::Communicator& comm, std::vector<PipelineChunk> chunks)
    : comm_(comm), chunks_(std::move(chunks)) {
  GIANT_CHECK(!chunks_.empty(), "a pipeline rank needs at least one stage");
}

PipelineStepResult PipelineExecutor::run(const PipelineSchedule& lowered,
                                         const PipelineStepFunctions& functions,
                                         at::IntArrayRef activation_shape,
                                         const at::TensorOptions& activation_options, double loss_factor) {
  GIANT_CHECK(static_cast<int>(lowered.ranks.size()) == comm_.size(), "the schedule has ", lowered.ranks.size(),
              " pipeline ranks but the pipeline group has ", comm_.size());
  for (const auto& chunk : chunks_) {
    GIANT_CHECK(lowered.shape.rank_of_stage(chunk.stage) == comm_.rank(), "stage ", chunk.stage,
                " does not run on pp rank ", comm_.rank());
  }
  const bool with_backward = !lowered.forward_only;
  std::optional<at::NoGradGuard> no_grad;
  if (!with_backward) no_grad.emplace();
  StepRun run(comm_, chunks_, lowered.shape, functions, activation_shape, activation_options, loss_factor,
              with_backward);
  for (const Action& action : lowered.ranks[static_cast<size_t>(comm_.rank())]) run.act(action);
  return run.finish();
}

}  // namespace giant::parallel
