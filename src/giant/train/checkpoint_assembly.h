// What a checkpoint holds of a run and how a run continues from one: this
// rank's tensors (views of its model state), the manifest (the step's
// counters, the loss scaler, the data position), and on resume the same
// loaded back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "giant/checkpoint/manifest.h"
#include "giant/train/checkpoint_state.h"
#include "giant/train/micro_batches.h"
#include "giant/train/model_state.h"
#include "giant/train/progress.h"
#include "giant/train/run_checkpoints.h"
#include "giant/train/run_config.h"
#include "giant/train/run_topology.h"

namespace giant::train {

// What checkpoint assembly reads and fills (owned by the trainer).
struct CheckpointedParts {
  const RunConfig& config;
  const RunTopology& topology;
  ModelState& state;
  MicroBatches& batches;
  RunCheckpoints& checkpoints;
  Progress& progress;
};

// The step's counters a checkpoint records beside the tensors.
struct StepCounters {
  int64_t steps_done = 0;
  int64_t bad_steps_in_a_row = 0, skipped_steps = 0;  // the step guard's
  int64_t loss_scale_skips = 0;
};

// What a resumed run continues from.
struct ResumePoint {
  int64_t start_step = 0;  // the steps the checkpoint had done
  std::filesystem::path from;
  std::optional<checkpoint::TrainState> train;  // its scalars
  // The generator state to put back just before the first step (what runs
  // before it, such as the matmul probe, draws from the generator too).
  std::optional<std::vector<uint8_t>> generator;
};

// Views of what this rank holds, as checkpoint_state.h slices them.
HeldTensors held_tensors(const ModelState& state, const RunTopology& topology);
checkpoint::Manifest manifest_at(const CheckpointedParts& parts, const StepCounters& counters);
// Saves into the tier (collective; waits for a ZeRO gather in flight first).
void save_checkpoint(const CheckpointedParts& parts, const StepCounters& counters,
                     RunCheckpoints::Tier tier = RunCheckpoints::Tier::durable);
// Loads `checkpoint_dir` into the model state and the data position, says
// where it resumed and what changed (or refuses: ConfigError).
ResumePoint resume_from(const CheckpointedParts& parts, const std::filesystem::path& checkpoint_dir);

}  // namespace giant::train
