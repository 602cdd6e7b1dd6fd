// The safetensors file format (docs/reference/formats.md): an 8-byte
// little-endian header length N, N bytes of JSON header (each tensor's
// dtype, shape and [begin, end) data offsets relative to the data section,
// and an optional "__metadata__" map of strings), then the raw little-endian
// data. Giant's own reader and writer; no libtorch here.
//
// The reader trusts nothing: the header length, every offset and every
// shape are checked against the file's size before anything is allocated
// or read, and an error names the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "giant/base/error.h"

namespace giant::checkpoint {

using giant::FormatError;  // base/error.h

enum class DType { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors' spelling: "F32", "BF16", ...
std::optional<DType> parse_dtype(std::string_view name);
// "[2, 3]": how the checkpoint layer's messages write a shape ("[2,3]"
// with "," as the separator, as verify's compact problem lines do).
std::string shape_text(const std::vector<int64_t>& shape, const char* separator = ", ");
// Throws FormatError "FILE: WHAT": how the checkpoint layer's readers name a bad file.
[[noreturn]] void fail_in_file(const std::string& file, const std::string& what);

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // in the data section
  uint64_t bytes() const { return end - begin; }
  int64_t elements() const;
};

// The largest header the reader accepts (the JSON of a few thousand tensors
// is far below it).
constexpr uint64_t kMaxHeaderBytes = 100000000;  // what the reference reader accepts

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + the header's length: where the data section starts
  const TensorInfo* find(std::string_view name) const;
};

// Parses a header's JSON text for a file of file_size bytes whose header is
// header_json.size() bytes long. Checks: valid JSON object; each entry's
// dtype known, shape non-negative with a product that does not overflow,
// end - begin == elements x dtype size, offsets within the data section,
// tensors not overlapping; __metadata__ a map of strings. `file` is used in
// messages only. FormatError otherwise.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t file_size,
                                           const std::string& file);

struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // elements x dtype size bytes, little-endian
};

struct WrittenFile {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

// Writes the tensors in order (the header padded with spaces to a multiple
// of 8 bytes, as the format recommends) and fsyncs the file. Error on any
// failed write (disk full), naming the file; a partial file may be left.
WrittenFile write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// An open safetensors file, its header parsed and checked.
class SafetensorsReader {
 public:
  // FormatError naming the file when it is missing, shorter than its
  // header says, or its header is invalid.
  explicit SafetensorsReader(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const SafetensorsHeader& header() const { return header_; }
  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Reads tensor `name`'s bytes [offset, offset + bytes) of its data into
  // dest (FormatError when it is absent or the range is outside it).
  void read(std::string_view name, void* dest, uint64_t offset, uint64_t bytes) const;
  void read(const TensorInfo& tensor, void* dest) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  SafetensorsHeader header_;
};

// CRC-32C of a whole file, read in large blocks (FormatError when unreadable).
uint32_t file_crc32c(const std::filesystem::path& path);

}  // namespace giant::checkpoint
