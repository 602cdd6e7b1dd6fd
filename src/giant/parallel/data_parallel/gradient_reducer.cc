#include "giant/parallel/data_parallel/gradient_reducer.h"

#include <algorithm>
#include <map>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/parallel/data_parallel/accumulated_hook.h"

namespace giant::parallel {
GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator& comm,
                                 int64_t bucket_bytes, int zero_stage,
                                 c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone,
                                 std::shared_ptr<ccl::HostCompressedAllreduce> compressed, int low_rank)
    : GradientReducer(std::move(parameters), &comm, bucket_bytes, zero_stage, grad_dtype, alone,
                      std::move(compressed), low_rank) {}

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, int64_t bucket_bytes,
                                 at::ScalarType grad_dtype)
    : GradientReducer(std::move(parameters), nullptr, bucket_bytes, 0, grad_dtype, {}, nullptr, 0) {}

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator* comm,
                                 int64_t bucket_bytes, int zero_stage,
                                 c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone,
                                 std::shared_ptr<ccl::HostCompressedAllreduce> compressed, int low_rank)
    : parameters_(std::move(parameters)), zero_stage_(zero_stage), compressed_(std::move(compressed)) {
  GIANT_CHECK(!parameters_.empty(), "no parameters to reduce");
  GIANT_CHECK(zero_stage_ >= 0 && zero_stage_ <= 2, "GradientReducer runs ZeRO stages 0-2, not ", zero_stage_);
  GIANT_CHECK(comm != nullptr || zero_stage_ == 0, "a sharded optimizer needs a communicator");
  const bool sharded = zero_stage_ >= 1;
  layout_ = lay_out_buckets(parameters_, bucket_bytes, grad_dtype, alone, sharded ? comm->size() : 1);
  GIANT_CHECK(!(compressed_ && low_rank > 0), "one gradient wire at a time (a codec or a low rank)");
  GIANT_CHECK(low_rank == 0 || (comm != nullptr && zero_stage_ <= 1),
              "a low-rank gradient wire needs a communicator and whole gradients (ZeRO stage 0 or 1)");
  if (compressed_ || low_rank > 0) {
    for (const auto& bucket : layout_.buckets) {
      GIANT_CHECK(bucket.gradient_options.dtype() == at::kFloat,
                  "a compressed gradient wire needs fp32 gradient buckets, not ",
                  bucket.gradient_options.dtype().name());
    }
  }
  if (low_rank > 0) low_rank_ = std::make_unique<LowRankWire>(parameters_, *comm, low_rank);
  if (zero_stage_ == 2) {
    engine_ = std::make_unique<ReduceScatterRounds>(layout_, parameters_, *comm, compressed_.get());
  } else {
    engine_ = std::make_unique<AllreduceBuckets>(layout_, parameters_, comm, /*scatter=*/sharded, compressed_.get(),
                                                 low_rank_.get());
  }
  if (sharded) {
    shards_ = std::make_unique<BucketParameterShards>(layout_, parameters_, *comm, *engine_);
  }
  reset_peaks();
  for (size_t i = 0; i < parameters_.size(); ++i) {
    AccumulatedHook hook = on_gradient_accumulated(parameters_[i], i, [this, i] { mark_ready(i); });
    hook_keys_.push_back(hook.key);
    accumulators_.push_back(std::move(hook.accumulator));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  engine_.reset();  // reductions in flight first, then gathers
  shards_.reset();
}

std::vector<UpdatePiece> GradientReducer::update_pieces() const {
  if (shards_) return shards_->owned();
  return whole_pieces(parameters_, engine_->whole_gradients());
}

std::vector<at::Tensor> GradientReducer::gradients() const {
  if (!engine_->whole_gradients().empty()) return engine_->whole_gradients();
  std::vector<at::Tensor> grads;
  for (const auto& piece : shards_->owned()) grads.push_back(piece.tensor.grad());
  return grads;
}

const at::Tensor& GradientReducer::grad_view(size_t parameter) const {
  GIANT_CHECK(!engine_->whole_gradients().empty(),
              "at ZeRO stage 2 no whole gradient outlives its reduction (read update_pieces())");
  return engine_->whole_gradients().at(parameter);
}

void GradientReducer::gather_parameters() {
  gather_parameters_async();
  wait_parameters();
}

void GradientReducer::gather_parameters_async() {
  if (shards_) shards_->gather_async();
}

double GradientReducer::wait_parameters_through(size_t parameter) {
  GIANT_CHECK(parameter < parameters_.size(), "parameter ", parameter, " of ", parameters_.size());
  Stopwatch watch;
  const bool waited = shards_ && shards_->wait_from(layout_.places[parameter].bucket);
  return waited ? watch.seconds() : 0.0;
}

// Parameter 0 lies in the last bucket, the last parameter in the first.
double GradientReducer::wait_parameters() { return wait_parameters_through(parameters_.size() - 1); }

void GradientReducer::zero_grad() {
  engine_->zero_grad();
  for (auto& p : parameters_) p.mutable_grad().reset();
}

void GradientReducer::begin_micro_batch(bool last) { engine_->begin_micro_batch(last); }

void GradientReducer::mark_ready(size_t parameter) { engine_->gradient_ready(parameter); }

double GradientReducer::finish() {
  engine_->launch_remaining();
  Stopwatch watch;
  wait_parameters();  // normally done by the forward that used them
  engine_->wait_reductions();
  return watch.seconds();
}

HeldBytesReport GradientReducer::held_bytes() const {
  HeldBytes now;
  if (shards_) {
    now.parameters = shards_->parameter_bytes();
  } else {
    for (const auto& p : parameters_) now.parameters += p.nbytes();
  }
  const GradientBytes gradient_bytes = engine_->held_bytes();
  now.gradients = gradient_bytes.gradients;
  now.comm_buffers = gradient_bytes.comm_buffers + (low_rank_ ? low_rank_->held_bytes() : 0);
  peak_.parameters = std::max(peak_.parameters, now.parameters);
  peak_.gradients = std::max(peak_.gradients, now.gradients);
  peak_.comm_buffers = std::max(peak_.comm_buffers, now.comm_buffers);
  return {now, peak_};
}

void GradientReducer::reset_peaks() { peak_ = held_bytes().now; }

std::vector<uint8_t> GradientReducer::wire_feedback() const {
  if (low_rank_) return low_rank_->save();
  return compressed_ ? compressed_->save_feedback() : std::vector<uint8_t>{};
}

void GradientReducer::restore_wire_feedback(const std::vector<uint8_t>& bytes) {
  if (low_rank_) {
    low_rank_->restore(bytes);
    return;
  }
  GIANT_CHECK(compressed_ != nullptr, "this gradient reducer sends no compressed gradients");
  std::map<int, size_t> streams;  // a stream per bucket, the whole bucket each
  for (size_t b = 0; b < layout_.buckets.size(); ++b) streams[static_cast<int>(b)] = layout_.buckets[b].elements;
  compressed_->restore_feedback(bytes, streams);
}

}  // namespace giant::parallel
