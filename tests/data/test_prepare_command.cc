// giant data prepare through the giant command: the bundled corpus in,
// its summary line, exit status 2 with a message for bad flags and bad
// input, and no output after a failure or a SIGTERM.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "giant/data/indexed_dataset.h"
#include "support/indexed_files.h"

extern char** environ;

namespace giant::data {
namespace {

using test::python_read;
using test::TempFolder;
using test::write_file;
namespace fs = std::filesystem;

const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";
const std::string kCorpus = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

CommandResult prepare_command(const std::string& args) {
  CommandResult result;
  FILE* pipe = popen((kGiant + " data prepare " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class PrepareCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGiant)) GTEST_SKIP() << kGiant << " is not built";
  }
  // Nothing but the inputs in the folder: no .bin, .idx or .tmp.
  void expect_no_output() const {
    for (const auto& entry : fs::directory_iterator(folder_.path())) {
      const std::string name = entry.path().filename();
      EXPECT_EQ(name.find("out."), std::string::npos) << name;
    }
  }
  TempFolder folder_;
  std::string out_ = folder_ / "out";
};

TEST_F(PrepareCommand, TheBundledCorpusWithTwoWorkers) {
  const CommandResult result = prepare_command("--input " + kCorpus + " --tokenizer byte --output " + out_ + " --workers 2");
  ASSERT_EQ(result.status, 0) << result.output;
  const std::string tokens = std::to_string(fs::file_size(kCorpus) - 1188);
  EXPECT_TRUE(contains(result.output, "giant data prepare: 1189 documents, " + tokens + " tokens (uint16) from 4.2 MB"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "-> " + out_ + ".bin, " + out_ + ".idx")) << result.output;
  const nlohmann::json read = python_read(out_);
  ASSERT_FALSE(read.is_null());
  EXPECT_EQ(read["sequences"].size(), 1189u);
  EXPECT_EQ(read["sequences"][0][0], 'G');
  EXPECT_EQ(IndexedDataset::open(out_)->num_documents(), 1189);
}

TEST_F(PrepareCommand, BadFlagsExitTwoWithAMessage) {
  write_file(folder_ / "a.txt", "ab\n");
  const std::string input = " --input " + folder_ / "a.txt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {input + " --tokenizer byte", "--output is required"},
      {" --tokenizer byte --output " + out_, "--input is required"},
      {input + " --output " + out_, "--tokenizer is required"},
      {input + " --tokenizer byte --output " + out_ + " --workers 0", "'--workers': must be in [1, 1024] (got 0)"},
      {input + " --tokenizer byte --output " + out_ + " --workers two", "--workers"},
      {input + " --tokenizer nope --output " + out_, "unknown tokenizer 'nope'"},
      {input + " --tokenizer byte --output " + out_ + " --append-eod",
       "'--append-eod': tokenizer 'byte' has no end-of-document token"},
      {input + " --tokenizer byte --output " + folder_ / "none/out", "'--output': folder " + folder_ / "none"},
      {input + " --tokenizer byte --output " + out_ + " --frobnicate", "--frobnicate"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const CommandResult result = prepare_command(args);
    EXPECT_EQ(result.status, 2) << result.output;
    EXPECT_TRUE(contains(result.output, message)) << result.output;
    expect_no_output();
  }
  const CommandResult help = prepare_command("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(contains(help.output, "--json-key")) << help.output;
}

TEST_F(PrepareCommand, BadInputExitsTwoNamingTheFileAndLeavesNoOutput) {
  write_file(folder_ / "a.txt", "ab\n");
  write_file(folder_ / "b.jsonl", "{\"text\": \"x\"}\n{\"id\": 1}\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {folder_ / "a.txt" + " " + folder_ / "missing.txt", folder_ / "missing.txt" + ": cannot open: No such file"},
      {folder_ / "a.txt" + " " + folder_ / "b.jsonl", folder_ / "b.jsonl" + ":2: no 'text' key"},
  };
  for (const auto& [inputs, message] : cases) {
    const CommandResult result = prepare_command("--input " + inputs + " --tokenizer byte --output " + out_);
    EXPECT_EQ(result.status, 2) << result.output;
    EXPECT_TRUE(contains(result.output, message)) << result.output;
    expect_no_output();
  }
  const CommandResult keyed = prepare_command("--input " + folder_ / "b.jsonl" + " --json-key id --tokenizer byte --output " + out_);
  EXPECT_EQ(keyed.status, 2);
  EXPECT_TRUE(contains(keyed.output, "b.jsonl:1: no 'id' key")) << keyed.output;
}

// giant data prepare reading a pipe the test feeds, its stderr in a file.
// Giant opens the pipe to read once it has started (signals caught, the
// .tmp created); until then a non-blocking open for writing fails.
class PipedPrepare {
 public:
  PipedPrepare(const TempFolder& folder, const std::string& out) : log_(folder / "log") {
    const std::string fifo = folder / "input.txt";
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::vector<std::string> args = {kGiant, "data", "prepare", "--input", fifo, "--tokenizer", "byte", "--output", out};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_EQ(posix_spawn(&pid_, kGiant.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    for (int i = 0; i < 6000 && pid_ > 0; ++i) {
      feed_ = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (feed_ >= 0 || errno != ENXIO || ::waitpid(pid_, nullptr, WNOHANG) != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(feed_, 0) << "giant did not open its input: " << test::read_file(log_);
    if (feed_ >= 0) {
      EXPECT_EQ(::fcntl(feed_, F_SETFL, 0), 0);
    }
  }
  // A failed assertion must not leave giant waiting on its pipe.
  ~PipedPrepare() {
    if (feed_ >= 0) ::close(feed_);
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return feed_ >= 0; }
  void feed(const std::string& bytes) {
    ASSERT_EQ(::write(feed_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void signal(int signo) { ASSERT_EQ(::kill(pid_, signo), 0); }
  // Closes the pipe (the end of the input) and waits: the exit status
  // (minus the signal's number if one killed it) and what it printed.
  CommandResult finish() {
    ::close(feed_);
    feed_ = -1;
    int status = 0;
    CommandResult result;
    if (::waitpid(pid_, &status, 0) != pid_) return result;
    pid_ = 0;
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    result.output = test::read_file(log_);
    return result;
  }

 private:
  std::string log_;
  pid_t pid_ = 0;
  int feed_ = -1;
};

// SIGTERM while the input is half read: the run stops with 128 + SIGTERM
// and leaves no output. The pipe makes it deterministic: giant waits on it
// until the signal is sent, then sees the signal before the end of its input.
TEST_F(PrepareCommand, SigtermLeavesNoOutput) {
  PipedPrepare giant(folder_, out_);
  ASSERT_TRUE(giant.started());
  giant.feed("some text\nmore text\n\n");
  ASSERT_TRUE(fs::exists(out_ + ".bin.tmp"));
  giant.signal(SIGTERM);
  const CommandResult result = giant.finish();  // giant finishes reading, then stops for the signal
  EXPECT_EQ(result.status, 128 + SIGTERM) << result.output;
  EXPECT_TRUE(contains(result.output, "interrupted by signal 15")) << result.output;
  EXPECT_FALSE(fs::exists(out_ + ".bin.tmp"));
  EXPECT_FALSE(fs::exists(out_ + ".bin"));
  EXPECT_FALSE(fs::exists(out_ + ".idx"));
}

// Off a terminal, progress is a plain line when a batch is written 5 s or
// more after the last line; a pipe has no size, so the line gives MB read.
TEST_F(PrepareCommand, OffATerminalProgressIsAPlainLineEveryFewSeconds) {
  PipedPrepare giant(folder_, out_);
  ASSERT_TRUE(giant.started());
  const std::string batch((600 << 10) - 1, 'x');  // a document of more than a batch's 512 KiB
  giant.feed(batch + "\n\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(5200));
  giant.feed(batch + "\n\n");
  const CommandResult result = giant.finish();
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "prepare: 1.2 MB  ")) << result.output;
  EXPECT_TRUE(contains(result.output, " MB/s  2 documents\n")) << result.output;
  EXPECT_TRUE(contains(result.output, "giant data prepare: 2 documents, 1228800 tokens (uint16)")) << result.output;
  EXPECT_EQ(result.output.find('\r'), std::string::npos) << result.output;
}

}  // namespace
}  // namespace giant::data
