#include "giant/checkpoint/manifest.h"

#include <map>
#include <memory>
#include <system_error>

namespace giant::checkpoint {

std::vector<std::string> verify_checkpoint(const std::filesystem::path& checkpoint_dir, const Manifest& manifest,
                                           size_t first, size_t stride) {
  std::vector<std::string> problems;
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers;
  for (size_t i = first; i < manifest.files.size(); i += std::max<size_t>(stride, 1)) {
    const FileEntry& entry = manifest.files[i];
    const std::filesystem::path path = checkpoint_dir / entry.name;
    std::error_code error;
    const auto bytes = std::filesystem::file_size(path, error);
    if (error) {
      problems.push_back(path.string() + ": missing (" + error.message() + ")");
      continue;
    }
    if (bytes != entry.bytes) {
      problems.push_back(path.string() + ": " + std::to_string(bytes) + " bytes, the manifest says " +
                         std::to_string(entry.bytes) + " (truncated or replaced)");
      continue;
    }
    try {
      const uint32_t crc = file_crc32c(path);
      if (crc != entry.crc32c) {
        problems.push_back(path.string() + ": checksum " + std::to_string(crc) + " is not the manifest's " +
                           std::to_string(entry.crc32c) + " (the file is corrupt)");
        continue;
      }
      readers[entry.name] = std::make_unique<SafetensorsReader>(path);
    } catch (const FormatError& e) {
      problems.push_back(e.what());
    }
  }
  for (const auto& t : manifest.tensors) {
    for (const auto& p : t.pieces) {
      const auto found = readers.find(p.file);
      if (found == readers.end()) continue;  // checked by another rank, or already reported
      const TensorInfo* info = found->second->header().find(p.key);
      if (info == nullptr) {
        problems.push_back((checkpoint_dir / p.file).string() + ": missing piece '" + p.key + "' of tensor '" + t.name + "'");
      } else if (info->dtype != t.dtype || info->shape != p.shape) {
        problems.push_back((checkpoint_dir / p.file).string() + ": piece '" + p.key + "' is not the " +
                           dtype_name(t.dtype) + " piece of the shape the manifest says");
      }
    }
  }
  return problems;
}

}  // namespace giant::checkpoint
