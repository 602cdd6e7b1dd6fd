#include "giant/data/prepare.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "giant/base/timer.h"
#include "giant/data/document_reader.h"
#include "giant/data/indexed_dataset.h"

namespace giant::data {
namespace {

namespace fs = std::filesystem;

// A batch is cut at this much text (or this many documents): large enough
// that handing it between threads costs nothing, small enough that a few
// per worker are a few MiB.
constexpr size_t kBatchBytes = 512 << 10;
constexpr size_t kBatchDocuments = 4096;
constexpr auto kPollInterval = std::chrono::milliseconds(100);

struct Batch {
  int64_t id = 0;
  size_t input = 0;  // which file its records come from
  std::vector<Record> records;
  uint64_t input_bytes = 0;  // of its file consumed for it
  std::vector<std::vector<int32_t>> documents;  // the records' tokens, once tokenized
};

// The input files checked before anything is written: each can be opened
// (FormatError naming it otherwise); their total size for progress.
uint64_t check_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw ConfigError("--input", "no input files");
  uint64_t total = 0;
  for (const std::string& path : inputs) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
      // A pipe is not opened here: its writer would see this reader go away.
      if (::access(path.c_str(), R_OK) != 0 || S_ISDIR(info.st_mode)) {
        DocumentReader probe(path, InputFormat::kText);  // throws, naming the file and why
      }
      continue;
    }
    DocumentReader probe(path, InputFormat::kText);  // opens it: a file we may not read fails now
    total += static_cast<uint64_t>(info.st_size);
  }
  return total;
}

void check_options(const PrepareOptions& options, const Tokenizer& tokenizer) {
  if (options.workers < 1 || options.workers > 1024) {
    throw ConfigError("--workers", "must be in [1, 1024] (got " + std::to_string(options.workers) + ")");
  }
  if (options.append_eod && tokenizer.end_of_document() < 0) {
    throw ConfigError("--append-eod", "tokenizer '" + tokenizer.name() +
                                          "' has no end-of-document token (leave out --append-eod, or use a "
                                          "tokenizer that has one: gpt2:DIR, sentencepiece:FILE.model)");
  }
  if (options.output.empty()) throw ConfigError("--output", "no output prefix");
  const fs::path folder = fs::path(options.output).parent_path();
  if (!folder.empty() && !fs::is_directory(folder)) {
    throw ConfigError("--output", "folder " + folder.string() + " does not exist (for " + options.output + ")");
  }
}

// One reading thread, N tokenizing threads and the calling thread writing:
// batches are numbered as read and written in that order, and at most
// window_ of them are read but not yet written.
class Pipeline {
 public:
  Pipeline(const PrepareOptions& options, const Tokenizer& tokenizer)
      : options_(options), tokenizer_(tokenizer), window_(2 * options.workers + 2) {}

  PrepareProgress run(IndexedDatasetWriter& writer, uint64_t input_bytes_total);

 private:
  void read_inputs();
  bool submit(std::unique_ptr<Batch> batch);
  void tokenize_batches();
  void tokenize(Batch& batch) const;
  // The next batch to write (nullptr once all are written); throws what a
  // thread failed with, or PrepareInterrupted.
  std::unique_ptr<Batch> next_to_write();
  void record_failure(std::exception_ptr error);
  void stop_and_join(std::vector<std::thread>& threads);

  const PrepareOptions& options_;
  const Tokenizer& tokenizer_;
  const int64_t window_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Batch>> to_tokenize_;
  std::map<int64_t, std::unique_ptr<Batch>> tokenized_;
  int64_t batches_read_ = 0, batches_written_ = 0;
  bool reading_done_ = false, stopping_ = false;
  std::exception_ptr error_;
};

void Pipeline::record_failure(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
  stopping_ = true;
  changed_.notify_all();
}

bool Pipeline::submit(std::unique_ptr<Batch> batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return stopping_ || batches_read_ - batches_written_ < window_; });
  if (stopping_) return false;
  batch->id = batches_read_++;
  to_tokenize_.push_back(std::move(batch));
  changed_.notify_all();
  return true;
}

void Pipeline::read_inputs() {
  try {
    for (size_t input = 0; input < options_.inputs.size(); ++input) {
      const std::string& path = options_.inputs[input];
      DocumentReader reader(path, input_format_for(path));
      uint64_t submitted_bytes = 0;
      auto batch = std::make_unique<Batch>();
      size_t batch_bytes = 0;
      for (Record record; reader.next(record);) {
        batch_bytes += record.bytes.size();
        batch->records.push_back(std::move(record));
        if (batch_bytes < kBatchBytes && batch->records.size() < kBatchDocuments) continue;
        batch->input = input;
        batch->input_bytes = reader.bytes_read() - submitted_bytes;
        submitted_bytes = reader.bytes_read();
        if (!submit(std::move(batch))) return;
        batch = std::make_unique<Batch>();
        batch_bytes = 0;
      }
      batch->input = input;
      batch->input_bytes = reader.bytes_read() - submitted_bytes;
      if ((!batch->records.empty() || batch->input_bytes > 0) && !submit(std::move(batch))) return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    reading_done_ = true;
    changed_.notify_all();
  } catch (...) {
    record_failure(std::current_exception());
  }
}

void Pipeline::tokenize(Batch& batch) const {
  const std::string& path = options_.inputs[batch.input];
  const InputFormat format = input_format_for(path);
  const int32_t end_of_document = tokenizer_.end_of_document();
  batch.documents.reserve(batch.records.size());
  for (Record& record : batch.records) {
    std::vector<int32_t> tokens = tokenizer_.encode(document_text(std::move(record), format, options_.json_key, path));
    if (options_.append_eod) tokens.push_back(end_of_document);
    batch.documents.push_back(std::move(tokens));
  }
  batch.records = {};  // the text is no longer needed: free it before the batch waits for its turn
}

void Pipeline::tokenize_batches() {
  try {
    for (;;) {
      std::unique_ptr<Batch> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !to_tokenize_.empty() || reading_done_; });
        if (stopping_ || to_tokenize_.empty()) return;
        batch = std::move(to_tokenize_.front());
        to_tokenize_.pop_front();
      }
      tokenize(*batch);
      std::lock_guard<std::mutex> lock(mutex_);
      tokenized_[batch->id] = std::move(batch);
      changed_.notify_all();
    }
  } catch (...) {
    record_failure(std::current_exception());
  }
}

std::unique_ptr<Batch> Pipeline::next_to_write() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (error_) std::rethrow_exception(error_);
    if (options_.should_stop && options_.should_stop()) throw PrepareInterrupted("interrupted");
    const auto next = tokenized_.find(batches_written_);
    if (next != tokenized_.end()) {
      std::unique_ptr<Batch> batch = std::move(next->second);
      tokenized_.erase(next);
      return batch;
    }
    if (reading_done_ && batches_written_ == batches_read_) return nullptr;
    // Woken by any change; the timeout is for should_stop, which nothing signals.
    changed_.wait_for(lock, kPollInterval);
  }
}

void Pipeline::stop_and_join(std::vector<std::thread>& threads) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  for (std::thread& thread : threads) {
    if (thread.joinable()) thread.join();
  }
}

PrepareProgress Pipeline::run(IndexedDatasetWriter& writer, uint64_t input_bytes_total) {
  const Stopwatch clock;
  PrepareProgress progress;
  progress.input_bytes_total = input_bytes_total;
  std::vector<std::thread> threads;
  try {
    threads.emplace_back([this] { read_inputs(); });
    for (int i = 0; i < options_.workers; ++i) threads.emplace_back([this] { tokenize_batches(); });
    while (std::unique_ptr<Batch> batch = next_to_write()) {
      for (const std::vector<int32_t>& document : batch->documents) writer.add_document(document);
      progress.input_bytes_done += batch->input_bytes;
      progress.documents = writer.documents_written();
      progress.tokens = writer.tokens_written();
      progress.seconds = clock.seconds();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++batches_written_;
        changed_.notify_all();
      }
      if (options_.on_progress) options_.on_progress(progress);
    }
  } catch (...) {
    stop_and_join(threads);
    throw;
  }
  stop_and_join(threads);
  return progress;
}

}  // namespace

PrepareProgress prepare(const PrepareOptions& options, const Tokenizer& tokenizer) {
  check_options(options, tokenizer);
  const uint64_t input_bytes_total = check_inputs(options.inputs);
  IndexedDatasetWriter writer(options.output, token_dtype_for_vocabulary(tokenizer.vocab_size()));
  Pipeline pipeline(options, tokenizer);
  PrepareProgress progress = pipeline.run(writer, input_bytes_total);
  // A stop that came with the last batch still leaves nothing behind.
  if (options.should_stop && options.should_stop()) throw PrepareInterrupted("interrupted");
  writer.finish();
  return progress;
}

}  // namespace giant::data
