#include "giant/data/index_format.h"

#include <cstring>

#include "giant/base/error.h"

namespace giant::data {
namespace {

constexpr uint64_t kBytesPerSequence = 4 + 8;  // an int32 length and an int64 pointer
constexpr uint64_t kBytesPerDocumentIndex = 8;

uint64_t load_uint64(const unsigned char* at) {
  uint64_t value;
  std::memcpy(&value, at, sizeof value);  // the format is little-endian, as every host Giant runs on
  return value;
}

// The magic as it reads, non-printable bytes as \xNN.
std::string printable(const unsigned char* bytes, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] >= 0x20 && bytes[i] < 0x7f) {
      text += static_cast<char>(bytes[i]);
    } else {
      text += "\\x";
      text += kHex[bytes[i] >> 4];
      text += kHex[bytes[i] & 15];
    }
  }
  return text;
}

class IndexParser {
 public:
  IndexParser(const void* bytes, uint64_t size, uint64_t bin_size, const std::string& idx_name,
              const std::string& bin_name)
      : data_(static_cast<const unsigned char*>(bytes)),
        size_(size),
        bin_size_(bin_size),
        idx_name_(idx_name),
        bin_name_(bin_name) {}

  IndexLayout parse() {
    parse_header();
    check_pointers();
    check_document_index();
    return layout_;
  }

 private:
  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw FormatError(detail::concat(idx_name_, ": ", std::forward<Parts>(parts)...));
  }

  void parse_header();
  void parse_counts();
  void check_pointers();
  void check_document_index();

  const unsigned char* data_;
  uint64_t size_, bin_size_;
  const std::string& idx_name_;
  const std::string& bin_name_;
  IndexLayout layout_;
};

void IndexParser::parse_header() {
  if (size_ < kIndexHeaderBytes) {
    fail("the file is ", size_, " bytes, shorter than the index header (", kIndexHeaderBytes,
         " bytes): not a Megatron index, or truncated");
  }
  if (std::memcmp(data_, kIndexMagic, sizeof kIndexMagic) != 0) {
    fail("magic is '", printable(data_, sizeof kIndexMagic), "', not 'MMIDIDX\\x00\\x00': not a Megatron index");
  }
  const uint64_t version = load_uint64(data_ + 9);
  if (version != kIndexVersion) fail("version is ", version, ", expected ", kIndexVersion);
  const uint8_t code = data_[17];
  switch (code) {
    case 1: case 2: case 3: case 4: case 5: case 8:
      layout_.dtype = static_cast<TokenDtype>(code);
      break;
    case 6: case 7:
      fail("dtype code ", int{code}, " is ", token_dtype_name(code), ": token ids are integers");
    default:
      fail("dtype code ", int{code}, " is not one of the format's (1-8)");
  }
  parse_counts();
}

void IndexParser::parse_counts() {
  const uint64_t sequences = load_uint64(data_ + 18);
  const uint64_t document_indices = load_uint64(data_ + 26);
  const uint64_t body = size_ - kIndexHeaderBytes;
  // Divisions, not products: a count near 2^64 must not wrap into a small size.
  if (sequences > body / kBytesPerSequence) {
    fail("sequence count ", sequences, " does not fit the file (", size_, " bytes; ", kBytesPerSequence,
         " bytes a sequence)");
  }
  const uint64_t after_sequences = body - sequences * kBytesPerSequence;
  if (document_indices > after_sequences / kBytesPerDocumentIndex) {
    fail("document index count ", document_indices, " does not fit the file (", size_, " bytes, ",
         after_sequences, " of them after ", sequences, " sequences)");
  }
  if (document_indices == 0) fail("document index count is 0: the document index starts with 0 and ends with ", sequences);
  const uint64_t expected = kIndexHeaderBytes + sequences * kBytesPerSequence + document_indices * kBytesPerDocumentIndex;
  if (expected != size_) {
    fail("file size is ", size_, " bytes, but ", sequences, " sequences and ", document_indices,
         " document indices take ", expected, " (trailing bytes)");
  }
  layout_.num_sequences = static_cast<int64_t>(sequences);
  layout_.num_document_indices = static_cast<int64_t>(document_indices);
  layout_.lengths = data_ + kIndexHeaderBytes;
  layout_.pointers = layout_.lengths + 4 * sequences;
  layout_.document_index = layout_.pointers + 8 * sequences;
}

void IndexParser::check_pointers() {
  const uint64_t item = token_dtype_size(layout_.dtype);
  uint64_t expected = 0;  // <= bin_size_ throughout, so the running sum cannot overflow
  for (int64_t i = 0; i < layout_.num_sequences; ++i) {
    const int32_t length = load_int32(layout_.lengths, i);
    const int64_t pointer = load_int64(layout_.pointers, i);
    if (length < 0) fail("sequence length ", i, " is ", length, " (negative)");
    if (pointer < 0) fail("sequence pointer ", i, " is ", pointer, " (negative)");
    if (static_cast<uint64_t>(pointer) > bin_size_) {
      fail("sequence pointer ", i, " is ", pointer, ", past the end of ", bin_name_, " (", bin_size_, " bytes)");
    }
    if (static_cast<uint64_t>(pointer) != expected) {
      if (i == 0) fail("sequence pointer 0 is ", pointer, ", expected 0 (the first sequence starts at byte 0)");
      fail("sequence pointer ", i, " is ", pointer, ", expected ", expected, " (pointer ", i - 1, " + length ", i - 1,
           " x ", item, " bytes)");
    }
    const uint64_t bytes = static_cast<uint64_t>(length) * item;
    if (bytes > bin_size_ - expected) {
      fail("sequence length ", i, " is ", length, ": its ", bytes, " bytes from byte ", pointer, " run past the end of ",
           bin_name_, " (", bin_size_, " bytes)");
    }
    expected += bytes;
  }
  if (expected != bin_size_) {
    fail("sequence lengths end at byte ", expected, " but ", bin_name_, " is ", bin_size_, " bytes");
  }
  layout_.num_tokens = static_cast<int64_t>(bin_size_ / item);
}

void IndexParser::check_document_index() {
  int64_t previous = 0;
  for (int64_t j = 0; j < layout_.num_document_indices; ++j) {
    const int64_t start = load_int64(layout_.document_index, j);
    if (j == 0 && start != 0) fail("document index 0 is ", start, ", expected 0 (the first document starts at sequence 0)");
    if (start < previous) fail("document index ", j, " is ", start, ", below document index ", j - 1, " (", previous, ")");
    if (start > layout_.num_sequences) {
      fail("document index ", j, " is ", start, ", past the sequence count ", layout_.num_sequences);
    }
    previous = start;
  }
  if (previous != layout_.num_sequences) {
    fail("document index ", layout_.num_document_indices - 1, " (the last) is ", previous,
         ", expected the sequence count ", layout_.num_sequences);
  }
}

}  // namespace

int32_t load_int32(const unsigned char* array, int64_t i) {
  int32_t value;
  std::memcpy(&value, array + 4 * i, sizeof value);
  return value;
}

int64_t load_int64(const unsigned char* array, int64_t i) {
  int64_t value;
  std::memcpy(&value, array + 8 * i, sizeof value);
  return value;
}

std::string token_dtype_name(uint8_t code) {
  switch (code) {
    case 1: return "uint8";
    case 2: return "int8";
    case 3: return "int16";
    case 4: return "int32";
    case 5: return "int64";
    case 6: return "float64";
    case 7: return "float32";
    case 8: return "uint16";
    default: return "code " + std::to_string(code);
  }
}

IndexLayout parse_index(const void* bytes, uint64_t size, uint64_t bin_size, const std::string& idx_name,
                        const std::string& bin_name) {
  return IndexParser(bytes, size, bin_size, idx_name, bin_name).parse();
}

std::string encode_index(TokenDtype dtype, const std::vector<int32_t>& lengths) {
  const uint64_t sequences = lengths.size();
  const uint64_t document_indices = sequences + 1;
  std::string out(kIndexHeaderBytes + sequences * kBytesPerSequence + document_indices * kBytesPerDocumentIndex, '\0');
  char* at = out.data();
  auto put = [&at](const void* value, size_t n) {
    if (n == 0) return;  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(at, value, n);
    at += n;
  };
  put(kIndexMagic, sizeof kIndexMagic);
  put(&kIndexVersion, 8);
  const uint8_t code = static_cast<uint8_t>(dtype);
  put(&code, 1);
  put(&sequences, 8);
  put(&document_indices, 8);
  put(lengths.data(), 4 * sequences);
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype));
  int64_t pointer = 0;
  for (const int32_t length : lengths) {
    put(&pointer, 8);
    pointer += length * item;
  }
  for (int64_t document = 0; document <= static_cast<int64_t>(sequences); ++document) put(&document, 8);
  return out;
}

}  // namespace giant::data
