// verify_checkpoint (manifest.h): a checkpoint folder against its manifest.
// Each problem is collected, not thrown, so that one run of `giant
// checkpoint verify` lists everything that is wrong; every line names the
// file it is about.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "giant/base/error.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

struct PieceRef {
  const TensorEntry* tensor;
  const Piece* piece;
};

// The pieces each file holds, by the file's name.
std::map<std::string, std::vector<PieceRef>> pieces_by_file(const Manifest& manifest) {
  std::map<std::string, std::vector<PieceRef>> by_file;
  for (const TensorEntry& tensor : manifest.tensors) {
    for (const Piece& piece : tensor.pieces) by_file[piece.file].push_back({&tensor, &piece});
  }
  return by_file;
}

// The file's size and checksum; false when there is no point reading its
// tensors (it is missing or unreadable).
bool check_file_bytes(const fs::path& path, const FileEntry& entry, std::vector<std::string>& problems) {
  std::error_code error;
  const auto status = fs::status(path, error);
  if (!fs::exists(status)) {
    problems.push_back(path.string() + ": missing (the manifest lists it with " + std::to_string(entry.bytes) +
                       " bytes)");
    return false;
  }
  if (!fs::is_regular_file(status)) {
    problems.push_back(path.string() + ": not a regular file");
    return false;
  }
  const uint64_t bytes = fs::file_size(path, error);
  if (error) {
    problems.push_back(path.string() + ": cannot read its size: " + error.message());
    return false;
  }
  if (bytes != entry.bytes) {
    // Its checksum cannot match either; the header may still say more.
    problems.push_back(path.string() + ": " + std::to_string(bytes) + " bytes, the manifest says " +
                       std::to_string(entry.bytes) + " (truncated or overwritten)");
    return true;
  }
  try {
    const uint32_t crc = file_crc32c(path);
    if (crc != entry.crc32c) {
      problems.push_back(path.string() + ": CRC-32C " + hex32(crc) + ", the manifest says " + hex32(entry.crc32c) +
                         " (its contents changed)");
    }
  } catch (const FormatError& e) {
    problems.push_back(e.what());
    return false;
  }
  return true;
}

// Every piece the manifest places in the file is a tensor of its header
// with the tensor's dtype and the piece's shape.
void check_pieces(const fs::path& path, const std::vector<PieceRef>& pieces, std::vector<std::string>& problems) {
  if (pieces.empty()) return;
  std::optional<SafetensorsReader> reader;
  try {
    reader.emplace(path);
  } catch (const FormatError& e) {
    problems.push_back(e.what());
    return;
  }
  for (const PieceRef& ref : pieces) {
    const std::string what = "'" + ref.piece->key + "' (a piece of " + ref.tensor->name + " at offset " +
                             shape_text(ref.piece->offset, ",") + ")";
    const TensorInfo* info = reader->header().find(ref.piece->key);
    if (info == nullptr) {
      problems.push_back(path.string() + ": no tensor " + what);
      continue;
    }
    if (info->dtype != ref.tensor->dtype) {
      problems.push_back(path.string() + ": tensor " + what + " is " + dtype_name(info->dtype) +
                         ", the manifest says " + dtype_name(ref.tensor->dtype));
    }
    if (info->shape != ref.piece->shape) {
      problems.push_back(path.string() + ": tensor " + what + " has shape " + shape_text(info->shape, ",") +
                         ", the manifest says " + shape_text(ref.piece->shape, ","));
    }
  }
}

}  // namespace

std::vector<std::string> verify_checkpoint(const std::filesystem::path& checkpoint_dir, const Manifest& manifest,
                                           size_t first, size_t stride) {
  GIANT_CHECK(stride >= 1 && first < stride, "verify_checkpoint: file ", first, " of every ", stride);
  std::vector<std::string> problems;
  auto by_file = pieces_by_file(manifest);
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const FileEntry& entry = manifest.files[i];
    auto pieces = by_file.find(entry.name);
    const std::vector<PieceRef> none;
    const std::vector<PieceRef>& in_file = pieces == by_file.end() ? none : pieces->second;
    if (i % stride == first) {
      const fs::path path = checkpoint_dir / entry.name;
      if (check_file_bytes(path, entry, problems)) check_pieces(path, in_file, problems);
    }
    if (pieces != by_file.end()) by_file.erase(pieces);
  }
  // Pieces in files the manifest does not list (read_manifest rejects such
  // a manifest; one built in memory may still have them): reported once.
  if (first == 0) {
    for (const auto& [file, pieces] : by_file) {
      problems.push_back((checkpoint_dir / file).string() + ": holds " + std::to_string(pieces.size()) +
                         " piece(s), e.g. of " + pieces.front().tensor->name +
                         ", but the manifest's files do not list it");
    }
  }
  return problems;
}

}  // namespace giant::checkpoint
