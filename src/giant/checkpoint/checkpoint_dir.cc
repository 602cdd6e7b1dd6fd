#include "giant/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "giant/base/hash.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint {

namespace fs = std::filesystem;

std::string step_folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(step));
  return name;
}

std::optional<int64_t> step_of_folder(const std::string& name) {
  constexpr std::string_view prefix = "step_";
  if (name.size() < prefix.size() + 8 || name.size() > prefix.size() + 18 || name.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::optional<fs::path> latest_checkpoint(const fs::path& root) {
  std::ifstream in(root / "latest");
  if (!in) return std::nullopt;
  std::string name;
  std::getline(in, name);
  while (!name.empty() && (name.back() == ' ' || name.back() == '\r' || name.back() == '\t')) name.pop_back();
  if (!step_of_folder(name)) return std::nullopt;
  const fs::path folder = root / name;
  std::error_code error;
  if (!fs::is_regular_file(folder / "manifest.json", error)) return std::nullopt;
  return folder;
}

std::vector<fs::path> list_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const auto step = step_of_folder(entry.path().filename().string());
    if (step && fs::is_regular_file(entry.path() / "manifest.json", error)) found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> folders;
  for (auto& [step, path] : found) folders.push_back(std::move(path));
  return folders;
}

fs::path resolve_checkpoint(const fs::path& dir) {
  std::error_code error;
  if (fs::is_regular_file(dir / "manifest.json", error)) return dir;
  if (const auto latest = latest_checkpoint(dir)) return *latest;
  throw FormatError("'" + dir.string() + "' is neither a checkpoint (no manifest.json) nor a checkpoint.dir (no latest)");
}

fs::path default_local_root(const fs::path& root) {
  std::error_code error;
  const fs::path memory = "/dev/shm";
  const fs::path base = fs::is_directory(memory, error) ? memory : fs::temp_directory_path();
  char name[48];
  std::snprintf(name, sizeof(name), "giant-checkpoints-%016llx",
                static_cast<unsigned long long>(fnv1a(fs::absolute(root).lexically_normal().string())));
  return base / name;
}

void remove_checkpoints(const fs::path& root) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (step_of_folder(name) || name.rfind(".tmp.", 0) == 0 || name == "latest") fs::remove_all(entry.path(), error);
  }
  if (fs::is_empty(root, error)) fs::remove(root, error);
}

}  // namespace giant::checkpoint
