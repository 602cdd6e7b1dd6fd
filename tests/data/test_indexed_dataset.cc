// Megatron's .bin/.idx: files written by an independent python3 + numpy
// writer are read back token for token, Giant's writer's files are read back
// by the independent reader, and the writer's failure paths leave no files.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/indexed_dataset.h"
#include "support/indexed_files.h"

namespace giant::data {
namespace {

using test::python_read;
using test::python_write;
using test::TempFolder;
namespace fs = std::filesystem;

using Documents = std::vector<std::vector<std::vector<int64_t>>>;  // documents of sequences of ids

std::vector<int32_t> read_all(const IndexedDataset& dataset) {
  std::vector<int32_t> tokens(static_cast<size_t>(dataset.num_tokens()));
  dataset.read(0, dataset.num_tokens(), tokens.data());
  return tokens;
}

// Every sequence and document of `documents` as `dataset` reads it: lengths,
// starts, and the tokens of each sequence read on their own.
void expect_reads(const IndexedDataset& dataset, const Documents& documents) {
  ASSERT_EQ(dataset.num_documents(), static_cast<int64_t>(documents.size()));
  int64_t sequence = 0, token = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    EXPECT_EQ(dataset.document_start(static_cast<int64_t>(d)), token) << "document " << d;
    for (const std::vector<int64_t>& ids : documents[d]) {
      ASSERT_LT(sequence, dataset.num_sequences());
      EXPECT_EQ(dataset.sequence_length(sequence), static_cast<int64_t>(ids.size()));
      EXPECT_EQ(dataset.sequence_start(sequence), token);
      std::vector<int32_t> got(ids.size());
      dataset.read(token, static_cast<int64_t>(ids.size()), got.data());
      EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), ids) << "sequence " << sequence;
      ++sequence;
      token += static_cast<int64_t>(ids.size());
    }
  }
  EXPECT_EQ(dataset.num_sequences(), sequence);
  EXPECT_EQ(dataset.num_tokens(), token);
  EXPECT_EQ(dataset.sequence_start(sequence), token);
  EXPECT_EQ(dataset.document_start(dataset.num_documents()), token);
}

struct DtypeCase {
  const char* numpy_name;
  TokenDtype dtype;
  int64_t low, high;  // ids at the ends of its range
};

TEST(IndexedDataset, ReadsTheIndependentWritersFilesTokenForToken) {
  const std::vector<DtypeCase> cases = {
      {"uint8", TokenDtype::kUint8, 0, 255},          {"int8", TokenDtype::kInt8, -128, 127},
      {"int16", TokenDtype::kInt16, -32768, 32767},   {"uint16", TokenDtype::kUint16, 0, 65535},
      {"int32", TokenDtype::kInt32, -2147483647 - 1, 2147483647},
      {"int64", TokenDtype::kInt64, -2147483647 - 1, 2147483647}};
  TempFolder folder;
  for (const DtypeCase& c : cases) {
    SCOPED_TRACE(c.numpy_name);
    // Megatron's sentence split: documents of several sequences, an empty
    // sequence, and an empty document (two equal document indices).
    const Documents documents = {{{c.low, 1, c.high}, {}, {7}}, {}, {{c.high, c.high, 0, c.low}}, {{3, 4}, {5}}};
    const std::string prefix = folder / c.numpy_name;
    python_write(prefix, c.numpy_name, documents);
    const auto dataset = IndexedDataset::open(prefix);
    EXPECT_EQ(dataset->prefix(), prefix);
    EXPECT_EQ(dataset->dtype(), c.dtype);
    expect_reads(*dataset, documents);
    // A read across sequence and document boundaries.
    std::vector<int32_t> middle(5);
    dataset->read(2, 5, middle.data());
    EXPECT_EQ(middle, (std::vector<int32_t>{static_cast<int32_t>(c.high), 7, static_cast<int32_t>(c.high),
                                           static_cast<int32_t>(c.high), 0}));
  }
}

TEST(IndexedDataset, ReadsAnEmptyDataset) {
  TempFolder folder;
  python_write(folder / "empty", "uint16", {});
  const auto dataset = IndexedDataset::open(folder / "empty");
  EXPECT_EQ(dataset->num_sequences(), 0);
  EXPECT_EQ(dataset->num_documents(), 0);
  EXPECT_EQ(dataset->num_tokens(), 0);
  EXPECT_EQ(dataset->document_start(0), 0);
  dataset->read(0, 0, nullptr);
}

TEST(IndexedDataset, ReadOutsideTheTokensIsRefused) {
  TempFolder folder;
  python_write(folder / "c", "uint16", {{{1, 2, 3}}});
  const auto dataset = IndexedDataset::open(folder / "c");
  std::vector<int32_t> out(8);
  EXPECT_THROW(dataset->read(-1, 1, out.data()), Error);
  EXPECT_THROW(dataset->read(2, 2, out.data()), Error);
  EXPECT_THROW(dataset->read(1, -1, out.data()), Error);
  EXPECT_THROW(dataset->read(1, std::numeric_limits<int64_t>::max(), out.data()), Error);  // first + count wraps
  EXPECT_THROW(dataset->sequence_length(1), Error);
  EXPECT_THROW(dataset->sequence_start(2), Error);
  EXPECT_THROW(dataset->document_start(2), Error);
  dataset->read(3, 0, out.data());
}

TEST(IndexedDataset, AnInt64IdBeyondInt32IsRefusedNamingIt) {
  TempFolder folder;
  python_write(folder / "wide", "int64", {{{1, int64_t{1} << 40, 2}}});
  const auto dataset = IndexedDataset::open(folder / "wide");
  std::vector<int32_t> out(3);
  dataset->read(0, 1, out.data());
  try {
    dataset->read(0, 3, out.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 1 is 1099511627776"), std::string::npos) << e.what();
  }
}

TEST(IndexedDatasetWriter, ItsFilesAreReadBackByTheIndependentReader) {
  TempFolder folder;
  for (const TokenDtype dtype : {TokenDtype::kUint16, TokenDtype::kInt32, TokenDtype::kUint8, TokenDtype::kInt64}) {
    const std::string prefix = folder / ("giant" + std::to_string(static_cast<int>(dtype)));
    const int32_t big = dtype == TokenDtype::kUint8 ? 255 : dtype == TokenDtype::kUint16 ? 65535 : 2147483647;
    const std::vector<std::vector<int32_t>> documents = {{0, 1, big}, {}, {5, 5, 5, 5}, {big}};
    IndexedDatasetWriter writer(prefix, dtype);
    for (const auto& document : documents) writer.add_document(document);
    EXPECT_EQ(writer.documents_written(), 4);
    EXPECT_EQ(writer.tokens_written(), 8);
    writer.finish();
    EXPECT_FALSE(fs::exists(prefix + ".bin.tmp"));
    EXPECT_FALSE(fs::exists(prefix + ".idx.tmp"));

    const nlohmann::json read = python_read(prefix);
    ASSERT_FALSE(read.is_null());
    EXPECT_EQ(read["document_index"], (std::vector<int64_t>{0, 1, 2, 3, 4}));
    ASSERT_EQ(read["sequences"].size(), documents.size());
    for (size_t d = 0; d < documents.size(); ++d) EXPECT_EQ(read["sequences"][d], documents[d]) << d;

    Documents expected;
    for (const auto& document : documents) expected.push_back({std::vector<int64_t>(document.begin(), document.end())});
    const auto dataset = IndexedDataset::open(prefix);
    EXPECT_EQ(dataset->dtype(), dtype);
    expect_reads(*dataset, expected);
  }
}

TEST(IndexedDatasetWriter, WritesAnEmptyDataset) {
  TempFolder folder;
  IndexedDatasetWriter writer(folder / "empty", TokenDtype::kUint16);
  writer.finish();
  const auto dataset = IndexedDataset::open(folder / "empty");
  EXPECT_EQ(dataset->num_documents(), 0);
  EXPECT_EQ(dataset->num_tokens(), 0);
  const nlohmann::json read = python_read(folder / "empty");
  EXPECT_EQ(read["document_index"], (std::vector<int64_t>{0}));
  EXPECT_TRUE(read["sequences"].empty());
}

TEST(IndexedDatasetWriter, LongDocumentsCrossTheWriteBuffer) {
  TempFolder folder;
  std::vector<int32_t> long_document(3 << 20);  // 6 MiB of uint16, more than the 4 MiB buffer
  for (size_t i = 0; i < long_document.size(); ++i) long_document[i] = static_cast<int32_t>(i * 7919 % 65536);
  IndexedDatasetWriter writer(folder / "long", TokenDtype::kUint16);
  writer.add_document({1, 2, 3});
  writer.add_document(long_document);
  writer.add_document({4});
  writer.finish();
  const auto dataset = IndexedDataset::open(folder / "long");
  ASSERT_EQ(dataset->num_tokens(), static_cast<int64_t>(long_document.size()) + 4);
  std::vector<int32_t> all = read_all(*dataset);
  EXPECT_EQ(std::vector<int32_t>(all.begin() + 3, all.end() - 1), long_document);
  EXPECT_EQ(all.back(), 4);
}

TEST(IndexedDatasetWriter, AnIdOutsideTheDtypeIsRefusedNamingIt) {
  TempFolder folder;
  IndexedDatasetWriter writer(folder / "narrow", TokenDtype::kUint16);
  writer.add_document({1, 2});
  try {
    writer.add_document({3, 65536});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("token id 65536 (token 1 of document 1) does not fit uint16"), std::string::npos) << what;
  }
  IndexedDatasetWriter signed_writer(folder / "signed", TokenDtype::kUint8);
  EXPECT_THROW(signed_writer.add_document({-1}), Error);
}

TEST(IndexedDatasetWriter, WithoutFinishItLeavesNoFiles) {
  TempFolder folder;
  const std::string prefix = folder / "unfinished";
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    writer.add_document({1, 2, 3});
    EXPECT_TRUE(fs::exists(prefix + ".bin.tmp"));
  }
  EXPECT_TRUE(fs::is_empty(folder.path()));
}

TEST(IndexedDatasetWriter, ReplacesAnOldDatasetOnlyWhenFinished) {
  TempFolder folder;
  const std::string prefix = folder / "c";
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    writer.add_document({1, 2, 3});
    writer.finish();
    EXPECT_THROW(writer.finish(), Error);
    EXPECT_THROW(writer.add_document({4}), Error);
  }
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    writer.add_document({9});
  }
  EXPECT_EQ(IndexedDataset::open(prefix)->num_tokens(), 3);
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    writer.add_document({9});
    writer.finish();
  }
  EXPECT_EQ(IndexedDataset::open(prefix)->num_tokens(), 1);
}

TEST(IndexedDatasetWriter, AFolderThatDoesNotExistIsAnErrorNamingTheFile) {
  TempFolder folder;
  const std::string prefix = folder / "missing/c";
  try {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(prefix + ".bin.tmp: No such file or directory"), std::string::npos)
        << e.what();
  }
}

TEST(TokenDtype, SizesAndTheVocabularysChoice) {
  EXPECT_EQ(token_dtype_size(TokenDtype::kUint8), 1u);
  EXPECT_EQ(token_dtype_size(TokenDtype::kInt8), 1u);
  EXPECT_EQ(token_dtype_size(TokenDtype::kInt16), 2u);
  EXPECT_EQ(token_dtype_size(TokenDtype::kUint16), 2u);
  EXPECT_EQ(token_dtype_size(TokenDtype::kInt32), 4u);
  EXPECT_EQ(token_dtype_size(TokenDtype::kInt64), 8u);
  EXPECT_EQ(token_dtype_for_vocabulary(256), TokenDtype::kUint16);
  EXPECT_EQ(token_dtype_for_vocabulary(50257), TokenDtype::kUint16);
  EXPECT_EQ(token_dtype_for_vocabulary(65499), TokenDtype::kUint16);  // Megatron's threshold
  EXPECT_EQ(token_dtype_for_vocabulary(65500), TokenDtype::kInt32);
  EXPECT_EQ(token_dtype_for_vocabulary(250000), TokenDtype::kInt32);
  EXPECT_THROW(token_dtype_for_vocabulary(0), Error);
}

}  // namespace
}  // namespace giant::data
