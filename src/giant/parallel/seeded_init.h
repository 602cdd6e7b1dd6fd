// Initialisation seeded per parameter, never from global generator state.
//
// A parameter's values depend only on (run seed, layer index, parameter
// name), so a layer builds the same weights on any rank, in any order, in any
// thread. Values are drawn on the CPU in float32 and then moved to the
// requested device and dtype, so every device agrees too; a tensor-parallel
// shard is later taken as a slice of the same unsplit tensor.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

namespace giant::parallel {

// The generator seed of one parameter.
uint64_t parameter_seed(uint64_t run_seed, int64_t layer_index, const std::string& name);

// Normal(0, std) values of `shape`, from the stream of parameter_seed(...).
at::Tensor seeded_normal(at::IntArrayRef shape, double std, uint64_t parameter_seed,
                         const c10::TensorOptions& options);

}  // namespace giant::parallel
