#include "giant/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "giant/base/crc32c.h"

namespace giant::checkpoint {
namespace {

using Json = nlohmann::json;

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "F64", 8}, {DType::f32, "F32", 4}, {DType::f16, "F16", 2}, {DType::bf16, "BF16", 2},
    {DType::i64, "I64", 8}, {DType::i32, "I32", 4}, {DType::i16, "I16", 2}, {DType::i8, "I8", 1},
    {DType::u8, "U8", 1},   {DType::boolean, "BOOL", 1},
};

const DTypeInfo& info_of(DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[1];
}


std::string system_error() { return std::strerror(errno); }

// An unsigned JSON integer, or a FormatError naming `what`.
uint64_t unsigned_of(const Json& value, const std::string& file, const std::string& what) {
  if (!value.is_number_unsigned()) {
    if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
    fail_in_file(file, what + " must be a non-negative integer, got " + value.dump());
  }
  return value.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const Json& entry, uint64_t data_bytes, const std::string& file) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object()) fail_in_file(file, where + " must be an object");
  for (const auto& item : entry.items()) {
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets") {
      fail_in_file(file, where + " has an unknown field '" + item.key() + "'");
    }
  }
  if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    fail_in_file(file, where + " needs dtype, shape and data_offsets");
  }
  TensorInfo info;
  info.name = name;
  const Json& dtype = entry["dtype"];
  const auto parsed = dtype.is_string() ? parse_dtype(dtype.get<std::string>()) : std::nullopt;
  if (!parsed) fail_in_file(file, where + " has an unknown dtype " + dtype.dump());
  info.dtype = *parsed;
  const Json& shape = entry["shape"];
  if (!shape.is_array() || shape.size() > 64) fail_in_file(file, where + ": shape must be an array of at most 64 sizes");
  uint64_t elements = 1;
  for (const Json& size : shape) {
    const uint64_t d = unsigned_of(size, file, where + ": a shape entry");
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && elements > std::numeric_limits<uint64_t>::max() / d)) {
      fail_in_file(file, where + ": shape " + shape.dump() + " overflows");
    }
    elements *= d;
    info.shape.push_back(static_cast<int64_t>(d));
  }
  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) fail_in_file(file, where + ": data_offsets must be [begin, end]");
  info.begin = unsigned_of(offsets[0], file, where + ": data_offsets");
  info.end = unsigned_of(offsets[1], file, where + ": data_offsets");
  if (info.begin > info.end || info.end > data_bytes) {
    fail_in_file(file, where + ": data_offsets " + offsets.dump() + " are outside the data section of " +
                   std::to_string(data_bytes) + " bytes");
  }
  const size_t size = dtype_size(info.dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / size || info.bytes() != elements * size) {
    fail_in_file(file, where + ": data_offsets " + offsets.dump() + " hold " + std::to_string(info.bytes()) +
                   " bytes, its " + dtype_name(info.dtype) + " shape " + shape.dump() + " needs " +
                   std::to_string(elements) + " x " + std::to_string(size));
  }
  return info;
}

void write_all(int fd, const void* data, size_t bytes, const std::string& file) {
  const char* at = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, at, std::min<size_t>(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write '" + file + "': " + (n < 0 ? system_error() : "no progress"));
    at += n;
    bytes -= static_cast<size_t>(n);
  }
}

void read_all(int fd, void* dest, uint64_t offset, uint64_t bytes, const std::string& file) {
  char* at = static_cast<char*>(dest);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, at, std::min<uint64_t>(bytes, uint64_t{1} << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_in_file(file, "cannot read: " + system_error());
    if (n == 0) fail_in_file(file, "truncated: ends before byte " + std::to_string(offset + bytes));
    at += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

}  // namespace

void fail_in_file(const std::string& file, const std::string& what) { throw FormatError(file + ": " + what); }

std::string shape_text(const std::vector<int64_t>& shape, const char* separator) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? separator : "") + std::to_string(shape[i]);
  return text + "]";
}

size_t dtype_size(DType dtype) { return info_of(dtype).size; }
const char* dtype_name(DType dtype) { return info_of(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t file_size, const std::string& file) {
  SafetensorsHeader header;
  if (header_json.size() > kMaxHeaderBytes || file_size < 8 + header_json.size()) {
    fail_in_file(file, "a header of " + std::to_string(header_json.size()) + " bytes does not fit a file of " +
                   std::to_string(file_size));
  }
  header.data_offset = 8 + header_json.size();
  const uint64_t data_bytes = file_size - header.data_offset;
  const Json root = Json::parse(header_json.begin(), header_json.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) fail_in_file(file, "the header is not a JSON object");
  for (const auto& item : root.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) fail_in_file(file, "__metadata__ must be an object of strings");
      for (const auto& meta : item.value().items()) {
        if (!meta.value().is_string()) fail_in_file(file, "__metadata__ '" + meta.key() + "' must be a string");
        header.metadata[meta.key()] = meta.value().get<std::string>();
      }
      continue;
    }
    header.tensors.push_back(parse_entry(item.key(), item.value(), data_bytes, file));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered = 0;  // the data must be tiled exactly: no hole, no overlap
  for (const auto& t : header.tensors) {
    if (t.begin != covered) {
      fail_in_file(file, "tensor '" + t.name + "' starts at byte " + std::to_string(t.begin) + " of the data, expected " +
                     std::to_string(covered) + (t.begin < covered ? " (it overlaps another)" : " (a hole before it)"));
    }
    covered = t.end;
  }
  if (covered != data_bytes) {
    fail_in_file(file, "the tensors hold " + std::to_string(covered) + " bytes but the data section has " +
                   std::to_string(data_bytes));
  }
  return header;
}

WrittenFile write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    const uint64_t bytes = elements * dtype_size(t.dtype);
    GIANT_CHECK(!header.contains(t.name), "tensor '", t.name, "' twice in ", path.string());
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  prefix += text;

  const std::string file = path.string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + file + "': " + system_error());
  WrittenFile written;
  try {
    write_all(fd, prefix.data(), prefix.size(), file);
    written.crc32c = crc32c_extend(0, prefix);
    for (const auto& t : tensors) {
      uint64_t elements = 1;
      for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
      const size_t bytes = elements * dtype_size(t.dtype);
      write_all(fd, t.data, bytes, file);
      written.crc32c = crc32c_extend(written.crc32c, std::string_view(static_cast<const char*>(t.data), bytes));
    }
    if (::fsync(fd) != 0) throw Error("cannot sync '" + file + "': " + system_error());
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw Error("cannot close '" + file + "': " + system_error());
  written.bytes = prefix.size() + offset;
  return written;
}

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_in_file(file, "cannot open: " + system_error());
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail_in_file(file, "cannot stat: " + system_error());
    file_size_ = static_cast<uint64_t>(st.st_size);
    if (file_size_ < 8) fail_in_file(file, "truncated: " + std::to_string(file_size_) + " bytes, less than the 8-byte header length");
    unsigned char length_bytes[8];
    read_all(fd_, length_bytes, 0, 8, file);
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];
    if (length > kMaxHeaderBytes || length > file_size_ - 8) {
      fail_in_file(file, "the header length " + std::to_string(length) + " does not fit a file of " +
                     std::to_string(file_size_) + " bytes (truncated or not safetensors)");
    }
    std::string text(length, '\0');
    read_all(fd_, text.data(), 8, length, file);
    header_ = parse_safetensors_header(text, file_size_, file);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), file_size_(other.file_size_), header_(std::move(other.header_)) {
  other.fd_ = -1;
}

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    file_size_ = other.file_size_;
    header_ = std::move(other.header_);
    other.fd_ = -1;
  }
  return *this;
}

void SafetensorsReader::read(std::string_view name, void* dest, uint64_t offset, uint64_t bytes) const {
  const TensorInfo* t = header_.find(name);
  if (t == nullptr) fail_in_file(path_.string(), "has no tensor '" + std::string(name) + "'");
  if (offset > t->bytes() || bytes > t->bytes() - offset) {
    fail_in_file(path_.string(), "bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") are outside tensor '" +
                             t->name + "' of " + std::to_string(t->bytes()));
  }
  read_all(fd_, dest, header_.data_offset + t->begin + offset, bytes, path_.string());
}

void SafetensorsReader::read(const TensorInfo& tensor, void* dest) const { read(tensor.name, dest, 0, tensor.bytes()); }

uint32_t file_crc32c(const std::filesystem::path& path) {
  const std::string file = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_in_file(file, "cannot open: " + system_error());
  std::vector<char> block(size_t{8} << 20);
  uint32_t crc = 0;
  off_t offset = 0;
  for (;;) {
    // The kernel reads the next block while this one is checksummed.
    ::posix_fadvise(fd, offset + static_cast<off_t>(block.size()), static_cast<off_t>(block.size()),
                    POSIX_FADV_WILLNEED);
    const ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = system_error();
      ::close(fd);
      fail_in_file(file, "cannot read: " + why);
    }
    if (n == 0) break;
    offset += n;
    crc = crc32c_extend(crc, std::string_view(block.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  return crc;
}

}  // namespace giant::checkpoint
