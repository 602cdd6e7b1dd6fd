// A run's checkpoints: which one train.resume picks (verified by every
// rank together, falling back past a corrupt newest one under "auto",
// refusing another run's),
// loading this rank's slices of it, and saving at checkpoint.every steps
// and at the end (checkpoint.async in the background).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "giant/checkpoint/manifest.h"
#include "giant/base/timer.h"
#include "giant/checkpoint/saver.h"
#include "giant/train/fault_injection.h"
#include "giant/train/progress.h"
#include "giant/train/run_config.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

class RunCheckpoints {
 public:
  // world: every rank (null: one process).
  // faults: this rank's train.fault, whose checkpoint faults fire once its
  // part of a checkpoint is written.
  RunCheckpoints(const RunConfig& config, ccl::Communicator* world, Progress& progress, const FaultInjector& faults);

  // The checkpoint to start from (nullopt: a fresh run). Collective. Prints
  // why each candidate passed over is unusable. FormatError (exit 1) when
  // train.resume names a bad checkpoint, or under auto when none in
  // checkpoint.dir is good; ConfigError (exit 2) naming each differing key
  // when the candidate is another run's (resume_check.h).
  std::optional<std::filesystem::path> choose_resume();

  // What every rank must agree on before saving at the end of `step`
  // (1-based: steps completed).
  bool due(int64_t steps_done) const;
  // Saves (collective). Returns the seconds training was held.
  double save(const checkpoint::Manifest& meta, const std::vector<checkpoint::TensorSlice>& owned,
              const std::vector<checkpoint::Blob>& blobs);
  // At each step boundary (collective): commits a finished background save.
  void poll();
  // At the end (collective): waits for a background save and commits it.
  void finish();
  bool in_flight() const { return saver_.in_flight(); }

  // The layout part of a manifest for this run.
  checkpoint::SavedLayout layout() const;

 private:
  // The line for a committed checkpoint: where, how much, how fast.
  void report(const std::optional<std::filesystem::path>& committed);
  // The problems of a candidate, as every rank sees them (collective).
  std::vector<std::string> problems_of(const std::filesystem::path& candidate);

  const RunConfig& config_;
  ccl::Communicator* world_;
  Progress& progress_;
  checkpoint::CheckpointSaver saver_;
  int64_t saving_step_ = -1;
  double save_started_ = 0;  // seconds on clock_ when the save in flight began
  double held_s_ = 0;        // what it held training for
  Stopwatch clock_;
};

}  // namespace giant::train
