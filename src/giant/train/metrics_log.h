// metrics.jsonl: one JSON object per line (one per step, one per evaluation,
// and a summary at the end), written with a JSON library so every line
// parses whatever text it carries.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "giant/train/progress.h"
#include "giant/train/trainer.h"

namespace giant::train {

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // truncates; Error naming the file

  // The step's report and its time blocked in communication, with the wall
  // clock (`time`, ISO 8601 UTC) and the process's peak memory
  // (`max_rss_bytes`) as the record is written.
  void step(const StepReport& report, double comm_wait_s);
  void evaluation(int64_t step, double val_loss);
  void summary(const TrainSummary& summary);  // the sample must be printable_utf8 already

 private:
  void write(const std::string& line);  // one line, flushed

  std::string path_;
  std::ofstream out_;
};

}  // namespace giant::train
