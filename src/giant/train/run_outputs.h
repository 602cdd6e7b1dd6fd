// What a run writes: the console progress (world rank 0's; the other ranks
// print to a null stream), the output directory with config.toml, and the
// metrics and TensorBoard logs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "giant/train/metrics_log.h"
#include "giant/train/progress.h"
#include "giant/train/run_config.h"
#include "giant/train/tensorboard_log.h"

namespace giant::train {

struct RunOutputs {
  // `leader`: world rank 0, which prints and writes files.
  RunOutputs(std::ostream& console, bool live, bool is_leader)
      : out(is_leader ? console : null_stream), progress(out, live && is_leader), leader(is_leader) {}
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // Creates train.out_dir and saves `config_toml` there (leader only).
  void open(const RunConfig& config, const std::string& config_toml);
  // After the resume decision: a resumed run keeps its curves.
  void open_logs(const RunConfig& config, std::optional<int64_t> resumed_step);

  std::ostream null_stream{nullptr};  // what ranks other than 0 print to
  std::ostream& out;
  Progress progress;
  bool leader = true;
  std::filesystem::path out_dir;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardLog> tensorboard;
};

}  // namespace giant::train
