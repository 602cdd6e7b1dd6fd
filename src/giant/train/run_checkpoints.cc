#include "giant/train/run_checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>

#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/ccl/communicator.h"
#include "giant/checkpoint/loader.h"
#include "giant/parallel/agreement.h"
#include "giant/train/checkpoint_tokenizer.h"
#include "giant/train/resume_check.h"
#include "giant/train/run_report.h"

namespace giant::train {
namespace {

namespace fs = std::filesystem;

checkpoint::SaverOptions saver_options(const RunConfig& config, const FaultInjector& faults) {
  checkpoint::SaverOptions options;
  options.after_write = [faults](int64_t step) { faults.at(FaultPhase::checkpoint, step); };
  options.root = config.checkpoint.dir;
  options.keep = config.checkpoint.keep;
  options.background = config.checkpoint.async;
  options.tokenizer_files = carried_tokenizer_files(config.data.tokenizer);
  return options;
}

// The local tier's: its folder, only the newest kept, written at once (a
// copy into memory takes about as long as the background save's own copy).
checkpoint::SaverOptions local_saver_options(const RunConfig& config, const FaultInjector& faults) {
  checkpoint::SaverOptions options = saver_options(config, faults);
  options.root = config.checkpoint.local_dir;
  options.keep = 1;
  options.background = false;
  return options;
}

// Whether every rank sees the same local folder (collective): each writes a
// file into it and looks for the others'. A folder in each host's own
// memory is not one the ranks of several hosts share, and a checkpoint's
// parts must meet in one folder. ConfigError naming the key when not.
void check_local_root_shared(const fs::path& root, ccl::Communicator* world) {
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  const fs::path mine = root / (".tmp.probe.rank_" + std::to_string(rank));
  std::error_code error;
  fs::create_directories(root, error);
  if (!error) std::ofstream(mine).put('\n');
  const bool written = !error && fs::exists(mine, error);
  if (!parallel::on_every_rank(written, world)) {
    throw ConfigError("checkpoint.local_dir", "cannot write into '" + root.string() + "'" +
                                                  (written ? " on another rank (see its log)" : ""));
  }
  int missing = -1;
  for (int r = 0; r < size && missing < 0; ++r) {
    if (!fs::exists(root / (".tmp.probe.rank_" + std::to_string(r)), error)) missing = r;
  }
  const bool shared = parallel::on_every_rank(missing < 0, world);
  fs::remove(mine, error);
  if (!shared) {
    throw ConfigError("checkpoint.local_dir",
                      "'" + root.string() + "' is not one folder every rank sees" +
                          (missing >= 0 ? " (rank " + std::to_string(rank) + " does not see rank " +
                                              std::to_string(missing) + "'s file in it)"
                                        : "") +
                          ": name a folder on storage all hosts share, or set checkpoint.local_every = 0");
  }
}

}  // namespace

RunCheckpoints::RunCheckpoints(const RunConfig& config, ccl::Communicator* world, Progress& progress,
                               const FaultInjector& faults)
    : config_(config), world_(world), progress_(progress), durable_(saver_options(config, faults), world) {
  if (config.checkpoint.local_every <= 0) return;
  check_local_root_shared(config.checkpoint.local_dir, world);
  local_ = std::make_unique<checkpoint::CheckpointSaver>(local_saver_options(config, faults), world);
  progress_.line("local checkpoints every " + std::to_string(config.checkpoint.local_every) + " step" +
                 (config.checkpoint.local_every == 1 ? "" : "s") + " in " + config.checkpoint.local_dir);
}

checkpoint::SavedLayout RunCheckpoints::layout() const {
  const Layout& l = config_.layout;
  checkpoint::SavedLayout layout;
  layout.dp = l.dp;
  layout.tp = l.tp;
  layout.pp = l.pp;
  layout.virtual_stages = l.virtual_stages;
  layout.zero = l.dp > 1 ? l.zero : 0;
  layout.schedule = schedule_name(l.schedule);
  layout.partition = config_.parallel.partition;
  layout.precision = precision_name(config_.train.precision);
  layout.grad_dtype = precision_name(config_.train.grad_dtype);
  layout.world_size = l.devices();
  return layout;
}

std::vector<std::string> RunCheckpoints::problems_of(const fs::path& candidate) {
  const int rank = world_ ? world_->rank() : 0, size = world_ ? world_->size() : 1;
  std::vector<std::string> problems;
  try {
    const checkpoint::Manifest manifest = checkpoint::read_manifest(candidate);
    // Another run's checkpoint is no corrupt one to fall back past: refused
    // (every rank reads the same manifest and throws alike).
    const auto differences = identity_differences(manifest, config_);
    if (!differences.empty()) throw another_run_error(candidate, differences);
    // The ranks share the reading: file i is checked by rank i % size.
    problems = checkpoint::verify_checkpoint(candidate, manifest, static_cast<size_t>(rank), static_cast<size_t>(size));
  } catch (const checkpoint::FormatError& e) {
    problems.push_back(e.what());
  }
  if (world_ == nullptr || size == 1) return problems;
  const int first_bad = parallel::largest_on_any_rank(problems.empty() ? 0 : 1 + rank, world_) - 1;
  if (!problems.empty() && rank != 0) {
    for (const auto& line : problems) std::cerr << "rank " << rank << ": " << line << "\n";
  }
  if (first_bad >= 0 && problems.empty()) {
    problems.push_back("rank " + std::to_string(first_bad) + " found problems in " + candidate.string() +
                       " (see its log)");
  }
  return problems;
}

std::optional<fs::path> RunCheckpoints::choose_resume() {
  std::ostringstream log;
  // Why each candidate was passed over, shown also when none is usable.
  auto show_log = [&] {
    std::istringstream lines(log.str());
    for (std::string line; std::getline(lines, line);) progress_.line(line);
  };
  Stopwatch watch;
  std::optional<fs::path> chosen;
  try {
    std::vector<fs::path> roots{config_.checkpoint.dir};
    if (local_) roots.emplace_back(config_.checkpoint.local_dir);
    chosen = checkpoint::choose_resume_checkpoint(config_.checkpoint.resume, roots,
                                                  [this](const fs::path& c) { return problems_of(c); }, log);
  } catch (...) {
    show_log();
    throw;
  }
  show_log();
  if (chosen) progress_.line("checkpoint " + chosen->string() + " verified in " + fixed(watch.seconds(), 2) + " s");
  return chosen;
}

std::optional<RunCheckpoints::Tier> RunCheckpoints::due(int64_t steps_done) const {
  const int64_t every = config_.checkpoint.every, local_every = config_.checkpoint.local_every;
  if (steps_done == config_.train.steps || (every > 0 && steps_done % every == 0)) return Tier::durable;
  if (local_ && steps_done % local_every == 0) return Tier::local;
  return std::nullopt;
}

double RunCheckpoints::save(Tier tier, const checkpoint::Manifest& meta,
                            const std::vector<checkpoint::TensorSlice>& owned,
                            const std::vector<checkpoint::Blob>& blobs) {
  if (tier == Tier::local) {
    // A local copy says nothing (one every few steps would bury the log),
    // and one that fails (its folder full) costs only itself: the ranks
    // agree on the failure, the folder keeps its previous copy, training
    // goes on. A peer lost midway is the run's failure, as anywhere.
    try {
      return local_->save(meta, owned, blobs);
    } catch (const CommError&) {
      throw;
    } catch (const Error& e) {
      progress_.warning(std::string(e.what()) + " (a local copy: training goes on; checkpoint.dir is untouched)");
      return 0;
    }
  }
  if (durable_.in_flight()) report(durable_.wait());
  saving_step_ = meta.step;
  save_started_ = clock_.seconds();
  held_s_ = durable_.save(meta, owned, blobs);
  if (!durable_.in_flight()) report(fs::path(config_.checkpoint.dir) / checkpoint::step_folder_name(meta.step));
  return held_s_;
}

void RunCheckpoints::poll() { report(durable_.poll()); }

void RunCheckpoints::finish() {
  report(durable_.wait());
  if (!local_) return;
  // Every rank is past its last local save before the leader removes them.
  parallel::on_every_rank(true, world_);
  if (world_ == nullptr || world_->rank() == 0) checkpoint::remove_checkpoints(config_.checkpoint.local_dir);
}

void RunCheckpoints::report(const std::optional<fs::path>& committed) {
  if (!committed) return;
  const double seconds = clock_.seconds() - save_started_;
  uint64_t bytes = 0;
  if (world_ == nullptr || world_->rank() == 0) {
    for (const auto& file : checkpoint::read_manifest(*committed).files) bytes += file.bytes;
  }
  const bool large = bytes >= 1e9;
  char text[160];
  std::snprintf(text, sizeof(text), " (%.2f %s in %.2f s, %.2f GB/s; training held %.2f s)", bytes / (large ? 1e9 : 1e6),
                large ? "GB" : "MB", seconds, bytes / 1e9 / std::max(seconds, 1e-9), held_s_);
  progress_.line("checkpoint of step " + std::to_string(saving_step_) + ": " + committed->string() + text);
}

}  // namespace giant::train
