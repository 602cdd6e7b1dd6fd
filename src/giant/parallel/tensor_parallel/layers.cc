#include "giant/parallel/tensor_parallel/layers.h"

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void require_divisible(int64_t value, int size, const std::string& what) {
  GIANT_CHECK(value % size == 0, what, " = ", value, " does not split over ", size, " tensor-parallel ranks");
}

// Megatron's vocab-parallel cross entropy as one autograd function: the
// gradient is softmax minus the one-hot target, on this rank's columns only.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets,
                               ccl::Communicator* comm, double* clock) {
    const int64_t local_vocab = logits.size(-1);
    const int64_t start = comm->rank() * local_vocab;
    torch::Tensor flat = logits.reshape({-1, local_vocab});
    torch::Tensor flat_targets = targets.reshape({-1});
    torch::Tensor max = std::get<0>(flat.max(1));
    Stopwatch watch;
    allreduce_(max, *comm, ccl::ReduceOp::max);
    double waited = watch.seconds();
    torch::Tensor shifted = flat - max.unsqueeze(1);
    torch::Tensor in_range = (flat_targets >= start) & (flat_targets < start + local_vocab);
    torch::Tensor local_targets = (flat_targets - start).masked_fill(~in_range, 0);
    torch::Tensor target_logit = shifted.gather(1, local_targets.unsqueeze(1)).squeeze(1).masked_fill(~in_range, 0);
    torch::Tensor exp = shifted.exp();
    torch::Tensor sum_exp = exp.sum(1);
    // One reduction for both: [target logit, sum of exponentials].
    torch::Tensor both = torch::stack({target_logit, sum_exp});
    watch.reset();
    allreduce_(both, *comm, ccl::ReduceOp::sum);
    if (clock) *clock += waited + watch.seconds();
    torch::Tensor losses = both[1].log() - both[0];
    exp.div_(both[1].unsqueeze(1));  // now the softmax, kept for backward
    ctx->save_for_backward({exp, local_targets, in_range});
    ctx->saved_data["rows"] = flat.size(0);
    ctx->saved_data["shape"] = logits.sizes().vec();
    return losses.mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor grad = saved[0].clone();
    const torch::Tensor& local_targets = saved[1];
    const torch::Tensor& in_range = saved[2];
    grad.scatter_add_(1, local_targets.unsqueeze(1), -in_range.to(grad.dtype()).unsqueeze(1));
    grad.mul_(grads[0] / static_cast<double>(ctx->saved_data["rows"].toInt()));
    return {grad.view(ctx->saved_data["shape"].toIntVector()), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool is_tensor_parallel_shard(const std::string& parameter_name) {
  const auto dot = parameter_name.rfind('.');
  return parameter_name.compare(dot == std::string::npos ? 0 : dot + 1, 3, "tp_") == 0;
}

torch::Tensor shard_rows(const torch::Tensor& full, int rank, int size, int64_t stacked) {
  if (size == 1) return full;
  require_divisible(full.size(0), static_cast<int>(stacked), "rows");
  std::vector<int64_t> shape{stacked, full.size(0) / stacked};
  for (int64_t d = 1; d < full.dim(); ++d) shape.push_back(full.size(d));
  torch::Tensor blocks = full.reshape(shape);
  require_divisible(blocks.size(1), size, "rows per block");
  std::vector<int64_t> out_shape{full.size(0) / size};
  for (int64_t d = 1; d < full.dim(); ++d) out_shape.push_back(full.size(d));
  return local_slice(blocks, rank, size, 1).reshape(out_shape).contiguous();
}

torch::Tensor shard_columns(const torch::Tensor& full, int rank, int size) {
  if (size == 1) return full;
  require_divisible(full.size(1), size, "columns");
  return local_slice(full, rank, size, 1).contiguous();
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const LayerContext& c, const std::string& name, int64_t in,
                                                   int64_t out, double std, bool gather_output, int64_t stacked)
    : tp_(c.tp()), gather_output_(gather_output), stacked_(stacked) {
  // Gathering concatenates the ranks' [block 0 | block 1 | ...] parts, which
  // is not the unsplit layer's column order when stacked > 1; refused at any
  // tp, so that a configuration does not fail only when split.
  GIANT_CHECK(!(gather_output && stacked > 1), name, ": gather_output with stacked = ", stacked,
              " would not give the unsplit layer's column order");
  require_divisible(out, stacked, name + " output features");
  require_divisible(out / stacked, tp_.size, name + " output features per block");
  weight_ = register_parameter("tp_weight", shard_rows(c.normal(name + "_weight", {out, in}, std), tp_.rank,
                                                       tp_.size, stacked));
  bias_ = register_parameter("tp_bias", c.zeros({out / tp_.size}));
}

torch::Tensor ColumnParallelLinearImpl::forward(torch::Tensor x) {
  if (tp_.size == 1) return torch::linear(x, weight_, bias_);
  torch::Tensor y = torch::linear(copy_to_region(x, *tp_.comm, tp_.comm_seconds), weight_, bias_);
  return gather_output_ ? gather_from_region(y, *tp_.comm, -1, tp_.comm_seconds) : y;
}

RowParallelLinearImpl::RowParallelLinearImpl(const LayerContext& c, const std::string& name, int64_t in,
                                             int64_t out, double std)
    : tp_(c.tp()) {
  require_divisible(in, tp_.size, name + " input features");
  weight_ = register_parameter("tp_weight",
                               shard_columns(c.normal(name + "_weight", {out, in}, std), tp_.rank, tp_.size));
  bias_ = register_parameter("bias", c.zeros({out}));
}

torch::Tensor RowParallelLinearImpl::forward(torch::Tensor x) {
  if (tp_.size == 1) return torch::linear(x, weight_, bias_);
  return reduce_from_region(torch::linear(x, weight_), *tp_.comm, tp_.comm_seconds) + bias_;
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(const LayerContext& c, const std::string& name,
                                                       int64_t vocab, int64_t hidden, double std,
                                                       const std::string& shared_key)
    : tp_(c.tp()) {
  require_divisible(vocab, tp_.size, name + " rows (the padded vocabulary)");
  weight_ = register_parameter("tp_weight", shard_rows(c.normal(name, {vocab, hidden}, std), tp_.rank, tp_.size));
  if (!shared_key.empty()) c.shared().publish(shared_key, weight_);
}

torch::Tensor VocabParallelEmbeddingImpl::forward(torch::Tensor tokens) {
  if (tp_.size == 1) return torch::embedding(weight_, tokens);
  const int64_t rows = weight_.size(0), start = tp_.rank * rows;
  torch::Tensor outside = (tokens < start) | (tokens >= start + rows);
  torch::Tensor out = torch::embedding(weight_, (tokens - start).masked_fill(outside, 0));
  out.masked_fill_(outside.unsqueeze(-1), 0.0);  // its gradient needs only the indices
  return reduce_from_region(out, *tp_.comm, tp_.comm_seconds);
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& low_precision_logits, const torch::Tensor& targets,
                                           const TensorParallelGroup& tp) {
  // The loss and its reductions in float32 whatever the model computes in.
  const torch::Tensor logits = low_precision_logits.to(torch::kFloat);
  if (tp.size == 1) {
    return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  return VocabParallelCrossEntropy::apply(logits, targets, tp.comm, tp.comm_seconds);
}

}  // namespace giant::parallel
