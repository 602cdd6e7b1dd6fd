#include "giant/planner/model_spec.h"

#include <sstream>

#include "giant/base/error.h"

namespace giant::planner {

void ModelSpec::validate() const {
  auto positive = [&](int64_t value, const char* key) {
    if (value <= 0) throw ConfigError(std::string("model.") + key, "must be positive, got " + std::to_string(value));
  };
  positive(layers, "layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(seq_len, "seq_len");
  positive(vocab, "vocab");
  positive(global_batch, "global_batch");
  if (ffn < 0) throw ConfigError("model.ffn", "must be 0 (4 x hidden) or positive, got " + std::to_string(ffn));
  if (hidden % heads != 0)
    throw ConfigError("model.heads", "must divide hidden " + std::to_string(hidden) + ", got " + std::to_string(heads));
}

double layer_parameters(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn_size());
  // qkv 3h^2 + 3h, projection h^2 + h, fc1 h f + f, fc2 f h + h, 2 norms 4h.
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double embedding_parameters(const ModelSpec& m) {
  return static_cast<double>(m.vocab + m.seq_len) * static_cast<double>(m.hidden);
}

double total_parameters(const ModelSpec& m) {
  return static_cast<double>(m.layers) * layer_parameters(m) + embedding_parameters(m);
}

double layer_forward_flops(const ModelSpec& m, double sequences) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn_size());
  const double s = static_cast<double>(m.seq_len);
  // qkv + projection + two MLP GEMMs, then scores and weighted values.
  return sequences * (2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h);
}

double logit_forward_flops(const ModelSpec& m, double sequences) {
  return sequences * 2.0 * static_cast<double>(m.seq_len) * static_cast<double>(m.hidden) *
         static_cast<double>(m.vocab);
}

double model_flops_per_iteration(const ModelSpec& m, bool full_recompute) {
  // Forward, backward (2x) and, with recomputation, the forward again; the
  // logit layer is never recomputed.
  const double B = static_cast<double>(m.global_batch);
  const double passes = full_recompute ? 4.0 : 3.0;
  return passes * static_cast<double>(m.layers) * layer_forward_flops(m, B) + 3.0 * logit_forward_flops(m, B);
}

namespace {

struct Preset {
  const char* name;
  int64_t layers, hidden, heads, seq_len, global_batch;
};

// GPT-3 shapes (Brown et al. 2020, table 2.1), batch in sequences of 2048;
// gpt-13b is veGiantModel's benchmark setting; vocabulary padded as Megatron does.
constexpr Preset kPresets[] = {
    {"gpt-125m", 12, 768, 12, 2048, 256},     {"gpt-350m", 24, 1024, 16, 2048, 256},
    {"gpt-760m", 24, 1536, 16, 2048, 256},    {"gpt-1.3b", 24, 2048, 16, 2048, 512},
    {"gpt-2.7b", 32, 2560, 32, 2048, 512},    {"gpt-6.7b", 32, 4096, 32, 2048, 1024},
    {"gpt-13b", 40, 5120, 40, 256, 1536},     {"gpt-13b-2k", 40, 5120, 40, 2048, 1024},
    {"gpt-175b", 96, 12288, 96, 2048, 1536},
};
constexpr int64_t kPaddedVocab = 51200;

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

ModelSpec model_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelSpec m;
    m.name = p.name;
    m.layers = p.layers;
    m.hidden = p.hidden;
    m.heads = p.heads;
    m.seq_len = p.seq_len;
    m.vocab = kPaddedVocab;
    m.global_batch = p.global_batch;
    return m;
  }
  std::ostringstream known;
  for (const Preset& p : kPresets) known << " " << p.name;
  throw ConfigError("--model", "unknown model preset '" + name + "' (presets:" + known.str() +
                                   "; or pass a TOML file)");
}

}  // namespace giant::planner
