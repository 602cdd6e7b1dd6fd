#include "giant/train/checkpoint_tokenizer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "giant/base/error.h"

namespace giant::train {

std::vector<checkpoint::CarriedFile> carried_tokenizer_files(const std::string& spec) {
  std::vector<checkpoint::CarriedFile> carried;
  for (const data::TokenizerFile& file : data::tokenizer_files(spec)) {
    auto unreadable = [&file]() {
      return ConfigError("data.tokenizer",
                         "cannot read '" + file.path + "' to carry it in checkpoints: " + std::strerror(errno));
    };
    std::ifstream in(file.path, std::ios::binary);
    if (!in) throw unreadable();
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    if (in.bad()) throw unreadable();
    carried.push_back({file.name, std::move(bytes)});
  }
  return carried;
}

std::string checkpoint_tokenizer_spec(const std::filesystem::path& checkpoint_dir,
                                      const checkpoint::Manifest& manifest) {
  if (manifest.tokenizer_files.empty()) return manifest.tokenizer;
  return data::tokenizer_spec_in(manifest.tokenizer, checkpoint_dir.string());
}

}  // namespace giant::train
