#include "giant/train/tensorboard_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "giant/base/crc32c.h"
#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/wall_clock.h"

namespace giant::train {
namespace {

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";

// Protobuf wire format: each field is a key (number << 3 | wire type) and
// its value; integers are little-endian base-128 varints.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3
// (string), summary = 5 (Summary); Summary: value = 1 (repeated Value);
// Summary.Value: tag = 1 (string), simple_value = 2 (float).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {
    put_key(event, 2, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<const char*, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_float(entry, 2, static_cast<float>(value));
    put_bytes(summary, 1, entry);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

// Event.session_log = 7 (SessionLog: status = 1, START = 1): TensorBoard
// purges the points of earlier steps beyond this one (a restart).
std::string session_start_event(double wall_time, int64_t step) {
  std::string session;
  put_key(session, 1, kVarint);
  put_varint(session, 1);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 7, session);
  return event;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

TensorBoardLog::TensorBoardLog(const std::string& dir, std::optional<int64_t> resumed_step) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create '" + dir + "': " + error.message());
  // Event files of an earlier run would mix its curves into this one's.
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (!resumed_step && entry.path().filename().string().rfind(kEventFilePrefix, 0) == 0) {
      fs::remove(entry.path(), error);
    }
  }
  const auto now = WallClock::now();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const std::string name = std::string(kEventFilePrefix) + std::to_string(seconds) + "." + host_name();
  path_ = (fs::path(dir) / name).string();
  for (int again = 1; resumed_step && fs::exists(path_); ++again) {  // resumed within the same second
    path_ = (fs::path(dir) / (name + "." + std::to_string(again))).string();
  }
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error("cannot write '" + path_ + "': " + std::strerror(errno));
  write_record(file_version_event(unix_seconds(now)));
  if (resumed_step) write_record(session_start_event(unix_seconds(now), *resumed_step));
}

void TensorBoardLog::step(const StepReport& r) {
  std::vector<std::pair<const char*, double>> scalars{{"loss/train", r.loss},
                                                      {"optim/lr", r.lr},
                                                      {"optim/grad_norm", r.grad_norm},
                                                      {"perf/tokens_per_s", r.tokens_per_s},
                                                      {"perf/mfu", r.mfu},
                                                      {"perf/step_s", r.step_s},
                                                      {"memory/max_rss_bytes", static_cast<double>(max_resident_bytes())}};
  if (r.loss_scale > 0) scalars.emplace_back("optim/loss_scale", r.loss_scale);
  if (r.memory.measured()) {
    const MemoryUse& m = r.memory;
    const std::pair<const char*, int64_t> kinds[] = {{"memory/parameters", m.parameters},
                                                     {"memory/gradients", m.gradients},
                                                     {"memory/optimizer_state", m.optimizer_state},
                                                     {"memory/activations", m.activations},
                                                     {"memory/comm_buffers", m.comm_buffers},
                                                     {"memory/total", m.total()}};
    for (const auto& [tag, bytes] : kinds) scalars.emplace_back(tag, static_cast<double>(bytes));
  }
  write_scalars(r.step, scalars);
}

void TensorBoardLog::evaluation(int64_t step, double val_loss) { write_scalars(step, {{"loss/val", val_loss}}); }

void TensorBoardLog::restart(int64_t step, int64_t restart, double seconds_redone) {
  write_scalars(step, {{"run/restart", static_cast<double>(restart)}, {"run/seconds_redone", seconds_redone}});
}

void TensorBoardLog::write_scalars(int64_t step, const std::vector<std::pair<const char*, double>>& scalars) {
  write_record(scalars_event(unix_seconds(WallClock::now()), step, scalars));
}

// TFRecord: length (u64 little-endian), masked CRC-32C of those 8 bytes, the
// data, masked CRC-32C of the data.
void TensorBoardLog::write_record(const std::string& event) {
  std::string record;
  put_little_endian(record, event.size(), 8);
  put_little_endian(record, masked_crc32c(record), 4);
  record += event;
  put_little_endian(record, masked_crc32c(event), 4);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();  // a run killed later keeps its curves so far
  if (!out_) throw Error("writing '" + path_ + "' failed: " + std::strerror(errno));
}

}  // namespace giant::train
