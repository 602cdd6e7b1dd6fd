// A GPT model as the planner sees it: its dimensions and the training batch,
// and the formulas that follow from them (parameters, FLOPs), from Narayanan
// et al. 2021 (docs/reference/published-figures.md), generalised to any ffn size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace giant::planner {

struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;  // 0 means 4 * hidden
  int64_t seq_len = 0;
  int64_t vocab = 0;
  int64_t global_batch = 0;  // sequences per optimizer step over all dp ranks

  int64_t ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  // Throws ConfigError naming the first bad field.
  void validate() const;
};

// Parameters of one transformer layer: attention and MLP weights, their
// biases and two layer norms (12 h^2 + 13 h when ffn = 4h).
double layer_parameters(const ModelSpec& model);
// Word and position embeddings, tied with the logit layer: (V + s) h.
double embedding_parameters(const ModelSpec& model);
// 12 L h^2 (1 + 13/(12h) + (V+s)/(12 L h)) when ffn = 4h.
double total_parameters(const ModelSpec& model);

// Forward FLOPs of one layer for `sequences` sequences: its GEMMs only
// (24 s h^2 + 4 s^2 h per sequence when ffn = 4h).
double layer_forward_flops(const ModelSpec& model, double sequences);
// Forward FLOPs of the logit layer: 2 s h V per sequence.
double logit_forward_flops(const ModelSpec& model, double sequences);

// FLOPs per iteration as the published sources count them, with full
// recomputation: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)); without it,
// 72 B s L h^2 (1 + s/(6h) + V/(12 L h)).
double model_flops_per_iteration(const ModelSpec& model, bool full_recompute);

// Presets from 125M to 175B (GPT-3 shapes), "gpt-13b" as veGiantModel
// benchmarked it (sequence 256, global batch 1536).
std::vector<std::string> model_preset_names();
// Throws ConfigError listing the presets when `name` is not one.
ModelSpec model_preset(const std::string& name);

}  // namespace giant::planner
