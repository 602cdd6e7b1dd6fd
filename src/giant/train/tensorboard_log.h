// TensorBoard's event file: a run's curves for `tensorboard --logdir
// OUT_DIR/tensorboard`. TFRecord framing around Event protobuf messages,
// encoded here by hand (a handful of fields; no protobuf dependency) and
// without libtorch.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "giant/train/progress.h"

namespace giant::train {

class TensorBoardLog {
 public:
  // Removes earlier event files from `dir` (like metrics.jsonl it holds the
  // latest run), creates dir/events.out.tfevents.<unix seconds>.<hostname>
  // and writes the file_version event. Error naming the file. Resuming
  // after `resumed_step`, the earlier files stay and a SessionLog START
  // event at that step makes TensorBoard drop their later points (the
  // steps a killed run did after its checkpoint, which are redone).
  explicit TensorBoardLog(const std::string& dir, std::optional<int64_t> resumed_step = std::nullopt);

  // loss/train, optim/lr, optim/grad_norm, perf/tokens_per_s, perf/mfu,
  // perf/step_s and memory/max_rss_bytes (the process's peak); when measured,
  // this rank's bytes by kind: memory/parameters, memory/gradients,
  // memory/optimizer_state, memory/activations, memory/comm_buffers and
  // memory/total.
  void step(const StepReport& report);
  void evaluation(int64_t step, double val_loss);  // loss/val
  // run/restart (its number) and run/seconds_redone at the step a restart
  // resumed from (MetricsLog's restart record).
  void restart(int64_t step, int64_t restart, double seconds_redone);

  const std::string& path() const { return path_; }

 private:
  void write_scalars(int64_t step, const std::vector<std::pair<const char*, double>>& scalars);
  void write_record(const std::string& event);  // one TFRecord, flushed

  std::string path_;
  std::ofstream out_;
};

}  // namespace giant::train
