#include "giant/models/gpt_config.h"

#include <string>

#include "giant/base/error.h"

namespace giant::models {
namespace {

void require_positive(const char* key, int64_t value) {
  if (value <= 0) {
    throw ConfigError(key, "must be positive, got " + std::to_string(value));
  }
}

}  // namespace

const char* activation_name(Activation activation) {
  return activation == Activation::gelu_tanh ? "gelu_tanh" : "gelu";
}

std::optional<Activation> activation_from_name(std::string_view name) {
  for (Activation a : {Activation::gelu, Activation::gelu_tanh}) {
    if (name == activation_name(a)) return a;
  }
  return std::nullopt;
}

void GptConfig::validate() const {
  require_positive("model.layers", layers);
  require_positive("model.hidden", hidden);
  require_positive("model.heads", heads);
  require_positive("model.seq_len", seq_len);
  require_positive("model.vocab", vocab);
  require_positive("model.vocab_pad", vocab_pad);
  if (ffn < 0) {
    throw ConfigError("model.ffn", "must be positive (or 0 for 4 x model.hidden), got " +
                                       std::to_string(ffn));
  }
  if (hidden % heads != 0) {
    throw ConfigError("model.heads", "must divide model.hidden: " + std::to_string(hidden) +
                                         " is not a multiple of " + std::to_string(heads));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw ConfigError("model.dropout", "must be in [0, 1), got " + std::to_string(dropout));
  }
  if (!(init_std > 0.0)) {
    throw ConfigError("model.init_std", "must be positive, got " + std::to_string(init_std));
  }
}

int64_t GptConfig::block_parameter_count() const {
  const int64_t h = hidden, f = ffn_size();
  return 2 * 2 * h            // two LayerNorms
         + 3 * h * h + 3 * h  // qkv
         + h * h + h          // attention output
         + f * h + f          // fc1
         + h * f + h;         // fc2
}

int64_t GptConfig::parameter_count() const {
  return embedding_parameter_count() + layers * block_parameter_count() + final_norm_parameter_count();
}

double GptConfig::train_flops_per_sequence() const {
  const double s = static_cast<double>(seq_len), h = static_cast<double>(hidden);
  const double f = static_cast<double>(ffn_size()), v = static_cast<double>(padded_vocab());
  const double per_layer = 3.0 * (2.0 * s * h * (4.0 * h + 2.0 * f) + 4.0 * s * s * h);
  return static_cast<double>(layers) * per_layer + 6.0 * s * h * v;
}

}  // namespace giant::models
