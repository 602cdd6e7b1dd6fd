// A rank's tensors as slices of the global (unsplit) tensors a checkpoint
// stores. A tensor-parallel shard is one box of its global tensor (a fused
// q/k/v shard three boxes); a ZeRO stretch (a flat range of a shard) is the
// few boxes a row-major range cuts into. Each slice is a view of the rank's
// own memory, so saving reads it and loading writes into it in place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/parallel/tensor_parallel/splits.h"

namespace giant::checkpoint {

struct TensorSlice {
  std::string name;                   // the global tensor's, e.g. "model/block_0.qkv.weight"
  std::vector<int64_t> global_shape;  // of the whole tensor
  std::vector<int64_t> offset;        // where the box starts in it
  at::Tensor view;                    // the box's elements (shape = the box), in this rank's memory
};

// The unsplit parameter's name: "tp_" dropped from the last part, and the
// head's copy of the tied embedding named as the embedding's weight
// ("head.tp_wte" -> "embedding.wte.weight").
std::string global_parameter_name(const std::string& local_name);

// The boxes of `local`, tp rank `rank` of `size`'s shard of the global
// tensor `name` cut by `split` (replicated: one box, the whole tensor).
std::vector<TensorSlice> slices_of(const std::string& name, const at::Tensor& local,
                                   const parallel::TensorSplit& split, int rank, int size);

// The boxes of a flat stretch: `stretch` holds elements [flat_offset,
// flat_offset + stretch.numel()) (row-major) of a local tensor of shape
// `local_shape`, itself cut from `name` as above.
std::vector<TensorSlice> slices_of_stretch(const std::string& name, const at::Tensor& stretch, int64_t flat_offset,
                                           const std::vector<int64_t>& local_shape,
                                           const parallel::TensorSplit& split, int rank, int size);

}  // namespace giant::checkpoint
