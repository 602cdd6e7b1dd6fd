// What the trainer shows while it runs: on a terminal a live line with ETA
// that rewrites itself, with a permanent line at each evaluation; otherwise
// (a pipe, a log file) one plain line per step. Steps and lines are the
// process's info messages: --log-level warn (or above) hides them, and
// shows warning()s only.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "giant/train/memory_use.h"

namespace giant::train {

struct StepReport {
  int64_t step = 0;  // 1-based
  int64_t total_steps = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, mfu = 0;
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, step_s = 0;
  double elapsed_s = 0;  // since training started
  bool skipped = false;
  double loss_scale = 0;  // the scale this step's loss was multiplied by (0: no loss scaling)
  bool checkpoint_writing = false;  // a background save was being written while this step ran
  MemoryUse memory;  // this rank's during the step (not measured: all 0)
};

class Progress {
 public:
  Progress(std::ostream& out, bool live) : out_(out), live_(live) {}
  void step(const StepReport& report);
  // A permanent line (evaluations, start-up facts); clears the live line first.
  void line(const std::string& text);
  // A line shown at --log-level warn too; starts "warning: ".
  void warning(const std::string& text);
  void finish();

  static std::string format_eta(double seconds);

 private:
  void show(const std::string& text);

  std::ostream& out_;
  bool live_;
  bool live_line_shown_ = false;
};

}  // namespace giant::train
