#include "giant/parallel/tensor_parallel/splits.h"

#include <torch/nn/module.h>

namespace giant::parallel {

std::map<std::string, TensorSplit> tensor_parallel_splits(const torch::nn::Module& module) {
  std::map<std::string, TensorSplit> splits;
  for (const auto& item : module.named_modules()) {
    const auto* declares = dynamic_cast<const DeclaresTensorSplits*>(item.value().get());
    if (declares == nullptr) continue;
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& [name, split] : declares->own_tensor_splits()) splits[prefix + name] = split;
  }
  return splits;
}

}  // namespace giant::parallel
