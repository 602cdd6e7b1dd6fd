#include "giant/train/stage_model.h"

#include <torch/torch.h>

#include "giant/models/gpt.h"

namespace giant::train {

parallel::LayerList run_layer_list(const RunConfig& config) {
  return models::gpt_layer_list(config.model, config.layout.recompute);
}

planner::StageBounds partition_stages(const RunConfig& config, const parallel::LayerList& layers) {
  std::vector<planner::PartitionLayer> described;
  for (const auto& spec : layers.specs()) described.push_back({spec.type_name, spec.num_parameters});
  const int stages = config.layout.pp * config.layout.virtual_stages;  // both checked by the schedule's rules
  return planner::partition_layers(described, stages, config.parallel.partition);
}

StageModel build_stage_model(const RunConfig& config, const parallel::LayerList& layers, int pp_rank,
                             const parallel::TensorParallelGroup& tp, c10::Device device) {
  StageModel model;
  const int pp = config.layout.pp;
  const auto seed = static_cast<uint64_t>(config.train.seed);
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  model.bounds = partition_stages(config, layers);
  for (int chunk = 0; chunk < config.layout.virtual_stages; ++chunk) {
    const int stage = chunk * pp + pp_rank;
    model.stages.push_back(stage);
    model.chunks.push_back(layers.build(seed, options, model.bounds[stage], model.bounds[stage + 1], tp));
  }
  const models::TiedWeightNames tied;
  for (const auto& chunk : model.chunks) {
    for (const auto& item : chunk->named_parameters()) {
      if (pp > 1 && (item.key() == tied.owner || item.key() == tied.copy)) {
        model.tied_index = static_cast<int>(model.parameters.size());
        model.tied_copy = item.key() == tied.copy;
      }
      model.names.push_back(item.key());
      model.parameters.push_back(item.value());
    }
  }
  return model;
}

std::vector<std::string> describe_stages(const RunConfig& config, const parallel::LayerList& layers,
                                         const planner::StageBounds& bounds) {
  std::vector<std::string> lines;
  const int pp = config.layout.pp;
  for (size_t stage = 0; stage + 1 < bounds.size(); ++stage) {
    int64_t parameters = 0;
    std::string names;
    for (size_t i = bounds[stage]; i < bounds[stage + 1]; ++i) {
      parameters += layers.at(i).num_parameters;
      names += (names.empty() ? "" : ", ") + layers.at(i).name;
    }
    lines.push_back("stage " + std::to_string(stage) + " (pp rank " + std::to_string(static_cast<int>(stage) % pp) +
                    "): " + names + "; " + std::to_string(parameters) + " parameters");
  }
  return lines;
}

}  // namespace giant::train
