#include "giant/data/gpt2_bpe.h"

#include <algorithm>
#include <unordered_map>

#include "giant/base/error.h"
#include "giant/base/utf8.h"

namespace giant::data {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A ranked pair of adjacent symbols, as found (it may be gone when its turn comes).
struct Candidate {
  int32_t rank;
  int32_t left;  // position of the left symbol; the right one is its successor
  int32_t left_id, right_id;
  int32_t joined;  // the merge's token
  // std::push_heap keeps the largest first: lowest rank first, then leftmost.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

}  // namespace

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::string spec, Gpt2Vocabulary vocabulary)
    : spec_(std::move(spec)),
      token_bytes_(std::move(vocabulary.token_bytes)),
      end_of_document_(vocabulary.end_of_document) {
  std::unordered_map<std::string, int32_t> id_of_bytes;
  for (size_t id = 0; id < token_bytes_.size(); ++id) id_of_bytes[token_bytes_[id]] = static_cast<int32_t>(id);
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_bytes.find(std::string(1, static_cast<char>(b)));
    GIANT_CHECK(it != id_of_bytes.end(), "GPT-2 vocabulary without a token for byte ", b);
    byte_ids_[b] = it->second;
  }
  merges_.reserve(vocabulary.merges.size());
  for (size_t rank = 0; rank < vocabulary.merges.size(); ++rank) {
    const auto [left, right] = vocabulary.merges[rank];
    auto joined = id_of_bytes.find(token_bytes_[left] + token_bytes_[right]);
    GIANT_CHECK(joined != id_of_bytes.end(), "GPT-2 merge ", rank, " makes no token");
    merges_.emplace(pair_key(left, right), Merge{static_cast<int32_t>(rank), joined->second});
  }
}

const Gpt2BpeTokenizer::Merge* Gpt2BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// GPT-2's bpe() merges the lowest-ranked adjacent pair everywhere it occurs
// (left to right, without overlap), then looks again, until no pair is
// ranked. The same result without rescanning the word per merge: a heap of
// candidate pairs, each rank's candidates taken together in left-to-right
// order, and those whose symbols have changed since skipped. A merge makes
// no new pair of its own rank (the joined token is longer than either
// part), so each rank's batch is complete when it is taken.
void Gpt2BpeTokenizer::merge(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& id = *symbols;
  const auto n = static_cast<int32_t>(id.size());
  std::vector<int32_t> next(n), previous(n);
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    previous[i] = i - 1;
  }
  std::vector<Candidate> heap, batch;
  auto consider = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    if (const Merge* m = find_merge(id[left], id[next[left]])) {
      heap.push_back({m->rank, left, id[left], id[next[left]], m->joined});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    batch.clear();
    const int32_t rank = heap.front().rank;
    while (!heap.empty() && heap.front().rank == rank) {
      std::pop_heap(heap.begin(), heap.end());
      batch.push_back(heap.back());
      heap.pop_back();
    }
    for (const Candidate& c : batch) {
      const int32_t right = next[c.left];
      if (id[c.left] != c.left_id || right < 0 || id[right] != c.right_id) continue;  // changed since
      id[c.left] = c.joined;
      id[right] = -1;
      next[c.left] = next[right];
      if (next[right] >= 0) previous[next[right]] = c.left;
      consider(previous[c.left]);
      consider(c.left);
    }
  }
  id.erase(std::remove(id.begin(), id.end(), -1), id.end());
}

void Gpt2BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {  // one byte: nothing to merge, nothing worth caching
    out->push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (cache_.find(piece, out)) return;
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  merge(&symbols);
  cache_.insert(piece, symbols.data(), symbols.size());
  out->insert(out->end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  // As node reads a file: each ill-formed subpart becomes U+FFFD, whose UTF-8 bytes are then encoded.
  const std::string valid = valid_utf8(text);
  std::vector<std::string_view> pieces;
  pretokenizer_.split(valid, &pieces);
  std::vector<int32_t> ids;
  ids.reserve(valid.size() / 3);
  for (std::string_view piece : pieces) encode_piece(piece, &ids);
  return ids;
}

std::string Gpt2BpeTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string bytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    GIANT_CHECK(id >= 0 && id < vocab_size(), "GPT-2 tokenizer '", spec_, "': token id ", id, " at position ", i,
                " is outside the vocabulary [0, ", vocab_size(), ")");
    bytes += token_bytes_[id];
  }
  return valid_utf8(bytes);
}

}  // namespace giant::data
