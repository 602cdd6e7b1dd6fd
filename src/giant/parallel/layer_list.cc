#include "giant/parallel/layer_list.h"

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/seeded_init.h"

namespace giant::parallel {

const torch::Tensor& SharedWeights::get(const std::string& key) const {
  auto it = weights_.find(key);
  GIANT_CHECK(it != weights_.end(), "shared weight '", key, "' has not been published");
  return it->second;
}

void SharedWeights::publish(const std::string& key, torch::Tensor weight) {
  GIANT_CHECK(!contains(key), "shared weight '", key, "' published twice");
  weights_.emplace(key, std::move(weight));
}

torch::Tensor LayerContext::normal(const std::string& param, at::IntArrayRef shape,
                                   double std) const {
  return normal_as(index_, param, shape, std);
}

torch::Tensor LayerContext::normal_as(int64_t owner_index, const std::string& param,
                                      at::IntArrayRef shape, double std) const {
  return seeded_normal(shape, std, parameter_seed(seed_, owner_index, param), options_);
}

torch::Tensor LayerContext::zeros(at::IntArrayRef shape) const {
  return torch::zeros(shape, options_);
}

torch::Tensor LayerContext::ones(at::IntArrayRef shape) const {
  return torch::ones(shape, options_);
}

void LayerStackImpl::append(const std::string& name, torch::nn::AnyModule module) {
  register_module(name, module.ptr());
  layers_.push_back(std::move(module));
  names_.push_back(name);
}

torch::Tensor LayerStackImpl::forward(torch::Tensor input) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (before_layer_) before_layer_(i);
    input = layers_[i].forward<torch::Tensor>(std::move(input));
    if (after_layer_) after_layer_(i, input);
  }
  return input;
}

void LayerList::add(LayerSpec spec) {
  GIANT_CHECK(!spec.name.empty() && spec.name.find('/') == std::string::npos,
              "a layer needs a name without '/', got '", spec.name, "'");
  GIANT_CHECK(static_cast<bool>(spec.build), "layer '", spec.name, "' has no build function");
  for (const auto& existing : specs_) {
    GIANT_CHECK(existing.name != spec.name, "layer name '", spec.name, "' used twice");
  }
  specs_.push_back(std::move(spec));
}

int64_t LayerList::total_parameters() const {
  int64_t total = 0;
  for (const auto& spec : specs_) {
    total += spec.num_parameters;
  }
  return total;
}

LayerStack LayerList::build(uint64_t seed, const torch::TensorOptions& options, size_t begin,
                            size_t end, TensorParallelGroup tp) const {
  GIANT_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size && (tp.size == 1 || tp.comm != nullptr),
              "bad tensor-parallel group: rank ", tp.rank, " of ", tp.size);
  GIANT_CHECK(begin <= end && end <= specs_.size(), "layer range [", begin, ", ", end,
              ") outside a list of ", specs_.size());
  LayerStack stack;
  SharedWeights shared;
  for (size_t i = begin; i < end; ++i) {
    const LayerSpec& spec = specs_[i];
    // Module names may not contain '.', layer names may.
    std::string child = spec.name;
    std::replace(child.begin(), child.end(), '.', '_');
    LayerContext context(seed, static_cast<int64_t>(i), spec.name, options, shared, tp);
    stack->append(child, spec.build(context));
  }
  return stack;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) {
    total += p.numel();
  }
  return total;
}

}  // namespace giant::parallel
