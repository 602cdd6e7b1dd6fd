#include "giant/train/inference_model.h"

#include "giant/base/error.h"

// Placeholder: implemented by issue 18 work in progress (giant generate links
// against it meanwhile).
namespace giant::train {

InferenceModel load_inference_model(const std::filesystem::path& checkpoint) {
  throw Error("loading a checkpoint for generation ('" + checkpoint.string() + "') is not built yet");
}

}  // namespace giant::train
