#include "giant/train/inference_model.h"

#include <torch/torch.h>

#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/loader.h"
#include "giant/models/gpt.h"
#include "giant/train/checkpoint_tokenizer.h"

namespace giant::train {

InferenceModel load_inference_model(const std::filesystem::path& checkpoint_path) {
  const std::filesystem::path dir = checkpoint::resolve_checkpoint(checkpoint_path);
  const checkpoint::CheckpointLoader loader(dir);
  const checkpoint::Manifest& m = loader.manifest();
  // Corrupt weights would generate plausible-looking nonsense: check first.
  const std::vector<std::string> problems = checkpoint::verify_checkpoint(dir, m);
  if (!problems.empty()) {
    std::string text = "checkpoint '" + dir.string() + "' is unusable:";
    for (size_t i = 0; i < problems.size() && i < 5; ++i) text += "\n  " + problems[i];
    throw checkpoint::FormatError(text);
  }
  InferenceModel model;
  model.model = m.model;
  model.step = m.step;
  model.tokenizer = data::make_tokenizer(checkpoint_tokenizer_spec(dir, m));
  // Built whole, in fp32; its drawn weights are then overwritten.
  model.layers = models::gpt_layer_list(m.model).build_all(0, torch::TensorOptions().dtype(torch::kFloat));
  std::vector<checkpoint::TensorSlice> slices;
  for (const auto& item : model.layers->named_parameters()) {
    for (auto& slice : checkpoint::slices_of("model/" + checkpoint::global_parameter_name(item.key()), item.value(),
                                             parallel::TensorSplit{}, 0, 1)) {
      slices.push_back(std::move(slice));
    }
  }
  {
    torch::NoGradGuard no_grad;
    loader.load(slices);
  }
  model.layers->eval();
  return model;
}

}  // namespace giant::train
