// Megatron-LM's indexed dataset: PREFIX.bin holds the token ids of every
// sequence back to back in one integer type; PREFIX.idx (magic "MMIDIDX",
// version 1) holds the dtype code, each sequence's length and byte offset,
// and the sequence indices where documents start. The index is
// memory-mapped; tokens are read from .bin where samples fall (pread, no
// mapping: see open()), so a rank's memory does not grow with the corpus.
// Giant writes one sequence per document.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace giant::data {

// The format's dtype codes. Giant writes kUint16 when every id fits
// (vocabulary under 65,500, as Megatron chooses) and kInt32 otherwise; it
// reads every integer code.
enum class TokenDtype : uint8_t { kUint8 = 1, kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5, kUint16 = 8 };

size_t token_dtype_size(TokenDtype dtype);
TokenDtype token_dtype_for_vocabulary(int64_t vocab_size);

class IndexedDataset {
 public:
  // Maps PREFIX.idx and PREFIX.bin and checks every field of the index
  // against the format and the size of .bin: magic, version, dtype code
  // (float codes 6 and 7 are refused: tokens are integers), counts that fit
  // the file, lengths >= 0, pointers that are the running sum of lengths x
  // item size from 0 and end at .bin's size, document indices starting at 0,
  // non-decreasing and ending at the sequence count.
  // Any failure -> FormatError naming the file and the field
  // ("corpus.idx: sequence pointer 7 is 1200, past the end of corpus.bin (1000 bytes)");
  // a missing or unreadable file -> FormatError naming it with the system's reason.
  static std::shared_ptr<const IndexedDataset> open(const std::string& prefix);

  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_documents_; }  // the index's D - 1
  int64_t num_tokens() const { return num_tokens_; }        // every sequence's, back to back

  int64_t sequence_length(int64_t sequence) const;
  // The token offset where `sequence` starts in the concatenation of all
  // sequences (its byte pointer / item size); sequence in [0, num_sequences()].
  int64_t sequence_start(int64_t sequence) const;
  // The token offset where `document` starts; document in [0, num_documents()]
  // (num_documents() gives num_tokens()).
  int64_t document_start(int64_t document) const;

  // Tokens [first, first + count) of the concatenation, widened to int32.
  // GIANT_CHECK on a range outside [0, num_tokens()], or on a stored id that
  // does not fit int32 (int64 files).
  void read(int64_t first, int64_t count, int32_t* out) const;

 private:
  IndexedDataset() = default;
  struct Mapping;
  std::string prefix_;
  std::unique_ptr<Mapping> idx_, bin_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int64_t num_sequences_ = 0, num_documents_ = 0, num_tokens_ = 0;
  // The index's int32 lengths, int64 pointers and int64 document indices in
  // the mapping: unaligned (they start at byte 34), so read with memcpy.
  const unsigned char* lengths_ = nullptr;
  const unsigned char* pointers_ = nullptr;
  const unsigned char* document_index_ = nullptr;
};

// Writes PREFIX.bin and PREFIX.idx: appends go to PREFIX.bin.tmp, finish()
// writes PREFIX.idx.tmp, fsyncs both and renames them into place, so an
// interrupted run leaves no half-written dataset under the final names.
// Ids outside the dtype's range -> giant::Error naming the id.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();  // without finish(): removes the .tmp files
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One document of one sequence.
  void add_document(const std::vector<int32_t>& tokens);
  void finish();

  int64_t documents_written() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t tokens_written() const { return tokens_written_; }

 private:
  struct Output;
  std::string prefix_;
  TokenDtype dtype_;
  std::unique_ptr<Output> bin_;
  std::vector<int32_t> lengths_;
  int64_t tokens_written_ = 0;
  bool finished_ = false;
};

}  // namespace giant::data
