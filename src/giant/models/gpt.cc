#include "giant/models/gpt.h"

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/gpt_layers.h"
#include "giant/parallel/tensor_parallel/layers.h"

namespace giant::models {

parallel::LayerList gpt_layer_list(const GptConfig& config, Recompute recompute) {
  config.validate();
  parallel::LayerList list;
  // Counts are of the unsplit layers.
  list.add({"embedding", "GptEmbedding", config.embedding_parameter_count(),
            [config](const parallel::LayerContext& c) {
              return torch::nn::AnyModule(GptEmbedding(config, c));
            }});
  for (int64_t i = 0; i < config.layers; ++i) {
    list.add({"block." + std::to_string(i), "GptBlock", config.block_parameter_count(),
              [config, recompute](const parallel::LayerContext& c) {
                return torch::nn::AnyModule(GptBlock(config, c, recompute));
              }});
  }
  list.add({"final_norm", "GptFinalNorm", config.final_norm_parameter_count(), [config](const parallel::LayerContext& c) {
              return torch::nn::AnyModule(GptFinalNorm(config, c));
            }});
  // Tied to the embedding (layer 0): its weight counts there.
  list.add({"head", "GptHead", 0, [config](const parallel::LayerContext& c) {
              return torch::nn::AnyModule(GptHead(config, c, /*embedding_index=*/0));
            }});
  return list;
}

at::Tensor gpt_loss(const at::Tensor& logits, const at::Tensor& targets,
                    const parallel::TensorParallelGroup& tp) {
  return parallel::vocab_parallel_cross_entropy(logits, targets, tp);
}

void check_tensor_parallel(const GptConfig& config, int tp) {
  auto require = [tp](const char* key, int64_t value, const std::string& what) {
    if (value % tp != 0) {
      throw ConfigError(key, what + " = " + std::to_string(value) + " does not split over parallel.tp = " +
                                 std::to_string(tp) + " ranks");
    }
  };
  require("model.heads", config.heads, "model.heads");
  require("model.ffn", config.ffn_size(), "the MLP width (model.ffn, 0 meaning 4 x model.hidden)");
  require("model.vocab_pad", config.padded_vocab(),
          "the padded vocabulary (model.vocab rounded up to a multiple of model.vocab_pad)");
}

}  // namespace giant::models
