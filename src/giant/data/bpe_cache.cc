#include "giant/data/bpe_cache.h"

#include <functional>

namespace giant::data {

bool BpeCache::find(std::string_view word, std::vector<int32_t>* out) const {
  const uint64_t hash = std::hash<std::string_view>{}(word);
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.words.find(hash);
  if (it == shard.words.end() || it->second.word != word) return false;
  out->insert(out->end(), it->second.ids.begin(), it->second.ids.end());
  return true;
}

void BpeCache::insert(std::string_view word, const int32_t* ids, size_t count) {
  const uint64_t hash = std::hash<std::string_view>{}(word);
  Entry entry{std::string(word), std::vector<int32_t>(ids, ids + count)};
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() >= kWordsPerShard) shard.words.clear();
  shard.words[hash] = std::move(entry);
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
