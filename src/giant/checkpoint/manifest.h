// manifest.json: what a checkpoint holds, independent of the layout that
// saved it. Every tensor is described in global coordinates (the unsplit
// tensor's shape) with the pieces that hold it: which file, which tensor
// key in that file, and the box [offset, offset + shape) of the global index
// space it covers. Each file has its size and CRC-32C. No libtorch here.
//
// Tensor names: "model/<parameter>" (fp32 master weights), "optim/exp_avg/
// <parameter>" and "optim/exp_avg_sq/<parameter>" (AdamW's moments, fp32),
// "rng/<world rank>" (a rank's CPU generator state, u8; "rng_cuda/<world
// rank>" its CUDA device's; used only when the layout and the device kind
// are the same), "grad_wire/<world rank>" (a rank's gradient-wire
// error feedback, u8; used only when it fits the resuming run's buckets).
// <parameter> is the unsplit parameter's name
// (global_parameter_name in tensor_slices.h), e.g. "block_3.qkv.weight"
// (the layer stack names its modules with "_" for ".").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "giant/checkpoint/safetensors.h"
#include "giant/models/gpt_config.h"

namespace giant::checkpoint {

constexpr int kFormatVersion = 1;

struct Piece {
  std::string file;  // relative to the checkpoint folder, e.g. "rank_00003.safetensors"
  std::string key;   // the tensor's name in that file
  std::vector<int64_t> offset, shape;  // the box it covers, in global coordinates
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // global
  std::vector<Piece> pieces;
};

struct FileEntry {
  std::string name;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// The layout a checkpoint was saved with (informative: any layout loads it).
struct SavedLayout {
  int64_t dp = 1, tp = 1, pp = 1, virtual_stages = 1, zero = 0;
  std::string schedule, partition, precision = "fp32", grad_dtype = "fp32";
  int64_t world_size = 1;
  bool operator==(const SavedLayout& other) const;
};

// The scalars a run continues from.
struct TrainState {
  int64_t optimizer_steps = 0;  // AdamW's step count (bias correction)
  // Dynamic loss scaling (present only when the run scaled its loss).
  bool loss_scaling = false;
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0, loss_scale_hysteresis_left = 0, loss_scale_overflows = 0;
  // The step guard and the run's skipped-step counts.
  int64_t bad_steps_in_a_row = 0, skipped_steps = 0, loss_scale_skips = 0;
};

struct Manifest {
  int format_version = kFormatVersion;
  models::GptConfig model;
  std::string tokenizer = "byte";  // data.tokenizer of the run, as it was given
  // The files of this folder that tokenizer reads: copies carried with the
  // checkpoint (also listed in `files`, so checked like the rest), so that
  // it works wherever it is moved. Empty in checkpoints from before, whose
  // tokenizer is read where `tokenizer` says, and for the byte tokenizer.
  std::vector<std::string> tokenizer_files;
  int64_t step = 0;                // optimizer steps completed
  int64_t consumed_samples = 0;    // global samples the run has trained on
  SavedLayout layout;
  TrainState train;
  // The keys of the run that saved it which a resume compares (key -> the
  // value as JSON text); empty in checkpoints that predate them or were imported.
  std::map<std::string, std::string> run_keys;
  std::vector<TensorEntry> tensors;  // sorted by name
  std::vector<FileEntry> files;      // sorted by name

  const TensorEntry* find(const std::string& name) const;
  bool has_optimizer_state() const;  // any "optim/" tensor (an imported model has none)
};

// JSON text of the manifest (stable: keys sorted, tensors and files sorted,
// numbers round-trip exactly).
std::string manifest_to_json(const Manifest& manifest);
// Parses and checks a manifest (FormatError naming `file` and the field):
// version known, every field of the right type and range, model config
// valid, every piece's box inside its tensor, every piece's file listed,
// and the pieces of each tensor tiling it exactly (no gap, no overlap:
// "missing piece" names the tensor), every tokenizer file listed in files
// (the key may be absent: none).
Manifest manifest_from_json(std::string_view json, const std::string& file);

// What one rank wrote into a checkpoint being saved (its pieces and its
// file), merged by the leader into the manifest.
struct ManifestFragment {
  std::vector<TensorEntry> tensors;  // each with only this rank's pieces
  std::vector<FileEntry> files;
};
std::string fragment_to_json(const ManifestFragment& fragment);
ManifestFragment fragment_from_json(std::string_view json, const std::string& file);  // FormatError
// Adds a fragment's files and pieces to the manifest (a tensor named in
// several fragments gets all their pieces; FormatError when its shape or
// dtype differ between them). Sorts tensors and files by name.
void merge_fragment(Manifest& manifest, ManifestFragment fragment);

// manifest.json of a checkpoint folder (FormatError when missing or invalid;
// the file is at most 256 MiB).
Manifest read_manifest(const std::filesystem::path& checkpoint_dir);

// The model.* keys where two configs differ, as "model.hidden: 64 in the
// checkpoint, 128 in this run" lines (empty when they are the same model;
// model.dropout and model.init_std do not change what the weights mean and
// are not compared).
std::vector<std::string> model_differences(const models::GptConfig& saved, const models::GptConfig& run);

// Checks a checkpoint folder against its manifest: every file present with
// its size and CRC-32C, every piece's key present in its file with the
// tensor's dtype and the piece's shape. Returns one line per problem, each
// naming the file (empty: good). `files_of_rank(r, n)` style splitting:
// only files i with i % stride == first are read (ranks share the work).
std::vector<std::string> verify_checkpoint(const std::filesystem::path& checkpoint_dir, const Manifest& manifest,
                                           size_t first = 0, size_t stride = 1);

}  // namespace giant::checkpoint
