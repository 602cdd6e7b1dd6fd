// The token ids each micro-batch of a rank reads: training micro-batch m of
// a step is the slice [first, first + train.micro_batch) of the step's
// global samples that this data-parallel rank owns (step s's global samples
// start at s x train.global_batch, or after a resume at the checkpoint's
// consumed samples plus the steps since); validation batch b is
// samples [b x micro_batch, (b + 1) x micro_batch) of the validation order.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "giant/data/dataset.h"
#include "giant/train/run_config.h"

namespace giant::train {

struct MicroBatch {
  at::Tensor inputs, targets;  // [micro_batch, seq_len] int64
};

class MicroBatches {
 public:
  // datasets: open_datasets' splits for this config's seq_len and seed;
  // the batches are read on the host and moved to `device`.
  MicroBatches(const RunConfig& config, data::Datasets datasets, int dp_rank,
               c10::Device device = c10::Device(c10::DeviceType::CPU));

  int64_t per_step() const { return per_step_; }  // on this rank
  // A resumed run: step `step` starts at global sample `consumed_samples`
  // (what the checkpoint's run had trained on, whatever its global batch).
  void continue_from(int64_t step, int64_t consumed_samples) {
    first_step_ = step;
    first_step_sample_ = consumed_samples;
  }
  MicroBatch train(int64_t step, int64_t micro_batch) const;
  // The global sample step `step` starts at.
  int64_t first_sample_of(int64_t step) const { return first_step_sample_ + (step - first_step_) * global_batch_; }
  MicroBatch validation(int64_t batch) const;
  const data::Datasets& datasets() const { return datasets_; }

 private:
  MicroBatch load(const data::SampleSource& source, int64_t first) const;

  data::Datasets datasets_;
  int64_t micro_batch_, seq_len_, global_batch_, per_step_, rank_first_sample_;
  int64_t first_step_ = 0, first_step_sample_ = 0;
  c10::Device device_;
};

}  // namespace giant::train
