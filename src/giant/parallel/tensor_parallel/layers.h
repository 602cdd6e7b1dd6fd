// Megatron-style tensor-parallel layers. Each shard is the slice of the
// unsplit weight (drawn whole by the seeded initialisation, then cut), so a
// layout's weights are the single process's, split. Parameters named "tp_*"
// are shards (different on every tp rank); the others are replicated.
// With a group of size 1 every layer is its plain counterpart.
#pragma once

#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "giant/parallel/layer_list.h"
#include "giant/parallel/tensor_parallel/splits.h"

namespace giant::parallel {

// True for a parameter that is a tensor-parallel shard ("...tp_*").
bool is_tensor_parallel_shard(const std::string& parameter_name);

// y = x W^T + b with W's output rows split over the group. The input is
// replicated; the output is split along its last dimension unless
// gather_output. `stacked` > 1 splits each of that many equal row blocks on
// its own (a fused q/k/v projection keeps its three parts per rank).
class ColumnParallelLinearImpl : public torch::nn::Module, public DeclaresTensorSplits {
 public:
  ColumnParallelLinearImpl(const LayerContext& context, const std::string& name, int64_t in, int64_t out,
                           double std, bool gather_output = false, int64_t stacked = 1);
  torch::Tensor forward(torch::Tensor x);
  const torch::Tensor& weight() const { return weight_; }
  std::map<std::string, TensorSplit> own_tensor_splits() const override {
    return {{"tp_weight", {0, stacked_}}, {"tp_bias", {0, stacked_}}};
  }

 private:
  TensorParallelGroup tp_;
  bool gather_output_;
  int64_t stacked_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(ColumnParallelLinear);

// y = x W^T + b with W's input columns split over the group: the input is
// already split along its last dimension; the partial products are summed
// over the group, then the (replicated) bias is added.
class RowParallelLinearImpl : public torch::nn::Module, public DeclaresTensorSplits {
 public:
  RowParallelLinearImpl(const LayerContext& context, const std::string& name, int64_t in, int64_t out,
                        double std);
  torch::Tensor forward(torch::Tensor x);
  std::map<std::string, TensorSplit> own_tensor_splits() const override { return {{"tp_weight", {1, 1}}}; }

 private:
  TensorParallelGroup tp_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(RowParallelLinear);

// Token ids -> embeddings with the rows (vocabulary) split over the group.
// Each rank looks up the tokens in its range and the partial results are
// summed. Publishes its weight shard under `shared_key` for a tied head.
class VocabParallelEmbeddingImpl : public torch::nn::Module, public DeclaresTensorSplits {
 public:
  VocabParallelEmbeddingImpl(const LayerContext& context, const std::string& name, int64_t vocab,
                             int64_t hidden, double std, const std::string& shared_key);
  torch::Tensor forward(torch::Tensor tokens);
  std::map<std::string, TensorSplit> own_tensor_splits() const override { return {{"tp_weight", {0, 1}}}; }

 private:
  TensorParallelGroup tp_;
  torch::Tensor weight_;
};
TORCH_MODULE(VocabParallelEmbedding);

// Cuts a whole tensor as the layers above cut their weights:
// rows (dim 0) for column-parallel weights and biases and embeddings,
// columns (dim 1) for row-parallel weights; `stacked` as above.
torch::Tensor shard_rows(const torch::Tensor& full, int rank, int size, int64_t stacked = 1);
torch::Tensor shard_columns(const torch::Tensor& full, int rank, int size);

// Mean cross entropy over logits split along the vocabulary ([..., V / size],
// rank r holding entries [r V/size, (r+1) V/size)) against targets of the same
// leading shape. Only the maximum, the target's logit and the sum of
// exponentials are reduced over the group; full logits are never gathered.
// Logits of any floating dtype; the loss is computed in float32.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                           const TensorParallelGroup& tp);

}  // namespace giant::parallel
