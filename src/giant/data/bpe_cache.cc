#include "giant/data/bpe_cache.h"

#include <functional>

namespace giant::data {

BpeCache::Shard& BpeCache::shard_of(std::string_view word) const {
  // The high bits: the map buckets by the low ones of the same hash.
  return shards_[(std::hash<std::string_view>{}(word) >> 40) % kShards];
}

bool BpeCache::find(std::string_view word, std::vector<int32_t>* out) const {
  Shard& shard = shard_of(word);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.words.find(word);
  if (it == shard.words.end()) return false;
  out->insert(out->end(), it->second->ids.begin(), it->second->ids.end());
  return true;
}

void BpeCache::insert(std::string_view word, const int32_t* ids, size_t count) {
  auto entry = std::make_unique<Entry>();
  entry->word.assign(word);
  entry->ids.assign(ids, ids + count);
  Shard& shard = shard_of(word);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() >= kWordsPerShard) shard.words.clear();
  const std::string_view key = entry->word;
  shard.words.emplace(key, std::move(entry));
}

size_t BpeCache::size() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mutex);
    total += shard.words.size();
  }
  return total;
}

}  // namespace giant::data
