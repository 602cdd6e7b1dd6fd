// giant_data_fuzz [--iterations N] [--seconds S] [--seed S]: feeds mutated Megatron indexes
// (.idx bytes with a mutated .bin size) to the index parser. Each input must
// either parse or be a FormatError; anything else (another exception,
// bad_alloc from an unchecked count, a crash) is a failure, reported with the
// input in hex. What parses must be self-consistent: the counts make the
// file's size, the pointers are the running sum of the lengths and end at
// .bin's size, the document index runs from 0 to the sequence count, and an
// index of one sequence a document encodes back to the same bytes. Every
// 256th input also goes through files and IndexedDataset::open, which must
// agree with the parser and read every token.
//
// The command line and output are bench/fuzz's (fuzz_driver.h).

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/index_format.h"
#include "giant/data/indexed_dataset.h"
#include "fuzz_driver.h"
#include "mutator.h"  // bench/fuzz's byte mutations, hex dump and hostile sizes

namespace giant::data::fuzz {
namespace {

namespace fs = std::filesystem;
using giant::fuzz::Inconsistent;
using giant::fuzz::Target;
using giant::fuzz::Verdict;
using giant::fuzz::Mutator;

struct Input {
  std::string idx;
  uint64_t bin_size = 0;
};

void require(bool condition, const std::string& what) {
  if (!condition) throw Inconsistent(what);
}

Input seed_of(TokenDtype dtype, const std::vector<int32_t>& lengths) {
  int64_t tokens = 0;
  for (const int32_t length : lengths) tokens += length;
  return {encode_index(dtype, lengths), static_cast<uint64_t>(tokens) * token_dtype_size(dtype)};
}

// Indexes as Giant's writer makes them, and one of Megatron's sentence
// split (several sequences a document, an empty document).
std::vector<Input> seeds() {
  std::vector<Input> out = {seed_of(TokenDtype::kUint16, {}),
                            seed_of(TokenDtype::kUint16, {3, 0, 5}),
                            seed_of(TokenDtype::kInt32, {1, 2, 3, 4, 5, 6, 7}),
                            seed_of(TokenDtype::kUint8, {100}),
                            seed_of(TokenDtype::kInt64, {2, 2})};
  Input split = seed_of(TokenDtype::kInt16, {4, 1, 2, 3});
  const int64_t document_index[] = {0, 2, 2, 4};  // 3 documents: sequences {0, 1}, {}, {2, 3}
  const uint64_t count = 4;
  split.idx.resize(kIndexHeaderBytes + 12 * 4);
  std::memcpy(split.idx.data() + 26, &count, 8);
  split.idx.append(reinterpret_cast<const char*>(document_index), sizeof document_index);
  out.push_back(split);
  return out;
}

// Overwrites one field (header or array element) with a hostile value: the
// ends of its type, counts whose products wrap, and off-by-ones of what it held.
void overwrite_field(std::string& idx, Mutator& random) {
  if (idx.size() < kIndexHeaderBytes) return;
  if (random.below(8) == 0) {
    // Counts whose products wrap around 2^64 to exactly the file's size: a
    // parser that multiplies would accept them and read far past the file.
    const uint64_t sequences = (uint64_t{1} << 62) + random.below(4) * (uint64_t{1} << 60) + random.below(8);
    const uint64_t document_indices = (idx.size() - kIndexHeaderBytes - 12 * sequences) / 8 +
                                      random.below(2) * (uint64_t{1} << 61);
    std::memcpy(idx.data() + 18, &sequences, 8);
    std::memcpy(idx.data() + 26, &document_indices, 8);
    return;
  }
  uint64_t sequences = 0;
  std::memcpy(&sequences, idx.data() + 18, 8);
  sequences = std::min<uint64_t>(sequences, idx.size() / 12);
  size_t at = 0, width = 8;
  switch (random.below(7)) {
    case 0: at = 9; break;                            // version
    case 1: at = 17; width = 1; break;                // dtype code
    case 2: at = 18; break;                           // sequence count
    case 3: at = 26; break;                           // document index count
    case 4: at = kIndexHeaderBytes + 4 * random.below(sequences + 1); width = 4; break;  // a length
    case 5: at = kIndexHeaderBytes + 4 * sequences + 8 * random.below(sequences + 1); break;  // a pointer
    default: at = kIndexHeaderBytes + 12 * sequences + 8 * random.below(sequences + 2); break;  // a document index
  }
  if (at + width > idx.size()) return;
  uint64_t old = 0;
  std::memcpy(&old, idx.data() + at, width);
  const uint64_t hostile[] = {0, 1, ~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 63) - 1, uint64_t{1} << 62,
                              uint64_t{1} << 61, uint64_t{1} << 32, 0x7fffffff, 0x80000000, old + 1, old - 1,
                              old * 2, random.below(256)};
  const uint64_t value = hostile[random.below(sizeof hostile / sizeof hostile[0])];
  std::memcpy(idx.data() + at, &value, width);
}

// What an accepted index must satisfy, checked apart from the parser's own code.
void check_layout(const Input& input, const IndexLayout& layout) {
  const uint64_t item = token_dtype_size(layout.dtype);
  const uint64_t s = static_cast<uint64_t>(layout.num_sequences), d = static_cast<uint64_t>(layout.num_document_indices);
  require(d >= 1 && kIndexHeaderBytes + 12 * s + 8 * d == input.idx.size(), "the counts do not make the file's size");
  uint64_t sum = 0;
  std::vector<int32_t> lengths;
  for (uint64_t i = 0; i < s; ++i) {
    const int32_t length = load_int32(layout.lengths, static_cast<int64_t>(i));
    require(length >= 0, "a negative length");
    require(load_int64(layout.pointers, static_cast<int64_t>(i)) == static_cast<int64_t>(sum), "a pointer off the sum");
    sum += static_cast<uint64_t>(length) * item;
    require(sum <= input.bin_size, "the sequences run past .bin");
    lengths.push_back(length);
  }
  require(sum == input.bin_size, "the sequences do not end at .bin's size");
  require(static_cast<uint64_t>(layout.num_tokens) * item == input.bin_size, "num_tokens is not .bin's size");
  bool one_per_document = true;
  for (uint64_t j = 0; j < d; ++j) {
    const int64_t start = load_int64(layout.document_index, static_cast<int64_t>(j));
    require(start >= 0 && static_cast<uint64_t>(start) <= s, "a document index outside the sequences");
    require(j == 0 ? start == 0 : start >= load_int64(layout.document_index, static_cast<int64_t>(j - 1)),
            "document indices that do not start at 0 and rise");
    one_per_document = one_per_document && static_cast<uint64_t>(start) == j;
  }
  require(load_int64(layout.document_index, static_cast<int64_t>(d - 1)) == static_cast<int64_t>(s),
          "the document index does not end at the sequence count");
  if (one_per_document && d == s + 1) {
    require(encode_index(layout.dtype, lengths) == input.idx, "the index does not encode back to its bytes");
  }
}

// The same input through files and IndexedDataset::open: it must agree with
// the parser (`parsed`) and read every token. Only for a .bin small enough
// to make (sparse) on disk.
void check_open(const Input& input, bool parsed, const fs::path& folder) {
  if (input.bin_size > (uint64_t{1} << 20)) return;
  const std::string prefix = (folder / "fuzz").string();
  std::ofstream(prefix + ".idx", std::ios::binary | std::ios::trunc) << input.idx;
  std::ofstream(prefix + ".bin", std::ios::trunc).close();
  fs::resize_file(prefix + ".bin", input.bin_size);
  std::shared_ptr<const IndexedDataset> dataset;
  try {
    dataset = IndexedDataset::open(prefix);
  } catch (const FormatError& e) {
    require(!parsed, std::string("open refused what the parser accepted: ") + e.what());
    return;
  }
  require(parsed, "open accepted what the parser refused");
  std::vector<int32_t> tokens(static_cast<size_t>(dataset->num_tokens()));
  dataset->read(0, dataset->num_tokens(), tokens.data());  // a sparse .bin reads as zeros, which fit every dtype
  for (int64_t d = 0; d <= dataset->num_documents(); ++d) {
    require(dataset->document_start(d) <= dataset->num_tokens(), "a document starts past the tokens");
  }
}

// The driver's inputs are strings: .bin's size (8 bytes), then the .idx bytes.
std::string encode_input(const Input& input) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &input.bin_size, 8);
  return bytes + input.idx;
}

Input decode_input(const std::string& bytes) {
  Input input;
  if (bytes.size() < 8) return {bytes, 0};
  std::memcpy(&input.bin_size, bytes.data(), 8);
  input.idx = bytes.substr(8);
  return input;
}

std::string mutate(Mutator& random, const std::string& parent_bytes, const std::vector<std::string>& seed_bytes) {
  Input input = decode_input(parent_bytes);
  if (random.below(2) == 0) {
    for (uint64_t n = 1 + random.below(3); n > 0; --n) overwrite_field(input.idx, random);
  } else {
    input.idx = random.mutate(input.idx, seed_bytes);
  }
  if (random.below(4) == 0) input.bin_size = random.mutate_size(input.bin_size);
  return encode_input(input);
}

// Parses one input; every 256th also goes through files and open().
class IndexTarget {
 public:
  Verdict feed(const std::string& bytes) {
    const Input input = decode_input(bytes);
    bool parsed = false;
    try {
      check_layout(input, parse_index(input.idx.data(), input.idx.size(), input.bin_size, "fuzz.idx", "fuzz.bin"));
      parsed = true;
    } catch (const FormatError&) {
      // The expected answer to a bad input.
    }
    if (++inputs_ % 256 == 0) check_open(input, parsed, folder_.path());
    return parsed ? Verdict::accepted : Verdict::refused;
  }

 private:
  giant::fuzz::TempFolder folder_{"giant-data-fuzz"};
  int64_t inputs_ = 0;
};

std::vector<Target> targets() {
  std::vector<std::string> seed_bytes;
  for (const Input& s : seeds()) seed_bytes.push_back(encode_input(s));
  auto index = std::make_shared<IndexTarget>();
  Target target("index", seed_bytes, [index](const std::string& input) { return index->feed(input); });
  target.mutate = mutate;
  target.max_pool_input = 4096;
  return {target};
}

}  // namespace
}  // namespace giant::data::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv,
                                "Fuzzes the Megatron index parser (.idx bytes with .bin sizes; in a failure's hex, "
                                "the first 8 bytes are .bin's size).",
                                "giant_data_fuzz", giant::data::fuzz::targets);
}
