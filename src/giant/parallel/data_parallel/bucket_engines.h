// The engines behind a GradientReducer (gradient_reducer.h), one per way of
// reducing the same bucket layout:
//   AllreduceBuckets (ZeRO 0 and 1): whole gradient buckets, each allreduced
//     (stage 0) or reduce-scattered into its owners' blocks (stage 1) once
//     the step's last backward completed it;
//   ReduceScatterRounds (ZeRO 2): each micro-batch's gradients staged in
//     rounds, reduce-scattered, and folded into persistent gradient blocks;
// and, at stages 1 and 2, BucketParameterShards: the parameters' data in
// flat buffers laid out like the buckets, this rank's block of them what it
// updates, gathered from every owner after the update.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/host_compressed_allreduce.h"
#include "giant/ccl/work.h"
#include "giant/parallel/data_parallel/bucket_layout.h"
#include "giant/parallel/data_parallel/low_rank_wire.h"
#include "giant/parallel/data_parallel/update_piece.h"

namespace giant::parallel {

// Bytes an engine holds for gradients and for staging.
struct GradientBytes {
  int64_t gradients = 0, comm_buffers = 0;
};

class BucketEngine {
 public:
  virtual ~BucketEngine() = default;
  // For a new step (after the parameters' own gradients were cleared).
  virtual void zero_grad() = 0;
  virtual void begin_micro_batch(bool last) = 0;
  // A parameter's gradient was accumulated by backward.
  virtual void gradient_ready(size_t parameter) = 0;
  // Starts every reduction the step still owes (parameters backward did not
  // reach, or gradients set by hand, join theirs first).
  virtual void launch_remaining() = 0;
  // Waits for them: the owned blocks then hold the average over the ranks.
  virtual void wait_reductions() = 0;
  // Bucket b's block `rank` of the step's reduced gradient (owned
  // stretches' gradients are views of it).
  virtual at::Tensor block_gradient(size_t bucket, int rank) const = 0;
  // Every parameter's whole gradient in its bucket; empty where none
  // outlives its reduction.
  virtual const std::vector<at::Tensor>& whole_gradients() const = 0;
  virtual GradientBytes held_bytes() const = 0;
};

class AllreduceBuckets : public BucketEngine {
 public:
  // `scatter`: reduce-scatter each bucket into its owners' blocks (stage 1).
  // `compressed`: reduce every bucket through it instead (whole, stream b
  // for bucket b; at stage 1 each rank then reads its blocks of the result).
  // `low_rank`: average every gradient through it once all are complete
  // (it needs whole matrices; stage 1 reads its blocks of the result).
  AllreduceBuckets(const BucketLayout& layout, std::vector<at::Tensor>& parameters, ccl::Communicator* comm,
                   bool scatter, ccl::HostCompressedAllreduce* compressed = nullptr,
                   LowRankWire* low_rank = nullptr);
  ~AllreduceBuckets() override;
  void zero_grad() override;
  void begin_micro_batch(bool last) override;
  void gradient_ready(size_t parameter) override;
  void launch_remaining() override;
  void wait_reductions() override;
  at::Tensor block_gradient(size_t bucket, int rank) const override;
  const std::vector<at::Tensor>& whole_gradients() const override { return views_; }
  GradientBytes held_bytes() const override;

 private:
  struct Bucket {
    at::Tensor buffer;
    size_t ready = 0;
    ccl::Work work;
    bool launched = false;
  };
  // Makes the parameter's gradient its bucket view again: copies a fresh
  // gradient in, or zeroes the view when there is none. A gradient of
  // another dtype than the bucket's is added in (copied for the step's
  // first) and dropped instead.
  void adopt_gradient(size_t parameter);
  // No bucket counted or launched: at a step's start and after its reductions.
  void start_step();
  void launch_in_order();

  const BucketLayout& layout_;
  std::vector<at::Tensor>& parameters_;
  ccl::Communicator* comm_;  // null: one replica
  const bool scatter_;
  ccl::HostCompressedAllreduce* compressed_;
  LowRankWire* low_rank_;
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> views_;    // each parameter's stretch of its bucket
  std::vector<bool> other_dtype_;    // the parameter's dtype is not its bucket's
  std::vector<bool> view_has_step_;  // the view holds this step's gradient (since zero_grad)
  size_t next_launch_ = 0;
  bool last_micro_batch_ = true;
};

class ReduceScatterRounds : public BucketEngine {
 public:
  // `compressed`: each round is allreduced through it (stream b for bucket
  // b) and this rank's block of the result folded in.
  ReduceScatterRounds(const BucketLayout& layout, std::vector<at::Tensor>& parameters, ccl::Communicator& comm,
                      ccl::HostCompressedAllreduce* compressed = nullptr);
  ~ReduceScatterRounds() override;
  void zero_grad() override;
  void begin_micro_batch(bool last) override;
  void gradient_ready(size_t parameter) override;
  void launch_remaining() override;
  void wait_reductions() override;
  at::Tensor block_gradient(size_t bucket, int rank) const override;
  const std::vector<at::Tensor>& whole_gradients() const override { return none_; }
  GradientBytes held_bytes() const override;

 private:
  // This rank's block of the step's reduced gradient, the round being
  // filled (undefined: none), rounds complete and waiting their turn.
  struct Bucket {
    at::Tensor shard_grad;
    bool shard_has_step = false;
    at::Tensor filling;
    size_t filling_ready = 0;
    std::deque<at::Tensor> complete;
    int64_t rounds = 0;  // launched this step
  };
  struct InFlight {
    size_t bucket;
    at::Tensor staging;
    ccl::Work work;
  };
  enum class SlotState { free, unlaunched, in_flight };
  void complete_round(size_t bucket);
  void launch_rounds_in_order(bool flush);
  at::Tensor acquire_staging(size_t bucket);
  int slot_of(const at::Tensor& staging) const;  // -1: a private buffer
  void fold_oldest_round();
  // Folds the rounds whose reduction is done (wait: all of them, waiting).
  void fold_in_flight(bool wait);

  const BucketLayout& layout_;
  std::vector<at::Tensor>& parameters_;
  ccl::Communicator& comm_;
  ccl::HostCompressedAllreduce* compressed_;
  std::vector<Bucket> buckets_;
  std::vector<bool> in_round_;  // the gradient is in its bucket's filling round
  std::deque<InFlight> in_flight_;
  std::vector<at::Tensor> staging_slots_;  // shared: peers read them in place
  std::vector<SlotState> slot_state_;
  size_t next_slot_ = 0;
  std::vector<at::Tensor> private_pool_;
  int64_t staging_buffers_ = 0;
  at::TensorOptions staging_options_;
  size_t next_launch_ = 0;
  std::vector<at::Tensor> none_;
};

class BucketParameterShards {
 public:
  // Moves each parameter's data into its bucket's flat parameter buffer
  // (every holder of the parameter sees the new storage) and records the
  // stretches in this rank's blocks, their gradients views of the engine's
  // blocks.
  BucketParameterShards(const BucketLayout& layout, std::vector<at::Tensor>& parameters, ccl::Communicator& comm,
                        const BucketEngine& engine);
  ~BucketParameterShards();
  const std::vector<UpdatePiece>& owned() const { return owned_; }
  // Starts gathering every bucket's blocks from their owners, the buckets
  // holding the first parameters first.
  void gather_async();
  // Waits for the gathers of buckets `first` and after (they hold
  // parameters 0 to the last of bucket `first`). True when it waited.
  bool wait_from(size_t first);
  int64_t parameter_bytes() const;

 private:
  struct Bucket {
    at::Tensor parameters;  // the data, laid out like the bucket's gradients
    ccl::Work gather;
    bool gathering = false;
  };
  ccl::Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<UpdatePiece> owned_;
};

}  // namespace giant::parallel
