// ZeRO stage 3 (Rajbhandari et al. 2020): parameters, gradients and
// optimizer state sharded over the dp group.
//
// Each layer's parameters (a unit; a weight tied across pipeline stages is a
// unit of its own, so its shards cover the same elements on every stage
// holding it) live as one flat buffer padded to dp equal blocks, of which a
// rank keeps only its own block between uses. Hooks on every layer of the
// chunks gather a layer's buffer just before its forward (the next
// `prefetch_layers` layers' gathers started behind it) and free it after;
// a hook on the layer's output gathers it again before its backward (and
// before its recomputation). As backward completes a unit's gradients they
// are reduce-scattered (average) into this rank's gradient shard and the
// unit's full-size gradient is dropped; later micro-batches add into the
// shard. With `regather_each_micro_batch` false, a unit gathered in a step
// stays gathered until the step's last backward of it (fewer gathers, a
// pipeline stage's whole weights held during the step).
//
// Works on tensor-parallel shards (each rank shards its own tp shard over
// dp) and in any precision: the buffers are in the parameters' dtype, the
// gradient shards in grad_dtype. Gathers and reductions run on `comm`, a
// communicator used by nothing else; a failed peer surfaces as ccl's error
// (CommError/TimeoutError) from the hook or from finish().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "giant/ccl/communicator.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/parallel/layer_list.h"

namespace giant::parallel {

struct ShardedParametersOptions {
  int prefetch_layers = 1;               // parallel.zero3_prefetch
  bool regather_each_micro_batch = true;  // parallel.zero3_regather
  c10::optional<at::ScalarType> grad_dtype;  // default: each parameter's own
  std::vector<size_t> alone;             // parameters that are a unit of their own
};

class ShardedParameters : public GradientSync {
 public:
  // `chunks`: this rank's stages in order; `parameters`: theirs, numbered
  // chunk by chunk and layer by layer (checked). Keeps this rank's block of
  // each unit and frees the rest; installs the hooks. Seconds blocked in
  // gathers are added to *wait_seconds (which must outlive this).
  ShardedParameters(std::vector<LayerStack>& chunks, std::vector<at::Tensor> parameters, ccl::Communicator& comm,
                    ShardedParametersOptions options, double* wait_seconds);
  ~ShardedParameters() override;
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  void zero_grad() override;
  void begin_micro_batch(bool last) override;
  double finish() override;
  int zero_stage() const override { return 3; }
  std::vector<UpdatePiece> update_pieces() const override { return pieces_; }
  std::vector<at::Tensor> gradients() const override;
  bool holds_whole_parameters() const override { return false; }
  void gather_parameters_async() override {}
  double wait_parameters() override;
  size_t num_buckets() const override;
  HeldBytesReport held_bytes() const override;
  void reset_peaks() override;

  // Gathers every unit and keeps them until release_all() (generation
  // after training, or anything else that reads whole parameters outside
  // the layers' own forward). Collective.
  void gather_all();
  void release_all();

  // An Error: no whole gradient outlives its reduction (read update_pieces()).
  const at::Tensor& grad_view(size_t parameter) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::vector<UpdatePiece> pieces_;
};

}  // namespace giant::parallel
