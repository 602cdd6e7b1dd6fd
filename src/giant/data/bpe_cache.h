// The ids BPE gave each pre-token seen lately, shared by every thread that
// encodes with one tokenizer. Sharded by the word's hash, each shard with its
// own lock, so threads encoding at once rarely wait for each other; bounded:
// a full shard is emptied and fills again with the words in use. A word is
// found by its 64-bit hash, computed once, and then compared: two words of
// one hash take turns in the cache, never each other's ids.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace giant::data {

class BpeCache {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kWordsPerShard = 8192;  // 131072 words in all, a few MB

  // Appends the cached ids of `word` to `out` and returns true; false when it is not cached.
  bool find(std::string_view word, std::vector<int32_t>* out) const;
  // Caches the ids of `word` (ids[0, count)).
  void insert(std::string_view word, const int32_t* ids, size_t count);
  size_t size() const;  // words cached now (tests)

 private:
  struct Entry {
    std::string word;
    std::vector<int32_t> ids;
  };
  // The hash is already mixed: the map buckets by it as it is.
  struct Identity {
    size_t operator()(uint64_t hash) const { return static_cast<size_t>(hash); }
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<uint64_t, Entry, Identity> words;
  };
  Shard& shard_of(uint64_t hash) const { return shards_[(hash >> 40) % kShards]; }

  mutable std::array<Shard, kShards> shards_;  // find() locks, and is const
};

}  // namespace giant::data
