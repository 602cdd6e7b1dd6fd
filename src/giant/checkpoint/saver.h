// Writing checkpoints safely, from every rank in parallel.
//
// Each rank writes what it owns into <root>/.tmp.step_XXXXXXXX/ (one
// rank_RRRRR.safetensors file and a fragment of the manifest listing its
// pieces and the file's checksum). Once every rank has written its part,
// the leader merges the fragments into manifest.json, fsyncs the files and
// the folder, renames it to <root>/step_XXXXXXXX, replaces <root>/latest
// (written aside, fsynced, renamed), and only then removes checkpoints
// beyond the newest `keep`. A rank that fails or dies midway leaves only an
// unrenamed temporary folder: the previous checkpoint stays the latest and
// usable. Leftover temporary folders are removed by the next save.
//
// With `background`, save() copies the owned slices to host memory and
// returns; a thread writes them while training continues, and poll() (at
// each step boundary, on every rank) commits once every rank is done.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/tensor_slices.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::checkpoint {

// Raw bytes saved as a u8 tensor of one piece (a generator's state).
struct Blob {
  std::string name;  // e.g. "rng/3"
  std::vector<uint8_t> bytes;
};

// A file the leader writes into every checkpoint beside the tensors: its
// name in the folder and its contents (the tokenizer's vocabulary, read
// once when the run starts, so that later changes to the original files
// do not reach the checkpoints).
struct CarriedFile {
  std::string name;
  std::string bytes;
};

struct SaverOptions {
  std::filesystem::path root;  // checkpoint.dir
  int64_t keep = 3;            // checkpoint.keep (at least 1)
  bool background = false;     // checkpoint.async
  // Written into each checkpoint and named in its manifest's
  // tokenizer_files (and files, with their checksums).
  std::vector<CarriedFile> tokenizer_files;
  // Called on each rank with the checkpoint's step once its part is written,
  // before the commit (the write thread's, with background): where the fault
  // tests fail a rank in the middle of a save.
  std::function<void(int64_t step)> after_write;
};

class CheckpointSaver {
 public:
  // world: every rank of the run (null: one process); leader: world rank 0.
  CheckpointSaver(SaverOptions options, ccl::Communicator* world);
  ~CheckpointSaver();  // waits for a background write (not committed)
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Saves `meta` (everything but tensors, files and tokenizer_files, which
  // the saver fills; the same on every rank)
  // with this rank's `owned` slices and blobs. Collective. Without
  // background it returns once the checkpoint is committed; with it, once
  // the slices are copied (a save still in flight is first committed).
  // Returns the seconds the caller was held. giant::Error when a rank failed
  // to write (on every rank; the previous checkpoint is untouched).
  double save(const Manifest& meta, const std::vector<TensorSlice>& owned, const std::vector<Blob>& blobs);
  // Collective; cheap when nothing is in flight. Commits a background save
  // every rank has finished writing. Returns the committed folder, if any.
  std::optional<std::filesystem::path> poll();
  // Collective: waits for the background save in flight and commits it.
  std::optional<std::filesystem::path> wait();
  bool in_flight() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};


}  // namespace giant::checkpoint
