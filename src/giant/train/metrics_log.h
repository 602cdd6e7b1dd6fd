// metrics.jsonl: one JSON object per line (one per step, one per evaluation,
// and a summary at the end), written with a JSON library so every line
// parses whatever text it carries.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "giant/train/progress.h"
#include "giant/train/trainer.h"

namespace giant::train {

class MetricsLog {
 public:
  // Truncates; or, resuming after `resumed_step`, keeps the records of the
  // steps up to it (a killed run's later ones are redone) and appends.
  // In a restart (train.restart > 0) it then records the restart: {"step":
  // the step resumed from (0: none), "restart": its number, "steps_redone"
  // and "seconds_redone": the steps the failed attempt logged past that
  // step, which are done again, and their time}. Error naming the file.
  explicit MetricsLog(const std::string& path, std::optional<int64_t> resumed_step = std::nullopt,
                      int64_t restart = 0);
  // The steps and seconds a restart redoes (0 outside a restart).
  int64_t steps_redone() const { return steps_redone_; }
  double seconds_redone() const { return seconds_redone_; }

  // The step's report and its time blocked in communication, with the wall
  // clock (`time`, ISO 8601 UTC) and the process's peak memory
  // (`max_rss_bytes`) as the record is written, and this rank's memory by
  // kind during the step (`memory_bytes`: parameters, gradients,
  // optimizer_state, activations, comm_buffers, total) when measured. The
  // summary has each kind's peak over the run (`peak_memory_bytes`).
  void step(const StepReport& report, double comm_wait_s);
  void evaluation(int64_t step, double val_loss);
  void summary(const TrainSummary& summary);  // the sample must be printable_utf8 already

 private:
  void write(const std::string& line);  // one line, flushed

  std::string path_;
  std::ofstream out_;
  int64_t steps_redone_ = 0;
  double seconds_redone_ = 0;
};

}  // namespace giant::train
