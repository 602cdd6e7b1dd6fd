#include "giant/checkpoint/saver.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include <ATen/ATen.h>

#include "giant/base/crc32c.h"
#include "giant/base/error.h"
#include "giant/base/synced_files.h"
#include "giant/base/timer.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/agreement.h"

namespace giant::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string rank_file_name(int rank, const char* extension) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank_%05d.%s", rank, extension);
  return name;
}

DType dtype_of(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kLong: return DType::i64;
    case at::kInt: return DType::i32;
    case at::kByte: return DType::u8;
    default: GIANT_CHECK(false, "checkpoints do not store ", tensor.scalar_type(), " tensors");
  }
  return DType::f32;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError("cannot read '" + path.string() + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What one rank writes: its slices (host memory) and blobs.
struct Part {
  std::vector<TensorSlice> slices;  // contiguous views (copies when written in the background)
  std::vector<Blob> blobs;
};

// Writes a rank's file and its manifest fragment into folder (the leader's
// with the carried files).
void write_part(const fs::path& folder, int rank, const Part& part, const std::vector<CarriedFile>& carried) {
  const std::string file = rank_file_name(rank, "safetensors");
  std::vector<TensorToWrite> tensors;
  ManifestFragment fragment;
  auto add_piece = [&](const std::string& name, DType dtype, const std::vector<int64_t>& global_shape,
                       const std::vector<int64_t>& offset, const std::vector<int64_t>& shape, const void* data) {
    std::string key = name + "@";
    for (size_t k = 0; k < offset.size(); ++k) key += (k ? "," : "") + std::to_string(offset[k]);
    tensors.push_back({key, dtype, shape, data});
    fragment.tensors.push_back({name, dtype, global_shape, {{file, key, offset, shape}}});
  };
  for (const auto& slice : part.slices) {
    GIANT_CHECK(slice.view.is_contiguous() && slice.view.device().is_cpu(), "slice '", slice.name,
                "' must be contiguous host memory to be written");
    add_piece(slice.name, dtype_of(slice.view), slice.global_shape, slice.offset, slice.view.sizes().vec(),
              slice.view.data_ptr());
  }
  for (const auto& blob : part.blobs) {
    const std::vector<int64_t> shape{static_cast<int64_t>(blob.bytes.size())};
    add_piece(blob.name, DType::u8, shape, {0}, shape, blob.bytes.data());
  }
  const WrittenFile written = write_safetensors(folder / file, tensors);
  fragment.files.push_back({file, written.bytes, written.crc32c});
  for (const CarriedFile& c : carried) {
    write_synced(folder / c.name, c.bytes);
    fragment.files.push_back({c.name, c.bytes.size(), crc32c(c.bytes)});
  }
  write_synced(folder / rank_file_name(rank, "json"), fragment_to_json(fragment));
}

}  // namespace

struct CheckpointSaver::State {
  SaverOptions options;
  ccl::Communicator* world = nullptr;
  int rank = 0, size = 1;
  // The save in flight.
  bool in_flight = false;
  Manifest meta;
  fs::path folder;  // its temporary folder
  std::thread writer;
  std::atomic<bool> done{false};
  std::string error;  // this rank's failure (read once done)

  bool leader() const { return rank == 0; }

  // Whether `value` holds on every rank (collective).
  bool on_every_rank(bool value) const { return parallel::on_every_rank(value, world); }

  void begin(const Manifest& m, Part part);
  std::optional<fs::path> commit();
  fs::path publish();  // the leader's share of a commit
  void prune() const;
};

void CheckpointSaver::State::begin(const Manifest& m, Part part) {
  meta = m;
  meta.tensors.clear();
  meta.files.clear();
  meta.tokenizer_files.clear();
  for (const CarriedFile& c : options.tokenizer_files) meta.tokenizer_files.push_back(c.name);
  folder = options.root / (".tmp." + step_folder_name(m.step));
  std::string failure;
  if (leader()) {
    try {
      fs::create_directories(options.root);
      for (const auto& entry : fs::directory_iterator(options.root)) {
        if (entry.path().filename().string().rfind(".tmp.", 0) == 0) fs::remove_all(entry.path());
      }
      fs::create_directory(folder);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!on_every_rank(failure.empty())) {
    throw Error("cannot save the checkpoint of step " + std::to_string(m.step) + " in '" + options.root.string() +
                "'" + (failure.empty() ? "" : ": " + failure));
  }
  in_flight = true;
  done = false;
  error.clear();
  auto write = [this](Part p) {
    try {
      const std::vector<CarriedFile> none;
      write_part(folder, rank, p, leader() ? options.tokenizer_files : none);
      if (options.after_write) options.after_write(meta.step);
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  };
  if (options.background) {
    writer = std::thread(write, std::move(part));
  } else {
    write(std::move(part));
  }
}

fs::path CheckpointSaver::State::publish() {
  Manifest manifest = meta;
  for (int r = 0; r < size; ++r) {
    const fs::path fragment = folder / rank_file_name(r, "json");
    merge_fragment(manifest, fragment_from_json(read_text(fragment), fragment.string()));
  }
  write_synced(folder / "manifest.json", manifest_to_json(manifest));
  for (int r = 0; r < size; ++r) fs::remove(folder / rank_file_name(r, "json"));
  sync_path(folder);
  const fs::path final_folder = options.root / step_folder_name(meta.step);
  if (fs::exists(final_folder)) {  // an older save of the same step (a run resumed before it)
    const fs::path aside = options.root / (".tmp.old." + step_folder_name(meta.step));
    fs::remove_all(aside);
    fs::rename(final_folder, aside);
    fs::remove_all(aside);
  }
  fs::rename(folder, final_folder);
  sync_path(options.root);
  const fs::path latest = options.root / "latest", pending = options.root / ".tmp.latest";
  write_synced(pending, step_folder_name(meta.step) + "\n");
  fs::rename(pending, latest);
  sync_path(options.root);
  return final_folder;
}

void CheckpointSaver::State::prune() const {
  const std::vector<fs::path> saved = list_checkpoints(options.root);
  for (size_t i = static_cast<size_t>(options.keep); i < saved.size(); ++i) fs::remove_all(saved[i]);
}

std::optional<fs::path> CheckpointSaver::State::commit() {
  if (writer.joinable()) writer.join();
  in_flight = false;
  if (!on_every_rank(error.empty())) {
    if (leader()) {
      std::error_code ignored;
      fs::remove_all(folder, ignored);
    }
    const std::string where = "the checkpoint of step " + std::to_string(meta.step);
    throw Error(error.empty() ? where + " failed on another rank (see its log); the previous checkpoint is intact"
                              : where + " failed: " + error + "; the previous checkpoint is intact");
  }
  fs::path committed;
  std::string failure;
  if (leader()) {
    try {
      committed = publish();
      prune();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!on_every_rank(failure.empty())) {
    throw Error("committing the checkpoint of step " + std::to_string(meta.step) + " failed" +
                (failure.empty() ? " on rank 0" : ": " + failure));
  }
  return options.root / step_folder_name(meta.step);
}

CheckpointSaver::CheckpointSaver(SaverOptions options, ccl::Communicator* world) : state_(std::make_unique<State>()) {
  GIANT_CHECK(options.keep >= 1, "checkpoint.keep must be at least 1");
  for (const CarriedFile& file : options.tokenizer_files) {
    // A plain name that none of the checkpoint's own files takes.
    const std::string& name = file.name;
    GIANT_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != ".." &&
                    name != "manifest.json" && name.rfind("rank_", 0) != 0 && name.rfind(".tmp", 0) != 0,
                "a file carried in checkpoints cannot be called '", name, "'");
  }
  state_->options = std::move(options);
  state_->world = world;
  if (world != nullptr) {
    state_->rank = world->rank();
    state_->size = world->size();
  }
}

CheckpointSaver::~CheckpointSaver() {
  if (state_->writer.joinable()) state_->writer.join();
}

double CheckpointSaver::save(const Manifest& meta, const std::vector<TensorSlice>& owned,
                             const std::vector<Blob>& blobs) {
  Stopwatch held;
  if (state_->in_flight) state_->commit();
  Part part;
  part.blobs = blobs;
  for (const auto& slice : owned) {
    TensorSlice copy = slice;
    // In the background, the step goes on changing the tensors: write copies
    // (a device's tensors are copied to the host in any case).
    if (!slice.view.device().is_cpu()) {
      copy.view = slice.view.to(at::kCPU).contiguous();
    } else if (state_->options.background || !slice.view.is_contiguous()) {
      copy.view = slice.view.contiguous().clone();
    }
    part.slices.push_back(std::move(copy));
  }
  state_->begin(meta, std::move(part));
  if (!state_->options.background) state_->commit();
  return held.seconds();
}

std::optional<fs::path> CheckpointSaver::poll() {
  if (!state_->in_flight) return std::nullopt;
  if (!state_->on_every_rank(state_->done.load())) return std::nullopt;
  return state_->commit();
}

std::optional<fs::path> CheckpointSaver::wait() {
  if (!state_->in_flight) return std::nullopt;
  return state_->commit();
}

bool CheckpointSaver::in_flight() const { return state_->in_flight; }

}  // namespace giant::checkpoint
