#include "giant/train/micro_batches.h"

#include <torch/torch.h>

namespace giant::train {
namespace {

// Validation draws from its own order, so it never depends on training length.
constexpr uint64_t kValidationSeedOffset = 0x5eed0001;

}  // namespace

MicroBatches::MicroBatches(const RunConfig& config, data::TokenCorpus corpus, int dp_rank)
    : corpus_(std::move(corpus)),
      micro_batch_(config.train.micro_batch),
      seq_len_(config.model.seq_len),
      global_batch_(config.train.global_batch),
      per_step_(config.train.micro_batches(config.parallel.dp)),
      rank_first_sample_(dp_rank * (config.train.global_batch / config.parallel.dp)) {
  const auto seed = static_cast<uint64_t>(config.train.seed);
  train_.emplace(static_cast<int64_t>(corpus_.train.size()), seq_len_, seed, "train");
  validation_.emplace(static_cast<int64_t>(corpus_.val.size()), seq_len_, seed + kValidationSeedOffset,
                      "validation");
}

MicroBatch MicroBatches::load(const data::SequenceSampler& sampler, const std::vector<int32_t>& tokens,
                              int64_t first) const {
  MicroBatch batch;
  batch.inputs = torch::empty({micro_batch_, seq_len_}, torch::kLong);
  batch.targets = torch::empty({micro_batch_, seq_len_}, torch::kLong);
  sampler.fill(tokens, first, micro_batch_, batch.inputs.data_ptr<int64_t>(), batch.targets.data_ptr<int64_t>());
  return batch;
}

MicroBatch MicroBatches::train(int64_t step, int64_t micro_batch) const {
  return load(*train_, corpus_.train, first_sample_of(step) + rank_first_sample_ + micro_batch * micro_batch_);
}

MicroBatch MicroBatches::validation(int64_t batch) const {
  return load(*validation_, corpus_.val, batch * micro_batch_);
}

}  // namespace giant::train
