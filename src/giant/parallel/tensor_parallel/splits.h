// How a tensor-parallel layer cuts each parameter from its unsplit tensor,
// so that code outside the layers (checkpoints) can put shards back in
// global coordinates without knowing the layers.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch::nn {
class Module;
}

namespace giant::parallel {

struct TensorSplit {
  int dim = -1;          // the dimension cut over the tp group; -1: replicated
  int64_t stacked = 1;   // that dimension holds this many equal blocks, each cut on its own
  bool replicated() const { return dim < 0; }
};

// Implemented by modules whose own parameters are shards: their split by
// parameter name (as register_parameter named it).
class DeclaresTensorSplits {
 public:
  virtual ~DeclaresTensorSplits() = default;
  virtual std::map<std::string, TensorSplit> own_tensor_splits() const = 0;
};

// The split of every sharded parameter of `module` and its children, by the
// name named_parameters() gives it; replicated parameters are absent.
std::map<std::string, TensorSplit> tensor_parallel_splits(const torch::nn::Module& module);

}  // namespace giant::parallel
