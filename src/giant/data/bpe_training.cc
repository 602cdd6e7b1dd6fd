#include "giant/data/bpe_training.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/base/utf8.h"
#include "giant/data/byte_unicode.h"
#include "giant/data/pretokenizer.h"

namespace giant::data {
namespace {

using PieceCounts = std::unordered_map<std::string, int64_t>;

// Counts the pre-tokens of one file, read in blocks so that memory does not
// grow with the file. A block's last piece may continue in the next block,
// so it is carried over; every other piece ends before the block does, and
// GPT-2's pattern decides a piece by what it matches and the one character
// after it, so those are the pieces of the whole text. Likewise a character
// cut at the block's end waits for its other bytes.
void count_file(const std::string& path, size_t read_block, const Gpt2Pretokenizer& pretokenizer,
                PieceCounts* counts, BpeTrainingStats* stats) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("FILES", "cannot read '" + path + "': " + std::strerror(errno));
  std::string raw, carry, text;
  std::vector<std::string_view> pieces;
  std::vector<char> block(std::max<size_t>(read_block, 1));
  bool done = false;
  while (!done) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (in.bad()) throw ConfigError("FILES", "cannot read '" + path + "': " + std::strerror(errno));
    done = got < block.size();
    stats->bytes += static_cast<int64_t>(got);
    raw.append(block.data(), got);
    const size_t whole = done ? raw.size() : complete_utf8_prefix(raw);
    text = carry + valid_utf8(std::string_view(raw).substr(0, whole));
    raw.erase(0, whole);
    pretokenizer.split(text, &pieces);
    const size_t counted = done || pieces.empty() ? pieces.size() : pieces.size() - 1;
    for (size_t i = 0; i < counted; ++i) ++(*counts)[std::string(pieces[i])];
    stats->pieces += static_cast<int64_t>(counted);
    carry = counted < pieces.size() ? std::string(pieces.back()) : std::string();
  }
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

// A pair's count when it was queued; a later, lower count makes it stale.
struct Queued {
  int64_t count;
  uint64_t pair;
  // priority_queue pops the largest: most frequent first, then smallest (left, right).
  bool operator<(const Queued& other) const { return count != other.count ? count < other.count : pair > other.pair; }
};

class MergeLearner {
 public:
  explicit MergeLearner(const PieceCounts& counts) {
    words_.reserve(counts.size());
    for (const auto& [piece, count] : counts) {
      Word w{std::vector<int32_t>(piece.begin(), piece.end()), count};
      for (int32_t& s : w.symbols) s = static_cast<unsigned char>(s);
      words_.push_back(std::move(w));
    }
    // The map's order is not the same on every library: sort so that nothing depends on it.
    std::sort(words_.begin(), words_.end(), [](const Word& a, const Word& b) { return a.symbols < b.symbols; });
    for (size_t w = 0; w < words_.size(); ++w) add_pairs(static_cast<int32_t>(w), +1, kAnySymbol);
    for (const auto& [pair, count] : pair_counts_) queue_.push({count, pair});
  }

  // The most frequent pair, or false when no pair occurs.
  bool next(uint64_t* pair) {
    while (!queue_.empty()) {
      const Queued top = queue_.top();
      queue_.pop();
      const auto it = pair_counts_.find(top.pair);
      const int64_t now = it == pair_counts_.end() ? 0 : it->second;
      if (now == top.count && now > 0) {
        *pair = top.pair;
        return true;
      }
      if (now > 0) queue_.push({now, top.pair});  // counts only fall: re-queue at the true one
    }
    return false;
  }

  // Joins every occurrence of `pair` into `joined`, left to right without overlap, as the encoder does.
  void merge(uint64_t pair, int32_t joined) {
    const int32_t left = left_of(pair), right = right_of(pair);
    std::vector<int32_t> where = std::move(words_with_[pair]);
    words_with_.erase(pair);
    std::sort(where.begin(), where.end());
    where.erase(std::unique(where.begin(), where.end()), where.end());
    changed_.clear();
    for (int32_t w : where) {
      std::vector<int32_t>& s = words_[w].symbols;
      if (!contains_pair(s, left, right)) continue;  // listed, but merged away since
      add_pairs(w, -1, kAnySymbol);
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++out) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          s[out] = joined;
          i += 2;
        } else {
          s[out] = s[i++];
        }
      }
      s.resize(out);
      add_pairs(w, +1, joined);
    }
    pair_counts_.erase(pair);
    // The new pairs (those with the joined token) join the queue; the others' entries are stale-high, and next() copes.
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    for (uint64_t p : changed_) {
      auto it = pair_counts_.find(p);
      if (it != pair_counts_.end()) queue_.push({it->second, p});
    }
  }

 private:
  static bool contains_pair(const std::vector<int32_t>& s, int32_t left, int32_t right) {
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == left && s[i + 1] == right) return true;
    }
    return false;
  }

  static constexpr int32_t kAnySymbol = -1;

  // Adds (sign +1) or removes (-1) the pairs of word w, weighted by its
  // count. Added pairs with `fresh` (the token just made; kAnySymbol: all)
  // are new to w: they list w and are noted in changed_.
  void add_pairs(int32_t w, int sign, int32_t fresh) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      const uint64_t p = pair_key(word.symbols[i], word.symbols[i + 1]);
      int64_t& count = pair_counts_[p];
      count += sign * word.count;
      if (sign < 0) {
        if (count == 0) pair_counts_.erase(p);
      } else if (fresh == kAnySymbol || word.symbols[i] == fresh || word.symbols[i + 1] == fresh) {
        words_with_[p].push_back(w);
        changed_.push_back(p);
      }
    }
  }

  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> words_with_;  // may list a word twice, or one merged away
  std::priority_queue<Queued> queue_;
  std::vector<uint64_t> changed_;  // pairs added to during the merge in progress
};

}  // namespace

Gpt2Vocabulary train_bpe(const std::vector<std::string>& files, const BpeTrainingOptions& options,
                         BpeTrainingStats* stats_out) {
  if (options.vocab_size < 257) {
    throw ConfigError("--vocab-size", "must be at least 257 (256 bytes and <|endoftext|>), got " +
                                          std::to_string(options.vocab_size));
  }
  if (options.vocab_size > INT32_MAX) throw ConfigError("--vocab-size", "is too large");
  if (files.empty()) throw ConfigError("FILES", "no text files to learn from");
  BpeTrainingStats stats;
  Stopwatch counting;
  const Gpt2Pretokenizer pretokenizer;
  PieceCounts counts;
  for (const std::string& file : files) {  // every file readable before any work
    std::ifstream in(file, std::ios::binary);
    struct stat st {};
    if (!in || ::stat(file.c_str(), &st) != 0) {
      throw ConfigError("FILES", "cannot read '" + file + "': " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) throw ConfigError("FILES", "'" + file + "' is a folder, not a text file");
  }
  for (const std::string& file : files) count_file(file, options.read_block, pretokenizer, &counts, &stats);
  stats.distinct_pieces = static_cast<int64_t>(counts.size());
  stats.count_seconds = counting.seconds();

  Gpt2Vocabulary vocabulary;
  for (int b = 0; b < 256; ++b) vocabulary.token_bytes.emplace_back(1, static_cast<char>(b));
  Stopwatch merging;
  MergeLearner learner(counts);
  counts.clear();
  BpeTrainingProgress progress;
  progress.merges_total = options.vocab_size - 257;
  uint64_t pair = 0;
  while (progress.merges_done < progress.merges_total && learner.next(&pair)) {
    const auto joined = static_cast<int32_t>(vocabulary.token_bytes.size());
    vocabulary.token_bytes.push_back(vocabulary.token_bytes[left_of(pair)] + vocabulary.token_bytes[right_of(pair)]);
    vocabulary.merges.emplace_back(left_of(pair), right_of(pair));
    learner.merge(pair, joined);
    ++progress.merges_done;
    if (options.on_progress && progress.merges_done % 64 == 0) {
      progress.seconds = merging.seconds();
      options.on_progress(progress);
    }
  }
  progress.seconds = merging.seconds();
  if (options.on_progress) options.on_progress(progress);
  vocabulary.end_of_document = static_cast<int32_t>(vocabulary.token_bytes.size());
  vocabulary.token_bytes.emplace_back("<|endoftext|>");
  stats.merges = progress.merges_done;
  stats.merge_seconds = progress.seconds;
  if (stats_out) *stats_out = stats;
  return vocabulary;
}

void check_vocabulary_output(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw ConfigError("--output", "'" + dir + "' is a file, not a folder");
  }
  for (const char* name : {"/vocab.json", "/merges.txt"}) {
    if (::stat((dir + name).c_str(), &st) == 0) {
      throw ConfigError("--output", "'" + dir + "' already has " + (name + 1) + "; choose another folder or remove it");
    }
  }
}

void write_gpt2_vocabulary(const Gpt2Vocabulary& vocabulary, const std::string& dir) {
  check_vocabulary_output(dir);
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {  // mkdir -p
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
        throw ConfigError("--output", "cannot create '" + path + "': " + std::strerror(errno));
      }
    }
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::vector<std::string> text(vocabulary.token_bytes.size());
  for (size_t id = 0; id < text.size(); ++id) {
    // <|endoftext|> is its own text: every character of it is a byte character standing for itself.
    text[id] = bytes_to_token_text(vocabulary.token_bytes[id]);
    vocab[text[id]] = id;
  }
  auto write = [](const std::string& file, const std::string& contents) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    GIANT_CHECK(out.good(), "cannot write '", file, "': ", std::strerror(errno));
  };
  write(dir + "/vocab.json", vocab.dump() + "\n");
  std::string merges = "#version: 0.2\n";
  for (const auto& [left, right] : vocabulary.merges) merges += text[left] + " " + text[right] + "\n";
  write(dir + "/merges.txt", merges);
}

}  // namespace giant::data
