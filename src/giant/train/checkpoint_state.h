// A rank's share of the run's state as slices of the checkpoint's global
// tensors: the fp32 master weights ("model/..."), AdamW's moments
// ("optim/exp_avg/...", "optim/exp_avg_sq/..."), and which of them this
// rank writes (each element of each global tensor is written by exactly
// one rank: a ZeRO shard by its owner, a dp replica by dp rank 0, a
// tp-replicated tensor by tp rank 0; the head's copy of the tied
// embedding is not written).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "giant/checkpoint/saver.h"
#include "giant/checkpoint/tensor_slices.h"
#include "giant/optim/adamw.h"
#include "giant/parallel/tensor_parallel/splits.h"

namespace giant::train {

// Views of what the trainer holds (nothing is copied).
struct HeldTensors {
  std::vector<at::Tensor> parameters;  // the model's, this rank's tp shards, in the compute dtype
  std::vector<std::string> names;      // their local names
  std::map<std::string, parallel::TensorSplit> splits;  // by local name; replicated ones absent
  // What AdamW updates: fp32 masters or the parameters themselves, whole or
  // (sharded) flat stretches starting at updated_offset in their parameter.
  std::vector<at::Tensor> updated;
  std::vector<size_t> updated_source;
  std::vector<int64_t> updated_offset;  // empty: whole parameters
  bool separate_masters = false;        // updated are fp32 copies, not the parameters
  // ZeRO-3, where whole parameters are not resident: the owned stretches in
  // the compute dtype (updated's order), which loading fills instead.
  std::vector<at::Tensor> owned_compute;
  const optim::AdamW* optimizer = nullptr;
  int tp_rank = 0, tp_size = 1, dp_rank = 0;
  int tied_copy = -1;  // the head's copy of the tied embedding, if this rank holds it
};

// The slices this rank writes.
std::vector<checkpoint::TensorSlice> slices_to_save(const HeldTensors& held);
// The slices this rank reads: every parameter (into the compute tensors;
// at ZeRO-3 into owned_compute), the masters, and with optimizer_state the
// moments.
std::vector<checkpoint::TensorSlice> slices_to_load(const HeldTensors& held, bool optimizer_state);

// The state of the generator dropout draws from on the run's device
// (device_generator), as blob "rng/<world rank>" on the CPU and
// "rng_cuda/<world rank>" on a CUDA device (the two states differ in kind),
// and putting it back.
std::string generator_blob_name(int world_rank, c10::Device device);
checkpoint::Blob generator_state_blob(int world_rank, c10::Device device);
void restore_generator_state(const std::vector<uint8_t>& bytes, c10::Device device);
// The blob holding a rank's gradient-wire error feedback (parallel.grad_wire).
std::string wire_feedback_blob_name(int world_rank);

}  // namespace giant::train
