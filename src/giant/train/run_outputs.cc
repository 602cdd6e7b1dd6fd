#include "giant/train/run_outputs.h"

#include <fstream>
#include <system_error>

#include "giant/base/error.h"

namespace giant::train {

void RunOutputs::open(const RunConfig& config, const std::string& config_toml) {
  out_dir = config.train.out_dir;
  if (!leader) return;
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    throw ConfigError("train.out_dir", "cannot create '" + config.train.out_dir + "': " + error.message());
  }
  std::ofstream saved(out_dir / "config.toml", std::ios::trunc);
  saved << config_toml;
  if (!saved) throw ConfigError("train.out_dir", "cannot write '" + (out_dir / "config.toml").string() + "'");
}

void RunOutputs::open_logs(const RunConfig& config, std::optional<int64_t> resumed_step) {
  if (!leader) return;
  const int64_t restart = config.train.restart;
  metrics = std::make_unique<MetricsLog>((out_dir / "metrics.jsonl").string(), resumed_step, restart);
  if (config.train.tensorboard) {
    tensorboard = std::make_unique<TensorBoardLog>((out_dir / "tensorboard").string(), resumed_step);
    if (restart > 0) tensorboard->restart(resumed_step.value_or(0), restart, metrics->seconds_redone());
  }
}

}  // namespace giant::train
