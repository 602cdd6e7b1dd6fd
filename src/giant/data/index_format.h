// The layout of Megatron's MMIDIDX index (see indexed_dataset.h), parsed from
// bytes in memory and written to bytes: one place for the format's offsets
// and checks, shared by the memory-mapped reader, the writer and the fuzzer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "giant/data/indexed_dataset.h"

namespace giant::data {

// magic (9 bytes), u64 version, u8 dtype code, u64 sequence count, u64
// document index count; then int32 lengths, int64 pointers, int64 document
// indices, none of them aligned (34 is not a multiple of 4).
constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kIndexVersion = 1;
constexpr uint64_t kIndexHeaderBytes = 34;

// A parsed index: views into the bytes it was parsed from (which must
// outlive it). The arrays may be unaligned: read them with load_int32 and
// load_int64.
struct IndexLayout {
  TokenDtype dtype = TokenDtype::kUint16;
  int64_t num_sequences = 0;
  int64_t num_document_indices = 0;  // the format's D: documents + 1
  int64_t num_tokens = 0;
  const unsigned char* lengths = nullptr;
  const unsigned char* pointers = nullptr;
  const unsigned char* document_index = nullptr;
};

// Checks every field of `bytes` (an index of `size` bytes) against the
// format and `bin_size` (the size of the token file), as
// IndexedDataset::open documents; FormatError naming `idx_name` (and
// `bin_name`) and the field otherwise. Reads each array once: O(S + D).
IndexLayout parse_index(const void* bytes, uint64_t size, uint64_t bin_size, const std::string& idx_name,
                        const std::string& bin_name);

// The index of one-sequence documents of these lengths (what
// IndexedDatasetWriter writes).
std::string encode_index(TokenDtype dtype, const std::vector<int32_t>& lengths);

int32_t load_int32(const unsigned char* array, int64_t i);
int64_t load_int64(const unsigned char* array, int64_t i);

// "uint16", "float64", ...; "code 9" for a code outside the format.
std::string token_dtype_name(uint8_t code);

}  // namespace giant::data
