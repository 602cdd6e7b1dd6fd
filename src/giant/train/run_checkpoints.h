// A run's checkpoints: which one train.resume picks (verified by every
// rank together, falling back past a corrupt newest one under "auto",
// refusing another run's), loading this rank's slices of it, and saving at
// checkpoint.every steps and at the end (checkpoint.async in the
// background). With checkpoint.local_every, also a local tier: copies in a
// fast folder (memory, by default) between the durable saves, so that a
// restart redoes at most local_every steps; resume=auto takes the newest of
// both, and the local folder goes when the run finishes.
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

  enum class Tier { durable, local };
  // What is due at the end of `steps_done` (1-based: steps completed; the
  // durable save where both are), the same on every rank.
  std::optional<Tier> due(int64_t steps_done) const;
  // Saves into the tier (collective). Returns the seconds training was held.
  double save(Tier tier, const checkpoint::Manifest& meta, const std::vector<checkpoint::TensorSlice>& owned,
              const std::vector<checkpoint::Blob>& blobs);
  // At each step boundary (collective): commits a finished background save.
  void poll();
  // At the end (collective): waits for a background save and commits it,
  // then removes the local tier's folder (the durable checkpoint is newer).
  void finish();
  bool in_flight() const { return durable_.in_flight() || (local_ && local_->in_flight()); }

  // The layout part of a manifest for this run.
  checkpoint::SavedLayout layout() const;

 private:
  // The line for a committed checkpoint: where, how much, how fast.
  void report(const std::optional<std::filesystem::path>& committed);
  checkpoint::CheckpointSaver& saver(Tier tier) { return tier == Tier::local ? *local_ : durable_; }
  // The problems of a candidate, as every rank sees them (collective).
  std::vector<std::string> problems_of(const std::filesystem::path& candidate);

  const RunConfig& config_;
  ccl::Communicator* world_;
  Progress& progress_;
  checkpoint::CheckpointSaver durable_;
  std::unique_ptr<checkpoint::CheckpointSaver> local_;  // null without checkpoint.local_every
  int64_t saving_step_ = -1;
  double save_started_ = 0;  // seconds on clock_ when the save in flight began
  double held_s_ = 0;        // what it held training for
  Stopwatch clock_;
};

}  // namespace giant::train
