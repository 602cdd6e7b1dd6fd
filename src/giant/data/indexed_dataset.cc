#include "giant/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "giant/base/error.h"
#include "giant/base/synced_files.h"
#include "giant/data/index_format.h"

namespace giant::data {
namespace {

namespace fs = std::filesystem;

// A hint for a prefix given with its extension ("corpus.idx" for "corpus").
std::string prefix_hint(const std::string& prefix) {
  const fs::path path(prefix);
  if (path.extension() == ".idx" || path.extension() == ".bin") {
    return " (give the prefix without " + path.extension().string() + ": " + path.stem().string() + ")";
  }
  return "";
}

template <class T>
void widen(const unsigned char* at, int64_t count, int32_t* out) {
  // The read buffer comes from operator new, aligned for any integer.
  const T* tokens = reinterpret_cast<const T*>(at);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(tokens[i]);
}

}  // namespace

// A file opened read-only: memory-mapped whole (the index), or kept open to
// be read with pread (the tokens). Unmapped and closed on destruction.
struct IndexedDataset::Mapping {
  Mapping(const std::string& path, const std::string& prefix, int advice, bool map = true) : name(path) {
    const int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (opened < 0) throw FormatError(path + ": cannot open: " + std::strerror(errno) + prefix_hint(prefix));
    struct stat info {};
    const bool stated = ::fstat(opened, &info) == 0;
    const int error = errno;
    if (!stated || !S_ISREG(info.st_mode)) {
      ::close(opened);
      throw FormatError(path + ": " + (stated ? "not a regular file" : std::string("cannot stat: ") + std::strerror(error)));
    }
    size = static_cast<uint64_t>(info.st_size);
    if (!map) {
      fd = opened;
      return;
    }
    if (size > 0) {  // mmap refuses an empty range; an empty file has no bytes to map
      void* at = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, opened, 0);
      const int error = errno;
      ::close(opened);
      if (at == MAP_FAILED) throw FormatError(path + ": cannot map: " + std::strerror(error));
      data = static_cast<const unsigned char*>(at);
      ::madvise(at, size, advice);  // a hint: failure changes nothing
    } else {
      ::close(opened);
    }
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<unsigned char*>(data), size);
    if (fd >= 0) ::close(fd);
  }
  // count bytes at offset into out, all of them (pread may return fewer).
  void read(uint64_t offset, size_t count, unsigned char* out) const {
    while (count > 0) {
      const ssize_t n = ::pread(fd, out, count, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw FormatError(name + ": cannot read at byte " + std::to_string(offset) + ": " +
                                    (n == 0 ? std::string("the file is shorter than its index says") : std::strerror(errno)));
      out += n, offset += static_cast<uint64_t>(n), count -= static_cast<size_t>(n);
    }
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::string name;
  const unsigned char* data = nullptr;
  uint64_t size = 0;
  int fd = -1;  // when not mapped
};

size_t token_dtype_size(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8:
      return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16:
      return 2;
    case TokenDtype::kInt32:
      return 4;
    case TokenDtype::kInt64:
      return 8;
  }
  GIANT_CHECK(false, "unknown token dtype code ", int{static_cast<uint8_t>(dtype)});
  return 0;
}

TokenDtype token_dtype_for_vocabulary(int64_t vocab_size) {
  GIANT_CHECK(vocab_size > 0 && vocab_size <= int64_t{std::numeric_limits<int32_t>::max()} + 1,
              "a vocabulary of ", vocab_size, " ids does not fit int32 token ids");
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

std::shared_ptr<const IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  std::shared_ptr<IndexedDataset> dataset(new IndexedDataset());
  dataset->prefix_ = prefix;
  const std::string idx_name = prefix + ".idx", bin_name = prefix + ".bin";
  // The index is mapped and read whole (checked now, then looked up at
  // random). The tokens are read with pread where samples fall: a mapping
  // would put every page-cache folio a sample touches (up to 2 MiB each on
  // ext4) into the rank's RSS, 135 MiB after 160 random samples of a 166 MB file.
  dataset->idx_ = std::make_unique<Mapping>(idx_name, prefix, MADV_WILLNEED);
  dataset->bin_ = std::make_unique<Mapping>(bin_name, prefix, 0, /*map=*/false);
  const IndexLayout layout =
      parse_index(dataset->idx_->data, dataset->idx_->size, dataset->bin_->size, idx_name, bin_name);
  // Checking read all of it; drop those pages from the RSS (they stay in the
  // page cache, and the few lookups after this fault back in).
  if (dataset->idx_->data != nullptr) {
    ::madvise(const_cast<unsigned char*>(dataset->idx_->data), dataset->idx_->size, MADV_DONTNEED);
  }
  dataset->dtype_ = layout.dtype;
  dataset->num_sequences_ = layout.num_sequences;
  dataset->num_documents_ = layout.num_document_indices - 1;
  dataset->num_tokens_ = layout.num_tokens;
  dataset->lengths_ = layout.lengths;
  dataset->pointers_ = layout.pointers;
  dataset->document_index_ = layout.document_index;
  return dataset;
}

IndexedDataset::~IndexedDataset() = default;

int64_t IndexedDataset::sequence_length(int64_t sequence) const {
  GIANT_CHECK(sequence >= 0 && sequence < num_sequences_, prefix_, ": sequence ", sequence, " outside [0, ",
              num_sequences_, ")");
  return load_int32(lengths_, sequence);
}

int64_t IndexedDataset::sequence_start(int64_t sequence) const {
  GIANT_CHECK(sequence >= 0 && sequence <= num_sequences_, prefix_, ": sequence ", sequence, " outside [0, ",
              num_sequences_, "]");
  if (sequence == num_sequences_) return num_tokens_;
  return load_int64(pointers_, sequence) / static_cast<int64_t>(token_dtype_size(dtype_));
}

int64_t IndexedDataset::document_start(int64_t document) const {
  GIANT_CHECK(document >= 0 && document <= num_documents_, prefix_, ": document ", document, " outside [0, ",
              num_documents_, "]");
  return sequence_start(load_int64(document_index_, document));
}

void IndexedDataset::read(int64_t first, int64_t count, int32_t* out) const {
  GIANT_CHECK(first >= 0 && count >= 0 && first <= num_tokens_ && count <= num_tokens_ - first, prefix_,
              ": tokens [", first, ", ", first, " + ", count, ") outside [0, ", num_tokens_, ")");
  if (count == 0) return;
  const auto item = static_cast<int64_t>(token_dtype_size(dtype_));
  std::vector<unsigned char> buffer(static_cast<size_t>(count * item));  // new[] aligns for every dtype
  bin_->read(static_cast<uint64_t>(first * item), buffer.size(), buffer.data());
  const unsigned char* at = buffer.data();
  switch (dtype_) {
    case TokenDtype::kUint8: return widen<uint8_t>(at, count, out);
    case TokenDtype::kInt8: return widen<int8_t>(at, count, out);
    case TokenDtype::kInt16: return widen<int16_t>(at, count, out);
    case TokenDtype::kUint16: return widen<uint16_t>(at, count, out);
    case TokenDtype::kInt32: std::memcpy(out, at, static_cast<size_t>(count) * 4); return;
    case TokenDtype::kInt64: {
      const int64_t* tokens = reinterpret_cast<const int64_t*>(at);
      for (int64_t i = 0; i < count; ++i) {
        GIANT_CHECK(tokens[i] >= std::numeric_limits<int32_t>::min() && tokens[i] <= std::numeric_limits<int32_t>::max(),
                    prefix_, ".bin: token ", first + i, " is ", tokens[i], ", which does not fit int32");
        out[i] = static_cast<int32_t>(tokens[i]);
      }
      return;
    }
  }
}

// PREFIX.bin.tmp, written through a buffer of a few MiB.
struct IndexedDatasetWriter::Output {
  explicit Output(std::string file) : path(std::move(file)) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
    buffer.reserve(kBufferBytes);
  }
  ~Output() {
    if (fd >= 0) ::close(fd);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // Room for `bytes` more at the end of the buffer (flushing it first when full).
  unsigned char* extend(size_t bytes) {
    if (buffer.size() + bytes > kBufferBytes) flush();
    const size_t at = buffer.size();
    buffer.resize(at + bytes);
    return buffer.data() + at;
  }

  void flush() {
    size_t done = 0;
    while (done < buffer.size()) {
      const ssize_t n = ::write(fd, buffer.data() + done, buffer.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("cannot write " + path + ": " + std::strerror(n < 0 ? errno : ENOSPC));
      done += static_cast<size_t>(n);
    }
    buffer.clear();
  }

  void close() {
    flush();
    const int closing = fd;
    fd = -1;
    if (::close(closing) != 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
  }

  static constexpr size_t kBufferBytes = 4 << 20;
  std::string path;
  int fd = -1;
  std::vector<unsigned char> buffer;
};

namespace {

// tokens[0, count) (tokens `first`... of `document`) as T. The range check
// is a min/max pass apart from the conversion, so that both vectorize: the
// writer is the one thread every token goes through.
template <class T>
void narrow(const int32_t* tokens, size_t count, size_t first, int64_t document, TokenDtype dtype,
            unsigned char* out) {
  int32_t low = std::numeric_limits<int32_t>::max(), high = std::numeric_limits<int32_t>::min();
  for (size_t i = 0; i < count; ++i) {
    low = std::min(low, tokens[i]);
    high = std::max(high, tokens[i]);
  }
  if (count > 0 && (low < std::numeric_limits<T>::min() || high > std::numeric_limits<T>::max())) {
    for (size_t i = 0; i < count; ++i) {
      const int32_t id = tokens[i];
      if (id < std::numeric_limits<T>::min() || id > std::numeric_limits<T>::max()) {
        throw Error(detail::concat("token id ", id, " (token ", first + i, " of document ", document,
                                   ") does not fit ", token_dtype_name(static_cast<uint8_t>(dtype))));
      }
    }
  }
  T* items = reinterpret_cast<T*>(out);  // the buffer holds whole items from its (aligned) start
  for (size_t i = 0; i < count; ++i) items[i] = static_cast<T>(tokens[i]);
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  token_dtype_size(dtype_);  // refuses a code outside the enum
  bin_ = std::make_unique<Output>(prefix_ + ".bin.tmp");
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  bin_.reset();
  std::error_code ignored;
  fs::remove(prefix_ + ".bin.tmp", ignored);
  fs::remove(prefix_ + ".idx.tmp", ignored);
}

void IndexedDatasetWriter::add_document(const std::vector<int32_t>& tokens) {
  GIANT_CHECK(!finished_, prefix_, ": add_document after finish");
  GIANT_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), prefix_, ": document ",
              documents_written(), " has ", tokens.size(), " tokens, more than a sequence length (int32) holds");
  const size_t item = token_dtype_size(dtype_);
  // Buffer the document in pieces that fit the buffer: a long one must not
  // grow it. Items stay whole, so each piece is aligned in the buffer.
  const size_t piece_tokens = Output::kBufferBytes / item;
  const int64_t document = documents_written();
  for (size_t first = 0; first < tokens.size(); first += piece_tokens) {
    const size_t count = std::min(piece_tokens, tokens.size() - first);
    const int32_t* piece = tokens.data() + first;
    unsigned char* out = bin_->extend(count * item);
    switch (dtype_) {
      case TokenDtype::kUint8: narrow<uint8_t>(piece, count, first, document, dtype_, out); break;
      case TokenDtype::kInt8: narrow<int8_t>(piece, count, first, document, dtype_, out); break;
      case TokenDtype::kInt16: narrow<int16_t>(piece, count, first, document, dtype_, out); break;
      case TokenDtype::kUint16: narrow<uint16_t>(piece, count, first, document, dtype_, out); break;
      case TokenDtype::kInt32: std::memcpy(out, piece, count * 4); break;
      case TokenDtype::kInt64: narrow<int64_t>(piece, count, first, document, dtype_, out); break;
    }
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_written_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::finish() {
  GIANT_CHECK(!finished_, prefix_, ": finish called twice");
  const std::string bin = prefix_ + ".bin", idx = prefix_ + ".idx";
  bin_->close();
  sync_path(bin + ".tmp");
  write_synced(idx + ".tmp", encode_index(dtype_, lengths_));
  // .idx last: a dataset is complete once its index is in place.
  if (std::rename((bin + ".tmp").c_str(), bin.c_str()) != 0) {
    throw Error("cannot rename " + bin + ".tmp to " + bin + ": " + std::strerror(errno));
  }
  if (std::rename((idx + ".tmp").c_str(), idx.c_str()) != 0) {
    const int error = errno;
    std::error_code ignored;
    fs::remove(bin, ignored);
    throw Error("cannot rename " + idx + ".tmp to " + idx + ": " + std::strerror(error));
  }
  finished_ = true;
  const fs::path folder = fs::path(prefix_).parent_path();
  sync_path(folder.empty() ? fs::path(".") : folder);
}

}  // namespace giant::data
