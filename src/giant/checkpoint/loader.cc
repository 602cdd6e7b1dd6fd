#include "giant/checkpoint/loader.h"

#include <algorithm>
#include <map>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "giant/base/error.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint {
namespace {

namespace fs = std::filesystem;

at::ScalarType scalar_type_of(DType dtype, const std::string& tensor) {
  switch (dtype) {
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::i64: return at::kLong;
    case DType::i32: return at::kInt;
    case DType::u8: return at::kByte;
    default: throw FormatError("tensor '" + tensor + "' has dtype " + dtype_name(dtype) + ", which Giant does not load");
  }
}

// The part of a target that a piece covers, as views of both (none: they
// do not meet).
struct Overlap {
  std::vector<int64_t> start, size;
};

std::optional<Overlap> overlap(const Piece& piece, const TensorSlice& target) {
  Overlap o;
  for (size_t k = 0; k < piece.offset.size(); ++k) {
    const int64_t from = std::max(piece.offset[k], target.offset[k]);
    const int64_t to = std::min(piece.offset[k] + piece.shape[k], target.offset[k] + target.view.size(k));
    if (to <= from) return std::nullopt;
    o.start.push_back(from);
    o.size.push_back(to - from);
  }
  return o;
}

at::Tensor narrow_box(at::Tensor t, const std::vector<int64_t>& origin, const Overlap& o) {
  for (size_t k = 0; k < o.start.size(); ++k) t = t.narrow(static_cast<int64_t>(k), o.start[k] - origin[k], o.size[k]);
  return t;
}

bool covers_whole(const Piece& piece, const TensorSlice& target) {
  return piece.offset == target.offset && piece.shape == target.view.sizes().vec();
}

}  // namespace

CheckpointLoader::CheckpointLoader(fs::path dir) : dir_(std::move(dir)), manifest_(read_manifest(dir_)) {}

void CheckpointLoader::load(const std::vector<TensorSlice>& targets) const {
  at::NoGradGuard no_grad;  // the targets are often parameters: filled in place, not recorded
  std::map<std::string, std::vector<const TensorSlice*>> by_name;
  for (const auto& target : targets) by_name[target.name].push_back(&target);
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers;
  auto reader_of = [&](const std::string& file) -> const SafetensorsReader& {
    auto& reader = readers[file];
    if (!reader) reader = std::make_unique<SafetensorsReader>(dir_ / file);
    return *reader;
  };
  const std::string where = (dir_ / "manifest.json").string();
  for (const auto& [name, wanted] : by_name) {
    const TensorEntry* entry = manifest_.find(name);
    if (entry == nullptr) throw FormatError(where + ": holds no tensor '" + name + "'");
    const at::ScalarType stored = scalar_type_of(entry->dtype, name);
    for (const TensorSlice* target : wanted) {
      if (target->global_shape != entry->shape) {
        throw FormatError(where + ": tensor '" + name + "' has shape " + shape_text(entry->shape) +
                          "; this run's is " + shape_text(target->global_shape));
      }
    }
    for (const Piece& piece : entry->pieces) {
      std::vector<std::pair<const TensorSlice*, Overlap>> meets;
      for (const TensorSlice* target : wanted) {
        if (auto o = overlap(piece, *target)) meets.emplace_back(target, std::move(*o));
      }
      if (meets.empty()) continue;
      const SafetensorsReader& reader = reader_of(piece.file);
      const TensorInfo* info = reader.header().find(piece.key);
      if (info == nullptr || info->dtype != entry->dtype || info->shape != piece.shape) {
        throw FormatError((dir_ / piece.file).string() + ": tensor '" + piece.key + "' of '" + name + "' is " +
                          (info == nullptr ? std::string("missing") : "not the " + std::string(dtype_name(entry->dtype)) +
                                                                          " " + shape_text(piece.shape) +
                                                                          " the manifest says"));
      }
      const TensorSlice& first = *meets.front().first;
      if (meets.size() == 1 && covers_whole(piece, first) && first.view.is_contiguous() &&
          first.view.device().is_cpu() && first.view.scalar_type() == stored) {
        reader.read(*info, first.view.data_ptr());  // straight into place: the same layout
        continue;
      }
      at::Tensor data = at::empty(piece.shape, at::TensorOptions().dtype(stored));
      reader.read(*info, data.data_ptr());
      for (const auto& [target, o] : meets) {
        narrow_box(target->view, target->offset, o).copy_(narrow_box(data, piece.offset, o));
      }
    }
  }
}

at::Tensor CheckpointLoader::read(const std::string& name) const {
  const TensorEntry* entry = manifest_.find(name);
  if (entry == nullptr) throw FormatError((dir_ / "manifest.json").string() + ": holds no tensor '" + name + "'");
  at::Tensor whole = at::empty(entry->shape, at::TensorOptions().dtype(scalar_type_of(entry->dtype, name)));
  load({TensorSlice{name, entry->shape, std::vector<int64_t>(entry->shape.size(), 0), whole}});
  return whole;
}

std::optional<std::vector<uint8_t>> CheckpointLoader::read_blob(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  const at::Tensor bytes = read(name);
  GIANT_CHECK(bytes.scalar_type() == at::kByte && bytes.dim() == 1, "'", name, "' is no blob");
  const auto* data = bytes.data_ptr<uint8_t>();
  return std::vector<uint8_t>(data, data + bytes.numel());
}

std::optional<fs::path> choose_resume_checkpoint(
    const std::string& resume, const std::vector<fs::path>& roots,
    const std::function<std::vector<std::string>(const fs::path&)>& problems_of, std::ostream& log) {
  if (resume.empty()) return std::nullopt;
  auto first_lines = [](const std::vector<std::string>& problems) {
    std::string text;
    for (size_t i = 0; i < problems.size() && i < 5; ++i) text += "\n  " + problems[i];
    if (problems.size() > 5) text += "\n  ... and " + std::to_string(problems.size() - 5) + " more";
    return text;
  };
  if (resume != "auto") {
    // A path that names no checkpoint is a mistake in the key (bad input);
    // a checkpoint that fails its checks below is a broken file.
    fs::path chosen;
    try {
      chosen = resolve_checkpoint(resume);
    } catch (const FormatError& e) {
      throw ConfigError("train.resume", e.what());
    }
    const auto problems = problems_of(chosen);
    if (!problems.empty()) throw FormatError("train.resume: checkpoint '" + chosen.string() + "' is unusable:" + first_lines(problems));
    return chosen;
  }
  // Newest first over every root; at the same step, the earlier root's.
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const fs::path& root : roots) {
    for (fs::path& folder : list_checkpoints(root)) {
      found.emplace_back(*step_of_folder(folder.filename().string()), std::move(folder));
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> candidates;
  for (auto& [step, folder] : found) candidates.push_back(std::move(folder));
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto problems = problems_of(candidates[i]);
    if (problems.empty()) return candidates[i];
    log << "checkpoint " << candidates[i].string() << " is unusable:" << first_lines(problems) << "\n"
        << (i + 1 < candidates.size() ? "falling back to the previous checkpoint, " + candidates[i + 1].string()
                                      : std::string("no older checkpoint is left"))
        << "\n";
  }
  if (!candidates.empty()) {
    std::string where;
    for (const fs::path& root : roots) where += (where.empty() ? "'" : " or '") + root.string() + "'";
    throw FormatError("train.resume=auto: no checkpoint in " + where + " is usable (set train.resume=\"\" to start over)");
  }
  return std::nullopt;
}

}  // namespace giant::checkpoint
