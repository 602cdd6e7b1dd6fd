// A model as an ordered list of named layer specs.
//
// A spec knows its type name and parameter count without being built, and
// builds its module lazily, so a pipeline stage builds only its own layers
// and the planner counts parameters without allocating them. Any module with
// a tensor-to-tensor forward can be held. Weights are drawn by
// LayerContext::normal, seeded per (run seed, layer index, parameter name).
//
// Tied layers share a weight by key: the first layer built in a process that
// owns the key publishes it; a later layer naming the same key uses that
// tensor and does not register it again. Where the owner is not built in the
// process (another pipeline stage), the user builds its own copy from the
// owner's seed, so both start identical.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

namespace giant::ccl {
class Communicator;
}

namespace giant::parallel {

// The tensor-parallel group a layer is built for (size 1: no splitting).
struct TensorParallelGroup {
  ccl::Communicator* comm = nullptr;  // null only when size is 1
  int rank = 0;
  int size = 1;
  // When set, the seconds spent blocked in the group's collectives are added here.
  double* comm_seconds = nullptr;
};

// Weights shared between layers of one process, by key.
class SharedWeights {
 public:
  bool contains(const std::string& key) const { return weights_.count(key) != 0; }
  const torch::Tensor& get(const std::string& key) const;
  void publish(const std::string& key, torch::Tensor weight);

 private:
  std::map<std::string, torch::Tensor> weights_;
};

// What a spec's build function gets.
class LayerContext {
 public:
  LayerContext(uint64_t seed, int64_t index, std::string name, torch::TensorOptions options,
               SharedWeights& shared, TensorParallelGroup tp = {})
      : seed_(seed), index_(index), name_(std::move(name)), options_(options), shared_(shared), tp_(tp) {}

  int64_t index() const { return index_; }
  const std::string& name() const { return name_; }
  const torch::TensorOptions& options() const { return options_; }
  SharedWeights& shared() const { return shared_; }
  const TensorParallelGroup& tp() const { return tp_; }

  // Normal(0, std) weights for this layer's parameter `param`.
  torch::Tensor normal(const std::string& param, at::IntArrayRef shape, double std) const;
  // The same, as layer `owner_index` would draw them (for tied copies).
  torch::Tensor normal_as(int64_t owner_index, const std::string& param, at::IntArrayRef shape,
                          double std) const;
  torch::Tensor zeros(at::IntArrayRef shape) const;
  torch::Tensor ones(at::IntArrayRef shape) const;

 private:
  uint64_t seed_;
  int64_t index_;
  std::string name_;
  torch::TensorOptions options_;
  SharedWeights& shared_;
  TensorParallelGroup tp_;
};

struct LayerSpec {
  std::string name;       // unique in the list, e.g. "block.3"
  std::string type_name;  // e.g. "GptBlock"
  // Parameters this layer owns; a tied weight counts with its owner only.
  int64_t num_parameters = 0;
  std::function<torch::nn::AnyModule(const LayerContext&)> build;
};

// The built layers of a range of the list, in order, as named children.
class LayerStackImpl : public torch::nn::Module {
 public:
  void append(const std::string& name, torch::nn::AnyModule module);
  // Runs every layer in order; layer i's output is layer i+1's input.
  torch::Tensor forward(torch::Tensor input);
  // Called with i before layer i runs (e.g. to wait until its parameters
  // have arrived); empty to remove.
  void set_before_layer(std::function<void(size_t)> hook) { before_layer_ = std::move(hook); }
  // Called with i and its output after layer i ran (e.g. to free its
  // parameters, or hook the output's gradient); empty to remove.
  void set_after_layer(std::function<void(size_t, const torch::Tensor&)> hook) { after_layer_ = std::move(hook); }
  size_t size() const { return layers_.size(); }
  torch::nn::AnyModule& layer(size_t i) { return layers_.at(i); }
  const std::string& layer_name(size_t i) const { return names_.at(i); }

 private:
  std::vector<torch::nn::AnyModule> layers_;
  std::vector<std::string> names_;
  std::function<void(size_t)> before_layer_;
  std::function<void(size_t, const torch::Tensor&)> after_layer_;
};
TORCH_MODULE(LayerStack);

class LayerList {
 public:
  void add(LayerSpec spec);  // names must be unique
  size_t size() const { return specs_.size(); }
  const LayerSpec& at(size_t i) const { return specs_.at(i); }
  const std::vector<LayerSpec>& specs() const { return specs_; }
  int64_t total_parameters() const;

  // Builds layers [begin, end) with weights seeded by `seed`, split for
  // the tensor-parallel group `tp`.
  LayerStack build(uint64_t seed, const torch::TensorOptions& options, size_t begin, size_t end,
                   TensorParallelGroup tp = {}) const;
  LayerStack build_all(uint64_t seed, const torch::TensorOptions& options,
                       TensorParallelGroup tp = {}) const {
    return build(seed, options, 0, specs_.size(), tp);
  }

 private:
  std::vector<LayerSpec> specs_;
};

// Parameters of a module counted by element.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace giant::parallel
