#include "giant/train/sharded_model.h"

#include <algorithm>

#include "giant/models/gpt.h"
#include "giant/train/precision_choice.h"

namespace giant::train {

std::unique_ptr<parallel::ShardedParameters> build_sharded_parameters(const RunConfig& config, StageModel& model,
                                                                      ccl::Communicator& comm,
                                                                      double* wait_seconds) {
  parallel::ShardedParametersOptions options;
  options.prefetch_layers = static_cast<int>(config.parallel.zero3_prefetch);
  options.regather_each_micro_batch = config.parallel.zero3_regather;
  options.grad_dtype = scalar_type_of(config.train.grad_dtype);
  if (model.tied_index >= 0) {
    options.alone.push_back(static_cast<size_t>(model.tied_index));
  } else {
    const auto owner = std::find(model.names.begin(), model.names.end(), models::TiedWeightNames{}.owner);
    if (owner != model.names.end()) options.alone.push_back(static_cast<size_t>(owner - model.names.begin()));
  }
  return std::make_unique<parallel::ShardedParameters>(model.chunks, model.parameters, comm, std::move(options),
                                                       wait_seconds);
}

WholeParameters::WholeParameters(parallel::GradientSync* sync)
    : sharded_(dynamic_cast<parallel::ShardedParameters*>(sync)) {
  if (sharded_ != nullptr) sharded_->gather_all();
}

WholeParameters::~WholeParameters() {
  if (sharded_ != nullptr) sharded_->release_all();
}

}  // namespace giant::train
