#include "giant/train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/wall_clock.h"

namespace giant::train {
namespace {

using OrderedJson = nlohmann::ordered_json;  // fields keep the order they are added in

// JSON has no NaN or infinity (the library would write null): a string keeps
// what the value was.
OrderedJson number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

std::string line_of(const OrderedJson& record) {
  // Replacing, not throwing, on ill-formed UTF-8: a record is never lost.
  return record.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

// Bytes by kind (MemoryUse's fields), without the process's RSS.
OrderedJson memory_bytes(const MemoryUse& m) {
  OrderedJson record;
  record["parameters"] = m.parameters;
  record["gradients"] = m.gradients;
  record["optimizer_state"] = m.optimizer_state;
  record["activations"] = m.activations;
  record["comm_buffers"] = m.comm_buffers;
  record["total"] = m.total();
  return record;
}

}  // namespace

// The lines of `path` worth keeping when a run resumes after `step`: the
// step and evaluation records up to it (not a summary, nor anything unreadable).
std::string records_through(const std::string& path, int64_t step) {
  std::ifstream in(path);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const OrderedJson record = OrderedJson::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object() || record.contains("summary")) continue;
    const auto found = record.find("step");
    if (found == record.end() || !found->is_number_integer() || found->get<int64_t>() > step) continue;
    kept += line + "\n";
  }
  return kept;
}

// The step records of `path` past `step`: how many, and their step time.
std::pair<int64_t, double> steps_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  std::pair<int64_t, double> after{0, 0.0};
  for (std::string line; std::getline(in, line);) {
    const OrderedJson record = OrderedJson::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object() || !record.contains("step_s")) continue;
    const auto found = record.find("step");
    if (found == record.end() || !found->is_number_integer() || found->get<int64_t>() <= step) continue;
    ++after.first;
    if (record["step_s"].is_number()) after.second += record["step_s"].get<double>();
  }
  return after;
}

MetricsLog::MetricsLog(const std::string& path, std::optional<int64_t> resumed_step, int64_t restart)
    : path_(path) {
  const std::string kept = resumed_step ? records_through(path, *resumed_step) : std::string();
  if (restart > 0) std::tie(steps_redone_, seconds_redone_) = steps_after(path, resumed_step.value_or(0));
  out_.open(path, std::ios::trunc);
  out_ << kept;
  out_.flush();
  if (!out_) {
    throw Error("cannot write '" + path + "': " + std::strerror(errno));
  }
  if (restart > 0) {
    OrderedJson record;
    record["step"] = resumed_step.value_or(0);
    record["restart"] = restart;
    record["steps_redone"] = steps_redone_;
    record["seconds_redone"] = number(seconds_redone_);
    write(line_of(record));
  }
}

void MetricsLog::step(const StepReport& r, double comm_wait_s) {
  OrderedJson record;
  record["step"] = r.step;
  record["time"] = iso8601_utc(WallClock::now());
  record["loss"] = number(r.loss);
  record["lr"] = number(r.lr);
  record["grad_norm"] = number(r.grad_norm);
  record["tokens_per_s"] = number(r.tokens_per_s);
  record["mfu"] = number(r.mfu);
  record["step_s"] = number(r.step_s);
  record["data_s"] = number(r.data_s);
  record["forward_s"] = number(r.forward_s);
  record["backward_s"] = number(r.backward_s);
  record["optimizer_s"] = number(r.optimizer_s);
  record["comm_wait_s"] = number(comm_wait_s);
  record["max_rss_bytes"] = max_resident_bytes();
  if (r.memory.measured()) record["memory_bytes"] = memory_bytes(r.memory);
  record["skipped"] = r.skipped;
  if (r.loss_scale > 0) record["loss_scale"] = number(r.loss_scale);
  if (r.checkpoint_writing) record["checkpoint_writing"] = true;
  write(line_of(record));
}

void MetricsLog::evaluation(int64_t step, double val_loss) {
  OrderedJson record;
  record["step"] = step;
  record["val_loss"] = number(val_loss);
  write(line_of(record));
}

void MetricsLog::summary(const TrainSummary& s) {
  OrderedJson record;
  record["summary"] = true;
  record["steps"] = s.steps;
  record["last_step"] = s.last_step;
  if (s.stop_signal != 0) record["stopped_by_signal"] = s.stop_signal;
  record["skipped_steps"] = s.skipped_steps;
  if (s.stop_signal == 0 || s.val_loss > 0) record["val_loss"] = number(s.val_loss);  // none when stopped early
  record["first_loss"] = number(s.first_loss);
  record["last_loss"] = number(s.last_loss);
  record["tokens_per_s_median"] = number(s.tokens_per_s_median);
  record["mfu_median"] = number(s.mfu_median);
  record["step_s_median"] = number(s.step_s_median);
  record["comm_wait_s_median"] = number(s.comm_wait_s_median);
  record["matmul_flops"] = number(s.matmul_flops);
  record["precision"] = s.precision;
  if (s.final_loss_scale > 0) record["loss_scale"] = number(s.final_loss_scale);
  record["seconds"] = number(s.seconds);
  if (s.memory_peak.measured()) {
    record["peak_memory_bytes"] = memory_bytes(s.memory_peak);
    record["max_rss_bytes"] = s.memory_peak.max_rss;
  }
  record["sample"] = s.sample;
  write(line_of(record));
}

void MetricsLog::write(const std::string& line) {
  out_ << line << '\n';
  out_.flush();
  if (!out_) {
    throw Error("writing '" + path_ + "' failed: " + std::strerror(errno));
  }
}

}  // namespace giant::train
