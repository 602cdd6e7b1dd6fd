// A checkpoint's model in one process, for generation: whatever layout
// saved it, its fp32 weights loaded into a whole (dp = tp = pp = 1) model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "giant/data/tokenizer.h"
#include "giant/parallel/layer_list.h"
#include "giant/train/run_config.h"

namespace giant::train {

struct InferenceModel {
  models::GptConfig model;
  parallel::LayerStack layers{nullptr};  // embedding .. head, in eval mode
  std::unique_ptr<data::Tokenizer> tokenizer;
  int64_t step = 0;  // the checkpoint's
};

// `checkpoint`: a checkpoint folder, or a checkpoint.dir (its latest).
// Every file is verified first (size, CRC-32C, pieces): FormatError naming
// the file when one is unreadable or corrupt.
InferenceModel load_inference_model(const std::filesystem::path& checkpoint);

}  // namespace giant::train
