// What the step executors and the trainer need from data parallelism, whatever
// the ZeRO stage: gradients gathered over micro-batches and reduced over the
// dp ranks, and (sharded) the stretches of the parameters this rank updates.
//
// GradientReducer implements stages 0-2 (whole parameters on every rank: one
// bucket layout, reduced by an allreduce engine at stages 0 and 1 and a
// reduce-scatter engine at stage 2); ShardedParameters stage 3 (each rank
// keeps its shard of every parameter, layers gathered just before they run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/update_piece.h"

namespace giant::parallel {

// Bytes a data-parallel engine holds, by kind, now and at most since the last
// reset_peaks(). parameters: the model's tensors in the compute dtype
// (ZeRO-3: the shards plus the layers gathered at the moment); gradients:
// where gradients accumulate and are reduced into (ZeRO-2/3: the owned
// shards); comm_buffers: staging for reductions and gathers that is not
// itself gradient or parameter storage (ZeRO-2/3's per-bucket buffers).
struct HeldBytes {
  int64_t parameters = 0, gradients = 0, comm_buffers = 0;
  int64_t total() const { return parameters + gradients + comm_buffers; }
};

struct HeldBytesReport {
  HeldBytes now, peak;
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Clears every gradient for a new step.
  virtual void zero_grad() = 0;
  // Before each micro-batch's backward (`last`: the step's last backward of
  // these parameters, after which no gradient of theirs arrives; with
  // GPipe's reversed backwards, micro-batch 0's).
  virtual void begin_micro_batch(bool last) = 0;
  // Finishes the step's reductions (and any gather still in flight, so the
  // update may start). Returns the seconds it waited.
  virtual double finish() = 0;

  // The ZeRO stage the engine runs (0-3).
  virtual int zero_stage() const = 0;
  bool shards_optimizer() const { return zero_stage() >= 1; }
  // What this rank's optimizer updates, whatever the stage: every parameter
  // whole at stage 0; at stages 1-3 the stretches of parameters in this
  // rank's blocks, flat tensors whose .grad() is the reduced gradient of the
  // stretch (possibly none on a rank of a small model).
  virtual std::vector<UpdatePiece> update_pieces() const = 0;
  // Each gradient as the update reads it after finish(): at stages 0 and 1
  // every parameter's whole gradient (only this rank's blocks hold the
  // average at stage 1); at stages 2 and 3, where no whole gradient
  // outlives its reduction, those of the update pieces.
  virtual std::vector<at::Tensor> gradients() const = 0;
  // Whether every parameter stays resident whole between steps (not at
  // stage 3, where the update pieces are all a rank keeps).
  virtual bool holds_whole_parameters() const { return true; }
  // After the owned stretches were updated: stages 1 and 2 start gathering
  // the update into every rank's whole parameters (waited for by the
  // next forward layer by layer, or wait_parameters()); stage 3 has
  // nothing to gather until a layer runs.
  virtual void gather_parameters_async() = 0;
  // Waits for whatever gather is in flight; the seconds waited.
  virtual double wait_parameters() = 0;

  // How many units the gradients are reduced in (buckets or layers).
  virtual size_t num_buckets() const = 0;
  virtual HeldBytesReport held_bytes() const = 0;
  virtual void reset_peaks() = 0;

  // The error feedback of a compressed gradient wire (empty without one),
  // after finish(), and back; restore throws giant::Error (keeping the
  // current state) when the bytes do not fit this engine's buckets.
  virtual std::vector<uint8_t> wire_feedback() const { return {}; }
  virtual void restore_wire_feedback(const std::vector<uint8_t>& /*bytes*/) {
    throw Error("this data-parallel engine sends no compressed gradients");
  }
};

}  // namespace giant::parallel
