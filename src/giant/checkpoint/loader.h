// Reading a checkpoint into any layout: each rank asks for the slices of
// the global tensors it holds (tensor_slices.h) and reads, from whatever
// files hold them, the pieces that intersect them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/tensor_slices.h"

namespace giant::checkpoint {

class CheckpointLoader {
 public:
  // Reads and checks the manifest (FormatError naming the file).
  explicit CheckpointLoader(std::filesystem::path dir);

  const Manifest& manifest() const { return manifest_; }
  const std::filesystem::path& dir() const { return dir_; }
  bool has(const std::string& name) const { return manifest_.find(name) != nullptr; }

  // Fills every target's view from the pieces that intersect it (each
  // piece read once, converted from the stored dtype to the view's).
  // FormatError naming the tensor when one is absent from the manifest, or
  // its global shape differs from the target's, or a file is unreadable.
  void load(const std::vector<TensorSlice>& targets) const;
  // A whole global tensor, in its stored dtype (for tools and export).
  at::Tensor read(const std::string& name) const;
  // A blob saved by CheckpointSaver (nullopt when absent).
  std::optional<std::vector<uint8_t>> read_blob(const std::string& name) const;

 private:
  std::filesystem::path dir_;
  Manifest manifest_;
};

// What train.resume picks: "" never; a path, that checkpoint (or the one
// its `latest` names when it is a checkpoint.dir); "auto", the newest good
// checkpoint in any of `roots` (checkpoint.dir, then the local tier's; at
// the same step the earlier root's), if any. `problems_of(dir)` lists what is wrong
// with a candidate (empty: good; collective under several ranks: every
// rank must reach the same answer); a bad newest checkpoint is reported on
// `log` and the previous one tried. FormatError when an explicitly named
// checkpoint is bad, or under auto when checkpoints exist and none is good;
// nullopt when there is nothing to resume from.
std::optional<std::filesystem::path> choose_resume_checkpoint(
    const std::string& resume, const std::vector<std::filesystem::path>& roots,
    const std::function<std::vector<std::string>(const std::filesystem::path&)>& problems_of,
    std::ostream& log);

}  // namespace giant::checkpoint
