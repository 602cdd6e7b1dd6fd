#include "giant/train/progress.h"

#include <cmath>
#include <cstdio>

#include "giant/base/logging.h"

namespace giant::train {

std::string Progress::format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buffer;
}

void Progress::step(const StepReport& r) {
  if (!log_enabled(LogLevel::info)) return;
  const double eta = r.elapsed_s / static_cast<double>(r.step) *
                     static_cast<double>(r.total_steps - r.step);
  char text[320];
  if (live_) {
    std::snprintf(text, sizeof text,
                  "\r\033[Kstep %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  MFU %.1f%%  ETA %s%s",
                  static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss, r.lr,
                  r.tokens_per_s, 100.0 * r.mfu, format_eta(eta).c_str(),
                  r.skipped ? "  (skipped)" : "");
    out_ << text << std::flush;
    live_line_shown_ = true;
    return;
  }
  std::snprintf(text, sizeof text,
                "step %lld/%lld loss %.4f lr %.3e grad_norm %.3f tok/s %.0f MFU %.1f%% "
                "time data %.1fms forward %.1fms backward %.1fms optimizer %.1fms step %.1fms "
                "ETA %s%s",
                static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss, r.lr,
                r.grad_norm, r.tokens_per_s, 100.0 * r.mfu, 1e3 * r.data_s, 1e3 * r.forward_s,
                1e3 * r.backward_s, 1e3 * r.optimizer_s, 1e3 * r.step_s, format_eta(eta).c_str(),
                r.skipped ? " SKIPPED" : "");
  out_ << text << '\n' << std::flush;
}

void Progress::line(const std::string& text) {
  if (log_enabled(LogLevel::info)) show(text);
}

void Progress::warning(const std::string& text) {
  if (log_enabled(LogLevel::warn)) show("warning: " + text);
}

void Progress::show(const std::string& text) {
  if (live_line_shown_) {
    out_ << "\r\033[K";
    live_line_shown_ = false;
  }
  out_ << text << '\n' << std::flush;
}

void Progress::finish() {
  if (live_line_shown_) {
    out_ << '\n' << std::flush;
    live_line_shown_ = false;
  }
}

}  // namespace giant::train
