// giant data prepare's library part (data/prepare.h, data/document_reader.h):
// text split at empty lines, JSON lines, --append-eod, the uint16/int32
// choice, output identical for 1, 2 and 3 workers, the independent reader
// reading what it writes, and failures that leave no output files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/document_reader.h"
#include "giant/data/indexed_dataset.h"
#include "giant/data/prepare.h"
#include "giant/data/tokenizer.h"
#include "support/indexed_files.h"

namespace giant::data {
namespace {

using test::python_read;
using test::read_file;
using test::TempFolder;
using test::write_file;
namespace fs = std::filesystem;

const std::string kCorpus = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

// Ids above uint16 (byte + 65536) with an end-of-document id, and a delay on
// some documents so that workers finish batches out of order.
class WideTokenizer final : public Tokenizer {
 public:
  explicit WideTokenizer(bool jitter = false) : jitter_(jitter) {}
  std::string name() const override { return "wide"; }
  int64_t vocab_size() const override { return 65536 + 257; }
  int32_t end_of_document() const override { return 65536 + 256; }
  std::vector<int32_t> encode(std::string_view text) const override {
    if (jitter_ && !text.empty() && static_cast<unsigned char>(text[0]) % 7 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    std::vector<int32_t> ids;
    for (const char c : text) ids.push_back(65536 + static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(const std::vector<int32_t>&) const override { return ""; }

 private:
  bool jitter_;
};

std::vector<std::vector<int32_t>> documents_of(const std::string& prefix) {
  const auto dataset = IndexedDataset::open(prefix);
  std::vector<std::vector<int32_t>> documents;
  for (int64_t d = 0; d < dataset->num_documents(); ++d) {
    const int64_t first = dataset->document_start(d), end = dataset->document_start(d + 1);
    std::vector<int32_t> tokens(static_cast<size_t>(end - first));
    dataset->read(first, end - first, tokens.data());
    documents.push_back(tokens);
  }
  return documents;
}

std::vector<int32_t> bytes_of(const std::string& text) {
  return ByteTokenizer().encode(text);
}

PrepareOptions options_for(std::vector<std::string> inputs, std::string output) {
  PrepareOptions options;
  options.inputs = std::move(inputs);
  options.output = std::move(output);
  return options;
}

// The message of the exception prepare throws (of type E), or "" when it succeeds.
template <class E>
std::string prepare_error(const PrepareOptions& options, const Tokenizer& tokenizer) {
  try {
    prepare(options, tokenizer);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// The folder holds exactly these names (the inputs): no .bin, .idx or .tmp.
void expect_only(const TempFolder& folder, std::vector<std::string> names) {
  std::vector<std::string> present;
  for (const auto& entry : fs::directory_iterator(folder.path())) present.push_back(entry.path().filename());
  std::sort(present.begin(), present.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(present, names);
}

TEST(Prepare, TextIsSplitIntoDocumentsAtEmptyLines) {
  TempFolder folder;
  write_file(folder / "a.txt", "\n\nfirst line\nsecond\n\n\n\nthird\r\n\r\nfourth\n \nstill fourth");
  const PrepareProgress done = prepare(options_for({folder / "a.txt"}, folder / "out"), ByteTokenizer());
  EXPECT_EQ(documents_of(folder / "out"),
            (std::vector<std::vector<int32_t>>{bytes_of("first line\nsecond\n"), bytes_of("third\r\n"),
                                               bytes_of("fourth\n \nstill fourth")}));
  EXPECT_EQ(done.documents, 3);
  EXPECT_EQ(done.input_bytes_done, read_file(folder / "a.txt").size());
  EXPECT_EQ(done.input_bytes_total, done.input_bytes_done);
  EXPECT_EQ(IndexedDataset::open(folder / "out")->dtype(), TokenDtype::kUint16);
}

TEST(Prepare, TheBundledCorpusIsOneDocumentAChapter) {
  TempFolder folder;
  const PrepareProgress done = prepare(options_for({kCorpus}, folder / "kjv"), ByteTokenizer());
  const std::string text = read_file(kCorpus);
  EXPECT_EQ(done.documents, 1189);  // 1188 empty lines between 1189 chapters
  EXPECT_EQ(done.tokens, static_cast<int64_t>(text.size()) - 1188);
  const auto documents = documents_of(folder / "kjv");
  ASSERT_EQ(documents.size(), 1189u);
  const std::string first(documents[0].begin(), documents[0].end());
  EXPECT_EQ(first.rfind("Genesis 1\nIn the beginning God created the heaven and the earth.\n", 0), 0u);
  EXPECT_EQ(first.back(), '\n');
  EXPECT_EQ(text.substr(0, first.size() + 1), first + "\n");
}

TEST(Prepare, JsonLinesTakeTheTextUnderTheKey) {
  TempFolder folder;
  write_file(folder / "a.jsonl",
              "{\"text\": \"one\", \"id\": 1}\n\n  \n{\"id\": 2, \"text\": \"t\\u00e9\\n\"}\n{\"text\": \"\"}\n{\"text\":\"last\"}");
  write_file(folder / "b.json", "{\"body\": \"other key\", \"text\": 5}\n");
  prepare(options_for({folder / "a.jsonl"}, folder / "a"), ByteTokenizer());
  EXPECT_EQ(documents_of(folder / "a"), (std::vector<std::vector<int32_t>>{bytes_of("one"), bytes_of("t\xc3\xa9\n"),
                                                                           {}, bytes_of("last")}));
  PrepareOptions other = options_for({folder / "b.json"}, folder / "b");
  other.json_key = "body";
  prepare(other, ByteTokenizer());
  EXPECT_EQ(documents_of(folder / "b"), (std::vector<std::vector<int32_t>>{bytes_of("other key")}));
}

TEST(Prepare, BadJsonLinesAreNamedByFileAndLineAndLeaveNoOutput) {
  TempFolder folder;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2]", "bad.jsonl:2: an array, not an object with a 'text' string"},
      {"{\"body\": \"x\", \"id\": 3}", "bad.jsonl:2: no 'text' key (the line has: body, id; --json-key names another)"},
      {"{\"text\": null}", "bad.jsonl:2: 'text' is null, not a string"},
      {"{\"text\": [\"a\"]}", "bad.jsonl:2: 'text' is an array, not a string"},
      {"{\"text\": \"unterminated}", "bad.jsonl:2: not valid JSON"},
      // A number past every type's range (as the vocabulary fuzzer found in vocab.json).
      {"{\"text\": \"x\", \"score\": 1e999}", "bad.jsonl:2: not valid JSON"},
      {"\"just a string\"", "bad.jsonl:2: a string, not an object"},
  };
  write_file(folder / "good.txt", "fine\n");
  for (const auto& [line, expected] : cases) {
    SCOPED_TRACE(line);
    write_file(folder / "bad.jsonl", "{\"text\": \"ok\"}\n" + line + "\n{\"text\": \"after\"}\n");
    for (const int workers : {1, 2}) {
      PrepareOptions options = options_for({folder / "good.txt", folder / "bad.jsonl"}, folder / "out");
      options.workers = workers;
      const std::string what = prepare_error<FormatError>(options, ByteTokenizer());
      EXPECT_NE(what.find(folder / expected), std::string::npos) << what;
      expect_only(folder, {"good.txt", "bad.jsonl"});
    }
  }
}

TEST(Prepare, AppendEodEndsEachDocumentAndWideVocabulariesGetInt32) {
  TempFolder folder;
  write_file(folder / "a.txt", "ab\n\ncd\n");
  PrepareOptions options = options_for({folder / "a.txt"}, folder / "wide");
  options.append_eod = true;
  const WideTokenizer wide;
  const PrepareProgress done = prepare(options, wide);
  EXPECT_EQ(done.tokens, 8);
  const int32_t eod = wide.end_of_document();
  EXPECT_EQ(documents_of(folder / "wide"),
            (std::vector<std::vector<int32_t>>{{65536 + 'a', 65536 + 'b', 65536 + '\n', eod},
                                               {65536 + 'c', 65536 + 'd', 65536 + '\n', eod}}));
  EXPECT_EQ(IndexedDataset::open(folder / "wide")->dtype(), TokenDtype::kInt32);
  const nlohmann::json read = python_read(folder / "wide");
  EXPECT_EQ(read["dtype"], "int32");
  EXPECT_EQ(read["sequences"][1].back(), eod);
}

TEST(Prepare, AppendEodWithoutAnEndOfDocumentTokenIsAConfigError) {
  TempFolder folder;
  write_file(folder / "a.txt", "ab\n");
  PrepareOptions options = options_for({folder / "a.txt"}, folder / "out");
  options.append_eod = true;
  const std::string what = prepare_error<ConfigError>(options, ByteTokenizer());
  EXPECT_NE(what.find("'--append-eod': tokenizer 'byte' has no end-of-document token"), std::string::npos) << what;
  expect_only(folder, {"a.txt"});
}

TEST(Prepare, TheOutputIsTheSameBytesForOneTwoAndThreeWorkers) {
  TempFolder folder;
  // Many small JSON documents (batches cut by count) after the corpus
  // (batches cut by size), with a tokenizer that delays some documents.
  std::string lines;
  for (int i = 0; i < 10000; ++i) lines += "{\"text\": \"document " + std::to_string(i * 7919 % 10007) + "\"}\n";
  write_file(folder / "many.jsonl", lines);
  std::string first_bin, first_idx;
  for (const int workers : {1, 2, 3}) {
    SCOPED_TRACE(workers);
    const std::string prefix = folder / ("w" + std::to_string(workers));
    PrepareOptions options = options_for({kCorpus, folder / "many.jsonl", kCorpus}, prefix);
    options.workers = workers;
    options.append_eod = true;
    const PrepareProgress done = prepare(options, WideTokenizer(/*jitter=*/true));
    EXPECT_EQ(done.documents, 2 * 1189 + 10000);
    if (workers == 1) {
      first_bin = read_file(prefix + ".bin");
      first_idx = read_file(prefix + ".idx");
      continue;
    }
    EXPECT_TRUE(read_file(prefix + ".bin") == first_bin);
    EXPECT_TRUE(read_file(prefix + ".idx") == first_idx);
  }
}

TEST(Prepare, TheIndependentReaderReadsWhatItWrites) {
  TempFolder folder;
  write_file(folder / "a.txt", "alpha\nbeta\n\ngamma\n");
  write_file(folder / "b.jsonl", "{\"text\": \"delta\"}\n");
  PrepareOptions options = options_for({folder / "a.txt", folder / "b.jsonl"}, folder / "out");
  options.workers = 2;
  prepare(options, ByteTokenizer());
  const nlohmann::json read = python_read(folder / "out");
  ASSERT_FALSE(read.is_null());
  EXPECT_EQ(read["dtype"], "uint16");
  EXPECT_EQ(read["document_index"], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(read["sequences"], (std::vector<std::vector<int32_t>>{bytes_of("alpha\nbeta\n"), bytes_of("gamma\n"),
                                                                  bytes_of("delta")}));
}

TEST(Prepare, ProgressRisesToTheInputsSize) {
  TempFolder folder;
  PrepareOptions options = options_for({kCorpus, kCorpus}, folder / "out");
  options.workers = 2;
  std::vector<PrepareProgress> seen;
  options.on_progress = [&seen](const PrepareProgress& p) { seen.push_back(p); };
  prepare(options, ByteTokenizer());
  ASSERT_GT(seen.size(), 10u);  // 8 MB in batches of 512 KiB
  const uint64_t total = 2 * fs::file_size(kCorpus);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GT(seen[i].input_bytes_done, seen[i - 1].input_bytes_done);
    EXPECT_GE(seen[i].documents, seen[i - 1].documents);
    EXPECT_EQ(seen[i].input_bytes_total, total);
  }
  EXPECT_EQ(seen.back().input_bytes_done, total);
  EXPECT_EQ(seen.back().documents, 2 * 1189);
}

TEST(Prepare, AStopLeavesNoOutput) {
  TempFolder folder;
  PrepareOptions options = options_for({kCorpus}, folder / "out");
  options.workers = 2;
  int batches = 0;
  options.on_progress = [&batches](const PrepareProgress&) { ++batches; };
  options.should_stop = [&batches] { return batches >= 2; };
  EXPECT_THROW(prepare(options, ByteTokenizer()), PrepareInterrupted);
  EXPECT_EQ(batches, 2);
  EXPECT_TRUE(fs::is_empty(folder.path()));
  // A stop that comes only once every batch is written still leaves nothing.
  bool all_written = false;
  options.on_progress = [&all_written](const PrepareProgress& p) {
    all_written = p.input_bytes_done == p.input_bytes_total;
  };
  options.should_stop = [&all_written] { return all_written; };
  EXPECT_THROW(prepare(options, ByteTokenizer()), PrepareInterrupted);
  EXPECT_TRUE(all_written);
  EXPECT_TRUE(fs::is_empty(folder.path()));
}

TEST(Prepare, UnreadableInputsAndBadOptionsFailBeforeAnyOutput) {
  TempFolder folder;
  write_file(folder / "a.txt", "ab\n");
  const std::string missing = prepare_error<FormatError>(options_for({folder / "a.txt", folder / "none.txt"}, folder / "out"),
                                                         ByteTokenizer());
  EXPECT_NE(missing.find(folder / "none.txt" + ": cannot open: No such file or directory"), std::string::npos) << missing;
  fs::create_directory(folder / "dir.txt");
  const std::string directory = prepare_error<FormatError>(options_for({folder / "dir.txt"}, folder / "out"), ByteTokenizer());
  EXPECT_NE(directory.find(folder / "dir.txt" + ": is a folder"), std::string::npos) << directory;
  fs::remove(folder / "dir.txt");
  PrepareOptions no_workers = options_for({folder / "a.txt"}, folder / "out");
  no_workers.workers = 0;
  EXPECT_NE(prepare_error<ConfigError>(no_workers, ByteTokenizer()).find("'--workers': must be in [1, 1024] (got 0)"),
            std::string::npos);
  EXPECT_NE(prepare_error<ConfigError>(options_for({}, folder / "out"), ByteTokenizer()).find("'--input': no input"),
            std::string::npos);
  const std::string no_folder = prepare_error<ConfigError>(options_for({folder / "a.txt"}, folder / "no/out"), ByteTokenizer());
  EXPECT_NE(no_folder.find("'--output': folder " + folder / "no" + " does not exist"), std::string::npos) << no_folder;
  expect_only(folder, {"a.txt"});
}

#ifdef GIANT_GPT2_REFERENCE_DIR
// With GPT-2 BPE (the reference vocabulary the GPT-2 tests use): each
// document its encoding and <|endoftext|>, uint16, the same for 1 and 2 workers.
TEST(Prepare, Gpt2WithAppendEod) {
  const std::unique_ptr<Tokenizer> gpt2 = make_tokenizer(std::string("gpt2:") + GIANT_GPT2_REFERENCE_DIR);
  ASSERT_EQ(gpt2->end_of_document(), 50256);
  TempFolder folder;
  write_file(folder / "a.jsonl", "{\"text\": \"Hello world\"}\n{\"text\": \"It's 2024, isn't it?\"}\n");
  std::string first_bin;
  for (const int workers : {1, 2}) {
    const std::string prefix = folder / ("w" + std::to_string(workers));
    PrepareOptions options = options_for({folder / "a.jsonl", kCorpus}, prefix);
    options.append_eod = true;
    options.workers = workers;
    prepare(options, *gpt2);
    const auto documents = documents_of(prefix);
    ASSERT_EQ(documents.size(), 2u + 1189u);
    std::vector<int32_t> hello = gpt2->encode("Hello world");
    hello.push_back(50256);
    EXPECT_EQ(documents[0], hello);
    EXPECT_EQ(documents[1].back(), 50256);
    EXPECT_EQ(IndexedDataset::open(prefix)->dtype(), TokenDtype::kUint16);
    if (workers == 1) first_bin = read_file(prefix + ".bin");
    if (workers == 2) {
      EXPECT_TRUE(read_file(prefix + ".bin") == first_bin);
    }
  }
}
#endif

TEST(DocumentReader, CountsLinesAndBytesAcrossChunks) {
  TempFolder folder;
  std::string text;
  for (int i = 0; i < 30000; ++i) text += "line " + std::to_string(i) + (i % 3 == 2 ? "\n\n" : "\n");
  text += std::string(3 << 20, 'x') + "\n";  // a line longer than a chunk
  write_file(folder / "t.txt", text);
  DocumentReader reader(folder / "t.txt", InputFormat::kText);
  Record record;
  ASSERT_TRUE(reader.next(record));
  EXPECT_EQ(record.bytes, "line 0\nline 1\nline 2\n");
  EXPECT_EQ(record.line, 1);
  ASSERT_TRUE(reader.next(record));
  EXPECT_EQ(record.line, 5);
  int64_t documents = 2;
  Record last;
  while (reader.next(record)) {
    ++documents;
    last = record;
  }
  EXPECT_EQ(documents, 10001);
  EXPECT_EQ(last.bytes, std::string(3 << 20, 'x') + "\n");
  EXPECT_EQ(last.line, 40001);
  EXPECT_EQ(reader.bytes_read(), text.size());
  EXPECT_EQ(input_format_for("a/b.jsonl"), InputFormat::kJsonLines);
  EXPECT_EQ(input_format_for("b.json"), InputFormat::kJsonLines);
  EXPECT_EQ(input_format_for("b.txt"), InputFormat::kText);
  EXPECT_EQ(input_format_for("jsonl"), InputFormat::kText);
}

}  // namespace
}  // namespace giant::data
