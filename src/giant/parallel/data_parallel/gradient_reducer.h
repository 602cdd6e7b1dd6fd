// Data-parallel gradient averaging, overlapped with backward.
//
// Gradients live in a few contiguous buckets (each parameter's .grad() is a
// view into one), and a bucket is reduced as one message. The first gradient
// of a step lands in a fresh tensor from backward (zero_grad() clears them,
// as setting them to none does) and is copied into the bucket at once, so
// buckets are never zeroed nor added to zeros; later micro-batches
// accumulate straight into the buckets. A post hook on each parameter's
// gradient accumulator counts the gradients of the step's last backward of
// those parameters (the last micro-batch's; GPipe's micro-batch 0's); as soon
// as a bucket is complete its allreduce starts, asynchronously, on a
// communicator of its own. Buckets are always launched in the same order on
// every rank (a complete bucket waits for the ones before it), since ccl
// matches operations by issue order. finish() launches what remains (e.g.
// parameters the step did not use) and waits for everything.
//
// With the optimizer sharded (ZeRO stage 1), each bucket is split into
// equal blocks, one per rank, and reduce-scattered instead: a rank gets the
// average of its block only, updates just the parameters' elements in it
// (update_pieces(): views of its block, each with its gradient attached),
// and the parameter gather then copies every other block from its owner. The
// parameters' data moves into flat buffers laid out like the gradients'.
// The gather can run behind the next forward: gather_parameters_async()
// starts it bucket by bucket in the order forward needs them (the first
// parameters' bucket first), and wait_parameters_through(p) returns once the
// parameters up to p hold the whole update.
//
// ZeRO stage 2 also shards the gradients: no whole bucket outlives its
// reduction. Every micro-batch's gradients are copied into a staging buffer
// per bucket (a round), reduce-scattered as soon as the bucket's round is
// complete, and this rank's block is added into the bucket's persistent
// gradient shard (copied for the step's first round); rounds take three
// shared staging buffers in turn, so they number the rounds in flight, not
// the buckets. Rounds are
// launched in a fixed cyclic bucket order (identical on every rank); a
// parameter whose gradient arrives twice before its bucket's round is
// complete (its bucket holds one that got none) adds into the same round,
// and finish() completes partial rounds with zeros. With several
// micro-batches the sum over them is therefore taken after the average
// over the ranks, not before as at stages 0 and 1: equal to rounding.
//
// Mixed precision: the buckets may hold the gradients in another dtype than
// the parameters' (fp32 gradients of bf16 parameters). Then each fresh
// gradient is added into its bucket as soon as it is accumulated (copied
// for the step's first) and the parameter's own .grad() is dropped, so the
// sum over micro-batches and the reduction run in the buckets' dtype;
// grad_view(p) is the gradient the update reads. Without a communicator
// (one replica) the reducer only keeps the gradients in its buckets.
//
// Every stage works on one bucket layout (bucket_layout.h), reduced by the
// stage's engine (bucket_engines.h: AllreduceBuckets at stages 0 and 1,
// ReduceScatterRounds at stage 2), with BucketParameterShards holding the
// sharded parameters and their gather at stages 1 and 2.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/host_compressed_allreduce.h"
#include "giant/parallel/data_parallel/bucket_engines.h"
#include "giant/parallel/data_parallel/bucket_layout.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/parallel/data_parallel/low_rank_wire.h"

namespace torch::autograd {
struct Node;
}

namespace giant::parallel {

class GradientReducer : public GradientSync {
 public:
  // Parameters are bucketed in reverse order (the order backward produces
  // their gradients), each bucket up to bucket_bytes (at least one parameter).
  // grad_dtype: the buckets' dtype (default: each parameter's own).
  // `alone`: parameters that get a bucket of their own (a weight tied
  // across pipeline stages: sharded, its blocks then cover the same
  // elements on every stage holding it).
  // zero_stage: 0 (replicated), 1 (sharded optimizer) or 2 (and gradients).
  // `compressed` (split from comm; f32 buckets only): every bucket is
  // reduced through it, compressed between hosts with error feedback; at
  // stages 1 and 2 each rank then reads its blocks of the whole result.
  // `low_rank` > 0 (f32 buckets, stages 0 and 1): the gradients are
  // averaged as PowerSGD approximations of that rank (low_rank_wire.h)
  // once the step's backward completed them all.
  GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator& comm, int64_t bucket_bytes,
                  int zero_stage = 0, c10::optional<at::ScalarType> grad_dtype = c10::nullopt,
                  const std::vector<size_t>& alone = {},
                  std::shared_ptr<ccl::HostCompressedAllreduce> compressed = nullptr, int low_rank = 0);
  // One replica: gradients accumulate in grad_dtype buckets, nothing is reduced.
  GradientReducer(std::vector<at::Tensor> parameters, int64_t bucket_bytes, at::ScalarType grad_dtype);
  ~GradientReducer() override;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Clears every gradient (undefined until backward or finish(), which
  // leaves every one a view of its bucket again: zero where none came).
  void zero_grad() override;
  // Call before each micro-batch's backward: only the step's last
  // backward's gradients are reduced (earlier ones just accumulate
  // locally). A gradient arriving after its bucket's reduction started is
  // refused (giant::Error), never reduced partly summed.
  void begin_micro_batch(bool last) override;
  // Launches the buckets not launched yet and waits for all (and for a
  // parameter gather still in flight, so the update may start); afterwards every
  // gradient is the average over the ranks (sharded: those of the owned
  // stretches; the rest keep this rank's own). Returns the seconds it waited.
  double finish() override;

  size_t num_buckets() const override { return layout_.buckets.size(); }
  int zero_stage() const override { return zero_stage_; }
  // Stage 0: every parameter, its gradient its bucket view. Sharded: the
  // stretches of parameters in this rank's blocks, flat views of the
  // parameters' data whose .grad() is the matching stretch of gradient.
  std::vector<UpdatePiece> update_pieces() const override;
  std::vector<at::Tensor> gradients() const override;
  // Parameter p's gradient in its bucket (the bucket's dtype): after
  // finish(), the one the update reads (sharded: only this rank's blocks
  // hold the average). An Error at stage 2.
  const at::Tensor& grad_view(size_t parameter) const;
  // Sharded: after the owned stretches were updated, every rank's parameters
  // again hold the whole update (collective; a no-op when not sharded).
  void gather_parameters();
  // The same gather, started and not waited for. Until it is waited for
  // (below, or by finish() before the next update may start), parameters
  // may be read only up to what wait_parameters_through() returned for.
  void gather_parameters_async() override;
  // Waits until parameters 0..p (in the constructor's order) hold the whole
  // update; wait_parameters() waits for all. They return the seconds waited.
  double wait_parameters_through(size_t parameter);
  double wait_parameters() override;
  HeldBytesReport held_bytes() const override;
  void reset_peaks() override;
  std::vector<uint8_t> wire_feedback() const override;
  void restore_wire_feedback(const std::vector<uint8_t>& bytes) override;
  // Called by the hooks, once a parameter's gradient is accumulated.
  void mark_ready(size_t parameter);

 private:
  GradientReducer(std::vector<at::Tensor> parameters, ccl::Communicator* comm, int64_t bucket_bytes,
                  int zero_stage, c10::optional<at::ScalarType> grad_dtype,
                  const std::vector<size_t>& alone, std::shared_ptr<ccl::HostCompressedAllreduce> compressed,
                  int low_rank);

  std::vector<at::Tensor> parameters_;
  const int zero_stage_;
  BucketLayout layout_;
  std::shared_ptr<ccl::HostCompressedAllreduce> compressed_;  // outlives the engine
  std::unique_ptr<LowRankWire> low_rank_;                     // likewise
  std::unique_ptr<BucketEngine> engine_;
  std::unique_ptr<BucketParameterShards> shards_;  // stages 1 and 2
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  mutable HeldBytes peak_;
};

}  // namespace giant::parallel
