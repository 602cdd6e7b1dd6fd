// What the checkpoint format's tests share: a temporary folder, whole-file
// reads and edits, running a command, and a small checkpoint written
// through the format's own functions (two rank files, a tensor cut in two
// pieces, a manifest.json) that verify and the commands are tried on.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint::test {

namespace fs = std::filesystem;

// A fresh folder under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/giant-checkpoint-test-XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A safetensors file of exactly these bytes: the length prefix, the header
// text as given (no padding) and the data.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes + header + data;
}

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, its exit status and output.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// "<tensor>@<offset,...>", the key a piece has in its rank file.
inline std::string piece_key(const std::string& tensor, const std::vector<int64_t>& offset) {
  std::string key = tensor + "@";
  for (size_t i = 0; i < offset.size(); ++i) key += (i > 0 ? "," : "") + std::to_string(offset[i]);
  return key;
}

inline int64_t elements_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

// The small model the fixture's manifest describes.
inline models::GptConfig fixture_model() {
  models::GptConfig model;
  model.layers = 1;
  model.hidden = 8;
  model.heads = 2;
  model.seq_len = 4;
  model.vocab = 10;
  model.vocab_pad = 8;
  return model;
}

// The manifest of a checkpoint of fixture_model() without its files: the
// token embedding cut by rows over two rank files, the final norm and one
// moment whole, a generator state. Files are filled in by
// write_fixture_checkpoint.
inline Manifest fixture_manifest() {
  Manifest m;
  m.model = fixture_model();
  m.step = 12;
  m.consumed_samples = 96;
  m.layout.dp = 2;
  m.layout.world_size = 2;
  m.layout.zero = 1;
  m.train.optimizer_steps = 12;
  const std::string r0 = "rank_00000.safetensors", r1 = "rank_00001.safetensors";
  auto piece = [](const std::string& file, const std::string& tensor, std::vector<int64_t> offset,
                  std::vector<int64_t> shape) { return Piece{file, piece_key(tensor, offset), offset, shape}; };
  const std::string wte = "model/embedding.wte.weight", norm = "model/final_norm.weight";
  const std::string moment = "optim/exp_avg/final_norm.weight";
  m.tensors = {
      {wte, DType::f32, {16, 8}, {piece(r0, wte, {0, 0}, {8, 8}), piece(r1, wte, {8, 0}, {8, 8})}},
      {norm, DType::f32, {8}, {piece(r0, norm, {0}, {8})}},
      {moment, DType::f32, {8}, {piece(r1, moment, {0}, {8})}},
      {"rng/0", DType::u8, {16}, {piece(r0, "rng/0", {0}, {16})}},
  };
  return m;
}

// Writes every piece of `manifest` into its file (bytes that depend on the
// piece), the files' sizes and checksums into the manifest, and
// manifest.json into dir. Returns the manifest as written.
inline Manifest write_fixture_checkpoint(const fs::path& dir, Manifest manifest = fixture_manifest()) {
  fs::create_directories(dir);
  std::map<std::string, std::vector<TensorToWrite>> by_file;
  std::vector<std::string> data;  // keeps the bytes alive until written
  data.reserve(64);
  for (const TensorEntry& tensor : manifest.tensors) {
    for (const Piece& piece : tensor.pieces) {
      const size_t bytes = static_cast<size_t>(elements_of(piece.shape)) * dtype_size(tensor.dtype);
      std::string& buffer = data.emplace_back(bytes, '\0');
      for (size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<char>((i * 7 + piece.key.size()) & 0x3f);
      by_file[piece.file].push_back({piece.key, tensor.dtype, piece.shape, buffer.data()});
    }
  }
  manifest.files.clear();
  for (const auto& [file, tensors] : by_file) {
    const WrittenFile written = write_safetensors(dir / file, tensors);
    manifest.files.push_back({file, written.bytes, written.crc32c});
  }
  write_bytes(dir / "manifest.json", manifest_to_json(manifest));
  return manifest;
}

}  // namespace giant::checkpoint::test
