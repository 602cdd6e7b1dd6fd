#include "giant/parallel/data_parallel/gradient_reducer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/shared_buffer.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {
namespace {

struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(GradientReducer* reducer, size_t parameter) : reducer_(reducer), parameter_(parameter) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    reducer_->mark_ready(parameter_);
    return outputs;
  }
  GradientReducer* reducer_;
  size_t parameter_;
};

}  // namespace

at::Tensor GradientReducer::bucket_storage(int64_t elements, const at::TensorOptions& options) {
  // On the host, a shared buffer: the allreduce then reads the other ranks'
  // buckets in place instead of copying each through shared memory.
  if (comm_ == nullptr || !options.device().is_cpu()) return torch::zeros({elements}, options);
  auto shared = ccl::allocate_shared_buffer(*comm_, static_cast<size_t>(elements) * options.dtype().itemsize());
  void* data = shared->data();
  return torch::from_blob(data, {elements}, [shared](void*) mutable { shared.reset(); }, options);
}

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator& comm,
                                 int64_t bucket_bytes, int zero_stage,
                                 c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone)
    : GradientReducer(std::move(parameters), &comm, bucket_bytes, zero_stage, grad_dtype, alone) {}

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, int64_t bucket_bytes,
                                 at::ScalarType grad_dtype)
    : GradientReducer(std::move(parameters), nullptr, bucket_bytes, 0, grad_dtype, {}) {}

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator* comm,
                                 int64_t bucket_bytes, int zero_stage,
                                 c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone)
    : parameters_(std::move(parameters)), comm_(comm), bucket_of_(parameters_.size()),
      grad_views_(parameters_.size()),
      other_dtype_(parameters_.size()),
      view_has_step_(parameters_.size()),
      offset_in_bucket_(parameters_.size()),
      in_round_(parameters_.size()),
      zero_stage_(zero_stage),
      shard_optimizer_(zero_stage >= 1) {
  GIANT_CHECK(!parameters_.empty(), "no parameters to reduce");
  GIANT_CHECK(zero_stage_ >= 0 && zero_stage_ <= 2, "GradientReducer runs ZeRO stages 0-2, not ", zero_stage_);
  GIANT_CHECK(comm_ != nullptr || !shard_optimizer_, "a sharded optimizer needs a communicator");
  const int ranks = comm_ ? comm_->size() : 1;
  // Group by dtype and device too: a bucket is one flat tensor.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  std::vector<bool> is_alone(parameters_.size());
  for (size_t i : alone) is_alone.at(i) = true;
  for (size_t i = parameters_.size(); i-- > 0;) {
    const at::Tensor& p = parameters_[i];
    const int64_t element_bytes = grad_dtype ? c10::elementSize(*grad_dtype) : p.element_size();
    const int64_t size = p.numel() * element_bytes;
    const bool fits = !groups.empty() && bytes + size <= bucket_bytes && !is_alone[i] &&
                      !is_alone[groups.back().front()] &&
                      parameters_[groups.back().front()].scalar_type() == p.scalar_type() &&
                      parameters_[groups.back().front()].device() == p.device();
    if (!fits) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += size;
  }
  buckets_.resize(groups.size());
  for (size_t b = 0; b < groups.size(); ++b) {
    int64_t elements = 0;
    for (size_t i : groups[b]) elements += parameters_[i].numel();
    // Sharded: padded to equal blocks (the padding stays zero).
    if (shard_optimizer_) elements = (elements + ranks - 1) / ranks * ranks;
    const at::Tensor& first = parameters_[groups[b].front()];
    const auto options = first.options().requires_grad(false);
    const auto bucket_options = grad_dtype ? options.dtype(*grad_dtype) : options;
    Bucket& bucket = buckets_[b];
    bucket.elements = elements;
    bucket.parameters = groups[b].size();
    // Stage 2 keeps no whole bucket: its rounds are staged (gradient_rounds.cc).
    if (zero_stage_ < 2) bucket.buffer = bucket_storage(elements, bucket_options);
    staging_elements_ = std::max(staging_elements_, elements);
    int64_t offset = 0;
    for (size_t i : groups[b]) {
      at::Tensor& p = parameters_[i];
      offset_in_bucket_[i] = offset;
      bucket_of_[i] = b;
      offset += p.numel();
      if (zero_stage_ >= 2) continue;
      grad_views_[i] = bucket.buffer.narrow(0, offset_in_bucket_[i], p.numel()).view(p.sizes());
      other_dtype_[i] = grad_views_[i].scalar_type() != p.scalar_type();
      if (!other_dtype_[i]) p.mutable_grad() = grad_views_[i];
    }
    bucket.content = offset;
    bucket.members = groups[b];
    if (zero_stage_ >= 2) {
      bucket.shard_grad = torch::zeros({elements / ranks}, bucket_options);
      staging_options_ = bucket_options;
    }
  }
  if (shard_optimizer_) shard(groups);
  if (zero_stage_ >= 2) {
    constexpr int kStagingBuffers = 3;  // rounds being filled, launched and folded at once
    for (int k = 0; k < kStagingBuffers; ++k) {
      staging_slots_.push_back(bucket_storage(staging_elements_, staging_options_));
      slot_state_.push_back(SlotState::free);
      ++staging_buffers_;
    }
  }
  update_held_bytes();
  held_.peak = held_.now;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    // The parameter holds its accumulator only weakly: keep it alive, or
    // the hook would vanish with the first graph.
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[i]);
    GIANT_CHECK(accumulator != nullptr, "parameter ", i, " is not a leaf that requires a gradient");
    hook_keys_.push_back(accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i)));
    accumulators_.push_back(std::move(accumulator));
  }
}

void GradientReducer::shard(const std::vector<std::vector<size_t>>& groups) {
  at::NoGradGuard no_grad;
  const int64_t rank = comm_->rank();
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket& bucket = buckets_[b];
    // In the parameters' dtype: with bf16 parameters the gather moves half the bytes.
    bucket.parameters_buffer =
        bucket_storage(bucket.elements, parameters_[groups[b].front()].options().requires_grad(false));
    const int64_t block = bucket.elements / comm_->size();
    const int64_t mine_begin = rank * block, mine_end = mine_begin + block;
    int64_t offset = 0;
    for (size_t i : groups[b]) {
      at::Tensor& p = parameters_[i];
      const int64_t n = p.numel();
      at::Tensor flat = bucket.parameters_buffer.narrow(0, offset, n);
      flat.copy_(p.reshape({n}));
      // Every holder of the parameter (its module) sees the new storage.
      p.set_data(flat.view(p.sizes()));
      const int64_t begin = std::max(offset, mine_begin), end = std::min(offset + n, mine_end);
      if (begin < end) {
        at::Tensor owned = bucket.parameters_buffer.narrow(0, begin, end - begin);
        owned.mutable_grad() = zero_stage_ >= 2 ? bucket.shard_grad.narrow(0, begin - mine_begin, end - begin)
                                                : bucket.buffer.narrow(0, begin, end - begin);
        owned_.push_back(owned);
        owned_source_.push_back(i);
        owned_offset_.push_back(begin - offset);
      }
      offset += n;
    }
  }
}

void GradientReducer::gather_parameters() {
  gather_parameters_async();
  wait_parameters();
}

void GradientReducer::gather_parameters_async() {
  if (!shard_optimizer_ || comm_->size() == 1) return;
  // Buckets hold the parameters in reverse: the last holds the first ones.
  for (size_t b = buckets_.size(); b-- > 0;) {
    Bucket& bucket = buckets_[b];
    GIANT_CHECK(!bucket.gathering, "a parameter gather started while the previous one is in flight");
    bucket.gather = allgather_blocks_async(bucket.parameters_buffer, *comm_);
    bucket.gathering = true;
  }
}

double GradientReducer::wait_parameters_through(size_t parameter) {
  GIANT_CHECK(parameter < parameters_.size(), "parameter ", parameter, " of ", parameters_.size());
  Stopwatch watch;
  bool waited = false;
  for (size_t b = buckets_.size(); b-- > bucket_of_[parameter];) {
    Bucket& bucket = buckets_[b];
    if (!bucket.gathering) continue;
    bucket.gathering = false;
    bucket.gather.wait();
    waited = true;
  }
  return waited ? watch.seconds() : 0.0;
}

// Parameter 0 lies in the last bucket, the last parameter in the first.
double GradientReducer::wait_parameters() { return wait_parameters_through(parameters_.size() - 1); }

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  for (auto& round : in_flight_) {
    if (round.work.test()) continue;
    comm_->abort("gradient reducer destroyed while a gradient round was in flight");
    try {
      round.work.wait();
    } catch (...) {
    }
  }
  for (auto& bucket : buckets_) {
    for (auto [in_flight, work] : {std::pair{bucket.launched, &bucket.work}, {bucket.gathering, &bucket.gather}}) {
      if (!in_flight || work->test()) continue;
      // The peers are told; our buffers must outlive the operation.
      comm_->abort("gradient reducer destroyed while a reduction or parameter gather was in flight");
      try {
        work->wait();
      } catch (...) {
      }
    }
  }
}

void GradientReducer::zero_grad() {
  for (auto& bucket : buckets_) {
    GIANT_CHECK(!bucket.launched, "zero_grad while a gradient reduction is in flight (call finish first)");
    bucket.shard_has_step = false;
  }
  GIANT_CHECK(in_flight_.empty(), "zero_grad while a gradient round is in flight (call finish first)");
  for (auto& p : parameters_) p.mutable_grad().reset();
  std::fill(view_has_step_.begin(), view_has_step_.end(), false);
}

void GradientReducer::adopt_gradient(size_t parameter) {
  at::Tensor& grad = parameters_[parameter].mutable_grad();
  const at::Tensor& view = grad_views_[parameter];
  if (grad.is_same(view)) return;  // accumulated in place
  at::NoGradGuard no_grad;
  if (view_has_step_[parameter]) {
    if (grad.defined()) view.add_(grad);  // another dtype's later micro-batch
  } else if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  view_has_step_[parameter] = true;
  // The bucket's own dtype accumulates in place from now on; another dtype
  // comes fresh each micro-batch and is added above.
  if (other_dtype_[parameter]) {
    grad.reset();
  } else {
    grad = view;
  }
}

void GradientReducer::begin_micro_batch(bool last) {
  last_micro_batch_ = last;
  for (auto& bucket : buckets_) bucket.ready = 0;
  next_launch_ = 0;
}

void GradientReducer::mark_ready(size_t parameter) {
  if (zero_stage_ >= 2) {
    accept_into_round(parameter);
    return;
  }
  adopt_gradient(parameter);
  if (!last_micro_batch_) return;
  Bucket& bucket = buckets_[bucket_of_[parameter]];
  ++bucket.ready;
  if (bucket.ready == bucket.parameters) launch_in_order();
}

void GradientReducer::launch_in_order() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready >= buckets_[next_launch_].parameters) {
    Bucket& bucket = buckets_[next_launch_++];
    if (comm_ != nullptr && comm_->size() > 1) {
      bucket.work = shard_optimizer_ ? reduce_scatter_blocks_async(bucket.buffer, *comm_, ccl::ReduceOp::avg)
                                     : allreduce_async(bucket.buffer, *comm_, ccl::ReduceOp::avg);
    }
    bucket.launched = true;
  }
}

double GradientReducer::finish() {
  if (zero_stage_ >= 2) return finish_rounds();
  // Parameters backward did not reach (or gradients set by hand) join their
  // buckets before these are launched.
  for (size_t i = 0; i < parameters_.size(); ++i) adopt_gradient(i);
  for (auto& bucket : buckets_) bucket.ready = bucket.parameters;
  launch_in_order();
  Stopwatch watch;
  wait_parameters();  // normally done by the forward that used them
  for (auto& bucket : buckets_) {
    bucket.launched = false;
    bucket.work.wait();
  }
  return watch.seconds();
}

const at::Tensor& GradientReducer::grad_view(size_t parameter) const {
  GIANT_CHECK(zero_stage_ < 2, "at ZeRO stage 2 no whole gradient outlives its reduction (read owned_parameters())");
  return grad_views_.at(parameter);
}

HeldBytesReport GradientReducer::held_bytes() const { return held_; }

void GradientReducer::update_held_bytes() {
  HeldBytes& now = held_.now;
  now = {};
  for (const auto& bucket : buckets_) {
    if (bucket.parameters_buffer.defined()) now.parameters += bucket.parameters_buffer.nbytes();
    if (bucket.buffer.defined()) now.gradients += bucket.buffer.nbytes();
    if (bucket.shard_grad.defined()) now.gradients += bucket.shard_grad.nbytes();
  }
  if (!shard_optimizer_) {
    for (const auto& p : parameters_) now.parameters += p.nbytes();
  }
  now.comm_buffers = staging_buffers_ * staging_elements_ * static_cast<int64_t>(c10::elementSize(
                                                                 staging_options_.dtype().toScalarType()));
  HeldBytes& peak = held_.peak;
  peak.parameters = std::max(peak.parameters, now.parameters);
  peak.gradients = std::max(peak.gradients, now.gradients);
  peak.comm_buffers = std::max(peak.comm_buffers, now.comm_buffers);
}

void GradientReducer::reset_peaks() { held_.peak = held_.now; }

}  // namespace giant::parallel
