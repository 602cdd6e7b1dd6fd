#include "giant/data/gpt2_vocabulary.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/data/byte_unicode.h"

namespace giant::data {
namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw ConfigError("data.tokenizer", "GPT-2 vocabulary '" + file + "': " + what);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot read it: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(path, "cannot read it");
  return text.str();
}

// A token or a line as it can be shown: quoted, printable, cut when long.
std::string shown(std::string_view text) {
  const bool cut = text.size() > 60;
  return "'" + printable_utf8(text.substr(0, 60)) + (cut ? "...'" : "'");
}

// vocab.json: token text -> id, ids 0..N-1 once each. Fills token_bytes and end_of_document.
void read_vocab(const std::string& path, Gpt2Vocabulary* vocabulary,
                std::unordered_map<std::string, int32_t>* id_of_text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_whole(path));
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past any type's range
    fail(path, std::string("not valid JSON: ") + e.what());
  }
  if (!json.is_object() || json.empty()) fail(path, "expected a JSON object of token -> id, found " + std::string(json.type_name()));
  const size_t count = json.size();
  if (count > static_cast<size_t>(INT32_MAX)) fail(path, "too many tokens");
  std::vector<std::string> token_bytes(count);
  std::vector<bool> seen(count, false);
  std::string bytes;
  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& text = it.key();
    if (!it.value().is_number_integer()) fail(path, "token " + shown(text) + " has id " + it.value().dump() + ", not an integer");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(count)) {
      fail(path, "token " + shown(text) + " has id " + std::to_string(id) + ", outside [0, " + std::to_string(count) +
                     ") (ids must be 0..N-1, once each, for N tokens)");
    }
    if (seen[id]) fail(path, "id " + std::to_string(id) + " is given to two tokens (the second: " + shown(text) + ")");
    if (!token_text_to_bytes(text, &bytes)) {
      fail(path, "token " + shown(text) + " (id " + std::to_string(id) +
                     ") is not byte-level text: a character is none of GPT-2's 256 byte characters");
    }
    seen[id] = true;
    token_bytes[id] = bytes;
    (*id_of_text)[text] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string text = bytes_to_token_text(std::string(1, static_cast<char>(b)));
    if (id_of_text->count(text) == 0) {
      fail(path, "no token for byte " + std::to_string(b) + " (" + shown(text) + "): every byte needs one");
    }
  }
  auto end = id_of_text->find(kEndOfText);
  vocabulary->end_of_document = end == id_of_text->end() ? -1 : end->second;
  vocabulary->token_bytes = std::move(token_bytes);
}

// merges.txt: an optional "#version" line, then "a b" per line, rank = order.
void read_merges(const std::string& path, const std::unordered_map<std::string, int32_t>& id_of_text,
                 Gpt2Vocabulary* vocabulary) {
  const std::string text = read_whole(path);
  std::unordered_map<std::string, size_t> line_of_merge;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::string where = "line " + std::to_string(line_number) + " ";
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      fail(path, where + shown(line) + " is not two tokens separated by one space");
    }
    const std::string left(line.substr(0, space)), right(line.substr(space + 1));
    const auto l = id_of_text.find(left), r = id_of_text.find(right), joined = id_of_text.find(left + right);
    if (l == id_of_text.end()) fail(path, where + "merges " + shown(left) + ", which the vocabulary lacks");
    if (r == id_of_text.end()) fail(path, where + "merges " + shown(right) + ", which the vocabulary lacks");
    if (joined == id_of_text.end()) fail(path, where + "makes " + shown(left + right) + ", which the vocabulary lacks");
    auto [previous, fresh] = line_of_merge.emplace(std::string(line), line_number);
    if (!fresh) fail(path, where + "repeats the merge of line " + std::to_string(previous->second));
    vocabulary->merges.emplace_back(l->second, r->second);
  }
}

}  // namespace

Gpt2Files gpt2_files(const std::string& dir) {
  const std::string vocab = dir + "/" + kGpt2VocabFile;
  if (exists(vocab) || !exists(dir + "/encoder.json")) return {vocab, dir + "/" + kGpt2MergesFile};
  return {dir + "/encoder.json", dir + "/vocab.bpe"};
}

Gpt2Vocabulary load_gpt2_vocabulary(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw ConfigError("data.tokenizer", "GPT-2 vocabulary folder '" + dir + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) throw ConfigError("data.tokenizer", "GPT-2 vocabulary folder '" + dir + "' is not a folder");
  const Gpt2Files files = gpt2_files(dir);
  if (!exists(files.vocab)) {
    throw ConfigError("data.tokenizer", "GPT-2 vocabulary folder '" + dir +
                                            "' has neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
  }
  Gpt2Vocabulary vocabulary;
  std::unordered_map<std::string, int32_t> id_of_text;
  read_vocab(files.vocab, &vocabulary, &id_of_text);
  read_merges(files.merges, id_of_text, &vocabulary);
  return vocabulary;
}

}  // namespace giant::data
