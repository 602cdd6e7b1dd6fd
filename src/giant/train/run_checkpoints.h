// A run's checkpoints: which one train.resume picks (verified by every
// rank together, falling back past a corrupt newest one under "auto"),
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
#include "giant/checkpoint/saver.h"
#include "giant/train/progress.h"
#include "giant/train/run_config.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

class RunCheckpoints {
 public:
  // world: every rank (null: one process).
  RunCheckpoints(const RunConfig& config, ccl::Communicator* world, Progress& progress);

  // The checkpoint to start from (nullopt: a fresh run). Collective.
  // FormatError (exit 1) when train.resume names a bad checkpoint, or under
  // auto when none in checkpoint.dir is good.
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

  // The layout part of a manifest for this run.
  checkpoint::SavedLayout layout() const;

 private:
  void report(const std::optional<std::filesystem::path>& committed);
  // The problems of a candidate, as every rank sees them (collective).
  std::vector<std::string> problems_of(const std::filesystem::path& candidate);

  const RunConfig& config_;
  ccl::Communicator* world_;
  Progress& progress_;
  checkpoint::CheckpointSaver saver_;
  int64_t saving_step_ = -1;
};

}  // namespace giant::train
