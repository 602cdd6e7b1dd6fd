// Every field of a corrupt .idx (and a .bin of the wrong size) is refused at
// open with a FormatError naming the file and the field: one table row per
// corruption of a valid dataset of three sequences (lengths 3, 0, 5; uint16,
// so .bin is 16 bytes) in four document indices (0, 1, 2, 3).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/indexed_dataset.h"
#include "support/indexed_files.h"

namespace giant::data {
namespace {

using test::read_file;
using test::TempFolder;
using test::write_file;

constexpr size_t kSequences = 3;
constexpr size_t kLengths = 34, kPointers = kLengths + 4 * kSequences, kDocuments = kPointers + 8 * kSequences;

template <class T>
void put(std::string& bytes, size_t at, T value) {
  ASSERT_LE(at + sizeof value, bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

struct Corruption {
  const char* name;
  std::function<void(std::string& idx, std::string& bin)> corrupt;
  std::vector<std::string> expected;  // parts of the message; "{idx}" and "{bin}" stand for the files' paths
};

std::vector<Corruption> corruptions() {
  using B = std::string&;
  return {
      {"empty index", [](B idx, B) { idx.clear(); }, {"{idx}: the file is 0 bytes, shorter than the index header"}},
      {"short header", [](B idx, B) { idx.resize(20); }, {"{idx}: the file is 20 bytes"}},
      {"magic", [](B idx, B) { idx[0] = 'X'; }, {"{idx}: magic is 'XMIDIDX\\x00\\x00'", "not a Megatron index"}},
      {"magic's padding", [](B idx, B) { idx[8] = 1; }, {"{idx}: magic is 'MMIDIDX\\x00\\x01'"}},
      {"version", [](B idx, B) { put<uint64_t>(idx, 9, 2); }, {"{idx}: version is 2, expected 1"}},
      {"version 0", [](B idx, B) { put<uint64_t>(idx, 9, 0); }, {"{idx}: version is 0, expected 1"}},
      {"dtype code float64", [](B idx, B) { idx[17] = 6; }, {"{idx}: dtype code 6 is float64: token ids are integers"}},
      {"dtype code float32", [](B idx, B) { idx[17] = 7; }, {"{idx}: dtype code 7 is float32"}},
      {"dtype code 0", [](B idx, B) { idx[17] = 0; }, {"{idx}: dtype code 0 is not one of the format's"}},
      {"dtype code 9", [](B idx, B) { idx[17] = 9; }, {"{idx}: dtype code 9 is not one of the format's"}},
      {"dtype code 255", [](B idx, B) { idx[17] = static_cast<char>(255); }, {"{idx}: dtype code 255"}},
      {"sequence count 2^64 - 1", [](B idx, B) { put<uint64_t>(idx, 18, ~uint64_t{0}); },
       {"{idx}: sequence count 18446744073709551615 does not fit the file"}},
      // 12 x 2^62 wraps to 0: a product would find that it fits.
      {"sequence count 2^62", [](B idx, B) { put<uint64_t>(idx, 18, uint64_t{1} << 62); },
       {"{idx}: sequence count 4611686018427387904 does not fit the file"}},
      {"sequence count one more", [](B idx, B) { put<uint64_t>(idx, 18, 4); }, {"{idx}: document index count 4 does not fit"}},
      {"sequence count one less", [](B idx, B) { put<uint64_t>(idx, 18, 2); },
       {"{idx}: file size is 102 bytes, but 2 sequences and 4 document indices take 90"}},
      {"document index count 2^61", [](B idx, B) { put<uint64_t>(idx, 26, uint64_t{1} << 61); },
       {"{idx}: document index count 2305843009213693952 does not fit the file"}},
      {"document index count 2^64 - 1", [](B idx, B) { put<uint64_t>(idx, 26, ~uint64_t{0}); },
       {"{idx}: document index count 18446744073709551615 does not fit"}},
      {"document index count 0", [](B idx, B) { put<uint64_t>(idx, 26, 0); }, {"{idx}: document index count is 0"}},
      {"trailing bytes", [](B idx, B) { idx += std::string(8, '\0'); },
       {"{idx}: file size is 110 bytes, but 3 sequences and 4 document indices take 102 (trailing bytes)"}},
      {"truncated document index", [](B idx, B) { idx.pop_back(); }, {"{idx}: document index count 4 does not fit"}},
      {"sequence length negative", [](B idx, B) { put<int32_t>(idx, kLengths + 4, -1); },
       {"{idx}: sequence length 1 is -1 (negative)"}},
      {"sequence length past .bin", [](B idx, B) { put<int32_t>(idx, kLengths + 8, 6); },
       {"{idx}: sequence length 2 is 6: its 12 bytes from byte 6 run past the end of {bin} (16 bytes)"}},
      {"sequence length int32 max", [](B idx, B) { put<int32_t>(idx, kLengths, 2147483647); },
       {"{idx}: sequence length 0 is 2147483647", "run past the end of {bin}"}},
      {"sequence lengths short of .bin", [](B idx, B) { put<int32_t>(idx, kLengths + 8, 4); },
       {"{idx}: sequence lengths end at byte 14 but {bin} is 16 bytes"}},
      {"sequence pointer past .bin", [](B idx, B) { put<int64_t>(idx, kPointers + 16, 1200); },
       {"{idx}: sequence pointer 2 is 1200, past the end of {bin} (16 bytes)"}},
      {"sequence pointer 2^63 - 1", [](B idx, B) { put<int64_t>(idx, kPointers + 8, INT64_MAX); },
       {"{idx}: sequence pointer 1 is 9223372036854775807, past the end of {bin}"}},
      {"sequence pointer not the running sum", [](B idx, B) { put<int64_t>(idx, kPointers + 8, 4); },
       {"{idx}: sequence pointer 1 is 4, expected 6 (pointer 0 + length 0 x 2 bytes)"}},
      {"sequence pointer 0 not 0", [](B idx, B) { put<int64_t>(idx, kPointers, 2); },
       {"{idx}: sequence pointer 0 is 2, expected 0"}},
      {"sequence pointer negative", [](B idx, B) { put<int64_t>(idx, kPointers + 8, -6); },
       {"{idx}: sequence pointer 1 is -6 (negative)"}},
      {"document index 0 not 0", [](B idx, B) { put<int64_t>(idx, kDocuments, 1); },
       {"{idx}: document index 0 is 1, expected 0"}},
      {"document index decreasing", [](B idx, B) { put<int64_t>(idx, kDocuments + 16, 0); },
       {"{idx}: document index 2 is 0, below document index 1 (1)"}},
      {"document index past the sequences", [](B idx, B) { put<int64_t>(idx, kDocuments + 16, 4); },
       {"{idx}: document index 2 is 4, past the sequence count 3"}},
      {"document index negative", [](B idx, B) { put<int64_t>(idx, kDocuments + 8, -1); },
       {"{idx}: document index 1 is -1, below document index 0 (0)"}},
      {"last document index short of the sequences", [](B idx, B) { put<int64_t>(idx, kDocuments + 24, 2); },
       {"{idx}: document index 3 (the last) is 2, expected the sequence count 3"}},
      {".bin truncated", [](B, B bin) { bin.resize(14); },
       {"{idx}: sequence length 2 is 5: its 10 bytes from byte 6 run past the end of {bin} (14 bytes)"}},
      {".bin longer", [](B, B bin) { bin += "xy"; }, {"{idx}: sequence lengths end at byte 16 but {bin} is 18 bytes"}},
      {".bin odd size", [](B, B bin) { bin += "x"; }, {"{idx}: sequence lengths end at byte 16 but {bin} is 17 bytes"}},
      {".bin empty", [](B, B bin) { bin.clear(); },
       {"{idx}: sequence length 0 is 3: its 6 bytes from byte 0 run past the end of {bin} (0 bytes)"}},
  };
}

std::string substitute(std::string text, const std::string& name, const std::string& value) {
  for (size_t at; (at = text.find(name)) != std::string::npos;) text.replace(at, name.size(), value);
  return text;
}

class CorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    IndexedDatasetWriter writer(prefix_, TokenDtype::kUint16);
    writer.add_document({1, 2, 3});
    writer.add_document({});
    writer.add_document({4, 5, 6, 7, 8});
    writer.finish();
    idx_ = read_file(prefix_ + ".idx");
    bin_ = read_file(prefix_ + ".bin");
    ASSERT_EQ(idx_.size(), kDocuments + 8 * 4);
    ASSERT_EQ(bin_.size(), 16u);
  }

  // The FormatError's message for open(prefix_), or "" when it opens.
  std::string open_error() const {
    try {
      IndexedDataset::open(prefix_);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  }

  TempFolder folder_;
  std::string prefix_ = folder_ / "corpus";
  std::string idx_, bin_;
};

TEST_F(CorruptIndex, EveryFieldIsRefusedNamingTheFileAndTheField) {
  ASSERT_EQ(open_error(), "");
  for (const Corruption& corruption : corruptions()) {
    SCOPED_TRACE(corruption.name);
    std::string idx = idx_, bin = bin_;
    corruption.corrupt(idx, bin);
    write_file(prefix_ + ".idx", idx);
    write_file(prefix_ + ".bin", bin);
    const std::string what = open_error();
    ASSERT_NE(what, "") << "opened";
    for (const std::string& part : corruption.expected) {
      const std::string expected = substitute(substitute(part, "{idx}", prefix_ + ".idx"), "{bin}", prefix_ + ".bin");
      EXPECT_NE(what.find(expected), std::string::npos) << "message: " << what << "\nexpected: " << expected;
    }
  }
}

TEST_F(CorruptIndex, MissingAndUnreadableFilesAreNamedWithTheSystemsReason) {
  std::filesystem::remove(prefix_ + ".bin");
  EXPECT_NE(open_error().find(prefix_ + ".bin: cannot open: No such file or directory"), std::string::npos)
      << open_error();
  std::filesystem::remove(prefix_ + ".idx");
  EXPECT_NE(open_error().find(prefix_ + ".idx: cannot open: No such file or directory"), std::string::npos)
      << open_error();
  std::filesystem::create_directory(prefix_ + ".idx");
  EXPECT_NE(open_error().find(prefix_ + ".idx: not a regular file"), std::string::npos) << open_error();
}

TEST_F(CorruptIndex, APrefixGivenWithItsExtensionGetsAHint) {
  try {
    IndexedDataset::open(prefix_ + ".idx");
    FAIL() << "expected an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("(give the prefix without .idx: corpus)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace giant::data
