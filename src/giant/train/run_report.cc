#include "giant/train/run_report.h"


#include "giant/base/statistics.h"
#include "giant/base/units.h"

namespace giant::train {

void RunReporter::step(const StepReport& report, double comm_wait_s, bool overflowed, double scale_after) {
  progress_.step(report);
  const std::string step = std::to_string(report.step);
  if (overflowed) {
    progress_.line("step " + step + " skipped: gradients overflowed at loss scale " + fixed(report.loss_scale, 0) +
                   " (now " + fixed(scale_after, 0) + ")");
  } else if (report.skipped) {
    progress_.warning("step " + step + " skipped: loss " + std::to_string(report.loss) + ", gradient norm " +
                   std::to_string(report.grad_norm) + " (not finite)");
  }
  if (report.memory.measured()) {
    memory_peak_.take_max(report.memory);
    if (!memory_shown_) {
      progress_.line("memory after step " + step + " (this rank): " + describe_memory(report.memory));
      memory_shown_ = true;
    }
  }
  if (metrics_) metrics_->step(report, comm_wait_s);
  if (tensorboard_) tensorboard_->step(report);
  if (report.step == 1) first_loss_ = report.loss;
  last_loss_ = report.loss;
  if (report.step > 1 || total_steps_ == 1) {  // the first step pays for warm-up
    tokens_per_s_.push_back(report.tokens_per_s);
    mfu_.push_back(report.mfu);
    step_seconds_.push_back(report.step_s);
    comm_waits_.push_back(comm_wait_s);
  }
}

void RunReporter::evaluation(int64_t step, double train_loss, double val_loss, double elapsed_s) {
  if (metrics_) metrics_->evaluation(step, val_loss);
  if (tensorboard_) tensorboard_->evaluation(step, val_loss);
  progress_.line("step " + std::to_string(step) + "/" + std::to_string(total_steps_) + "  train loss " +
                 fixed(train_loss, 4) + "  val loss " + fixed(val_loss, 4) + "  " + fixed(median(tokens_per_s_), 0) +
                 " tok/s  MFU " + fixed(100.0 * median(mfu_), 1) + "%  elapsed " + Progress::format_eta(elapsed_s));
}

void RunReporter::fill(TrainSummary& summary) const {
  summary.first_loss = first_loss_;
  summary.last_loss = last_loss_;
  summary.tokens_per_s_median = median(tokens_per_s_);
  summary.mfu_median = median(mfu_);
  summary.step_s_median = median(step_seconds_);
  summary.comm_wait_s_median = median(comm_waits_);
  summary.memory_peak = memory_peak_;
  if (memory_peak_.measured()) progress_.line("memory peak over the run (this rank): " + describe_memory(memory_peak_));
}

}  // namespace giant::train
