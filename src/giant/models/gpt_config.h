// GPT dimensions (the model.* keys) and the formulas derived from them.
// No libtorch: the planner and the config checks use it too.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace giant::models {

// The MLP's nonlinearity: GELU with erf, or its tanh approximation (GPT-2's,
// "gelu_new" in Hugging Face transformers).
enum class Activation { gelu, gelu_tanh };
const char* activation_name(Activation activation);  // "gelu", "gelu_tanh"
std::optional<Activation> activation_from_name(std::string_view name);  // nullopt: no such name

// Every LayerNorm's epsilon (GPT-2's; layer_norm.cc applies it).
constexpr double kLayerNormEpsilon = 1e-5;

struct GptConfig {
  int64_t layers = 4;
  int64_t hidden = 256;
  int64_t heads = 4;
  int64_t ffn = 0;  // 0: 4 x hidden
  int64_t seq_len = 128;
  int64_t vocab = 256;
  int64_t vocab_pad = 128;  // the embedding has vocab rounded up to a multiple of this
  double dropout = 0.0;
  double init_std = 0.02;
  Activation activation = Activation::gelu;

  int64_t ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  int64_t padded_vocab() const { return (vocab + vocab_pad - 1) / vocab_pad * vocab_pad; }
  int64_t head_dim() const { return hidden / heads; }

  // ConfigError naming the model.* key at fault.
  void validate() const;

  // Parameters: embeddings (padded vocabulary and positions), blocks, final
  // norm; the head is tied to the token embedding.
  int64_t parameter_count() const;
  int64_t embedding_parameter_count() const { return (padded_vocab() + seq_len) * hidden; }
  int64_t block_parameter_count() const;
  int64_t final_norm_parameter_count() const { return 2 * hidden; }

  // Training FLOPs (forward + backward, no recomputation) per sequence:
  // per layer 3 x (2 s h (4h + 2 ffn) + 4 s^2 h), plus 6 s h V for the
  // logits. With ffn = 4h this is Narayanan et al. 2021's
  // 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) for B = 1.
  double train_flops_per_sequence() const;
};

}  // namespace giant::models
