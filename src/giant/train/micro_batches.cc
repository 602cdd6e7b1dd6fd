#include "giant/train/micro_batches.h"

#include <torch/torch.h>

namespace giant::train {

MicroBatches::MicroBatches(const RunConfig& config, data::Datasets datasets, int dp_rank, c10::Device device)
    : datasets_(std::move(datasets)),
      micro_batch_(config.layout.micro_batch),
      seq_len_(config.model.seq_len),
      global_batch_(config.train.global_batch),
      per_step_(config.layout.micro_batches(config.train.global_batch)),
      rank_first_sample_(dp_rank * (config.train.global_batch / config.layout.dp)),
      device_(device) {}

MicroBatch MicroBatches::load(const data::SampleSource& source, int64_t first) const {
  MicroBatch batch;
  batch.inputs = torch::empty({micro_batch_, seq_len_}, torch::kLong);
  batch.targets = torch::empty({micro_batch_, seq_len_}, torch::kLong);
  int64_t* inputs = batch.inputs.data_ptr<int64_t>();
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  std::vector<int32_t> tokens(static_cast<size_t>(seq_len_ + 1));
  for (int64_t r = 0; r < micro_batch_; ++r) {
    source.sample(first + r, tokens.data());
    std::copy(tokens.begin(), tokens.end() - 1, inputs + r * seq_len_);
    std::copy(tokens.begin() + 1, tokens.end(), targets + r * seq_len_);
  }
  if (!device_.is_cpu()) batch = {batch.inputs.to(device_), batch.targets.to(device_)};
  return batch;
}

MicroBatch MicroBatches::train(int64_t step, int64_t micro_batch) const {
  return load(*datasets_.train, first_sample_of(step) + rank_first_sample_ + micro_batch * micro_batch_);
}

MicroBatch MicroBatches::validation(int64_t batch) const {
  return load(*datasets_.validation, batch * micro_batch_);
}

}  // namespace giant::train
