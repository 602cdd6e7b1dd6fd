// TensorBoard event files, decoded apart from Giant's writer: by Debian's
// python3-protobuf and a bit-by-bit CRC-32C (support/read_event_file.py),
// which checks the TFRecord framing, the file_version event and that every
// event re-encodes to its own bytes. The curves of a real run match its
// metrics.jsonl.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "giant/base/error.h"
#include "giant/train/tensorboard_log.h"
#include "giant/train/trainer.h"
#include "train/support/event_file_reader.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

namespace fs = std::filesystem;

using test::decode;
using test::event_files;
using test::keys_with;
using test::Scalar;
using test::read_file;
using test::TempDir;

double as_float(double value) { return static_cast<float>(value); }

TEST(TensorBoardLog, WritesScalarsAFreshDecoderReadsWhileTheFileIsOpen) {
  TempDir dir;
  const std::string logdir = dir.path() + "/tb";
  StepReport report;
  report.step = 1;
  report.loss = 5.54;
  report.lr = 2e-3;
  report.grad_norm = 1.25;
  report.tokens_per_s = 12345.6;
  report.mfu = 0.41;
  report.step_s = 0.0123;
  TensorBoardLog log(logdir);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const std::string name = fs::path(log.path()).filename();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + std::string(host))))
      << name;
  log.step(report);
  report.step = 300;  // a step past one varint byte
  report.loss = 4.5;
  log.step(report);
  log.evaluation(300, 4.75);

  // Not closed: each event is on disk as it is written.
  const std::vector<Scalar> scalars = decode(log.path());
  ASSERT_EQ(scalars.size(), 7u + 7 + 1) << read_file(log.path());
  const std::vector<std::pair<std::string, double>> first = {
      {"loss/train", 5.54},       {"optim/lr", 2e-3}, {"optim/grad_norm", 1.25}, {"perf/tokens_per_s", 12345.6},
      {"perf/mfu", 0.41},         {"perf/step_s", 0.0123}};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(scalars[i].step, 1);
    EXPECT_EQ(scalars[i].tag, first[i].first);
    EXPECT_EQ(scalars[i].value, as_float(first[i].second)) << first[i].first;
  }
  EXPECT_EQ(scalars[6].tag, "memory/max_rss_bytes");
  EXPECT_GT(scalars[6].value, 1 << 20);
  EXPECT_EQ(scalars[7].step, 300);
  EXPECT_EQ(scalars[7].value, 4.5);
  EXPECT_EQ(scalars[14].step, 300);
  EXPECT_EQ(scalars[14].tag, "loss/val");
  EXPECT_EQ(scalars[14].value, 4.75);
}

TEST(TensorBoardLog, ReplacesEarlierEventFilesOnly) {
  TempDir dir;
  const std::string logdir = dir.path() + "/tb";
  fs::create_directories(logdir);
  std::ofstream(logdir + "/events.out.tfevents.1000000000.elsewhere") << "an earlier run";
  std::ofstream(logdir + "/notes.txt") << "the user's";
  TensorBoardLog log(logdir);
  EXPECT_EQ(event_files(logdir), std::vector<std::string>{log.path()});
  EXPECT_TRUE(fs::exists(logdir + "/notes.txt"));
  EXPECT_TRUE(decode(log.path()).empty());  // only the file_version event
}

TEST(TensorBoardLog, AnUnwritableDirectoryIsAnErrorNamingIt) {
  TempDir dir;
  const std::string blocked = dir.file("plain-file", "not a directory");
  try {
    TensorBoardLog log(blocked + "/tb");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(blocked + "/tb"), std::string::npos) << e.what();
  }
}

std::vector<std::string> tiny_run(const TempDir& dir, int steps) {
  std::string text;
  for (int i = 0; text.size() < 400; ++i) text += "In the beginning " + std::to_string(i * 7 % 13) + ". ";
  return {"model.layers=1",         "model.hidden=32",        "model.heads=2",
          "model.seq_len=16",       "train.global_batch=4",   "train.micro_batch=2",
          "train.threads=1",        "train.eval_every=2",     "train.eval_batches=1",
          "train.sample_tokens=0",  "data.val_fraction=0.5",  "train.steps=" + std::to_string(steps),
          "data.path=\"" + dir.file("text.txt", text) + "\"", "train.out_dir=\"" + dir.path() + "/out\""};
}

TEST(Trainer, TensorBoardCurvesMatchMetricsJsonl) {
  TempDir dir;
  std::ostringstream out;
  Trainer(run_config_from(keys_with(tiny_run(dir, 5))), "", out, false).run();
  const std::vector<std::string> files = event_files(dir.path() + "/out/tensorboard");
  ASSERT_EQ(files.size(), 1u);

  std::map<std::string, std::map<int64_t, double>> curves;  // tag -> step -> value
  for (const Scalar& s : decode(files[0])) {
    EXPECT_TRUE(curves[s.tag].emplace(s.step, s.value).second) << s.tag << " twice at step " << s.step;
  }
  std::map<int64_t, double> losses, val_losses;
  std::ifstream metrics(dir.path() + "/out/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("loss")) losses[record["step"].get<int64_t>()] = as_float(record["loss"]);
    if (record.contains("val_loss") && !record.contains("summary")) {
      val_losses[record["step"].get<int64_t>()] = as_float(record["val_loss"]);
    }
  }
  ASSERT_EQ(losses.size(), 5u);
  EXPECT_EQ(curves["loss/train"], losses);
  EXPECT_EQ(val_losses.size(), 3u);  // steps 2, 4 and the last
  EXPECT_EQ(curves["loss/val"], val_losses);
  for (const char* tag : {"optim/lr", "optim/grad_norm", "perf/tokens_per_s", "perf/mfu", "perf/step_s",
                          "memory/max_rss_bytes"}) {
    EXPECT_EQ(curves[tag].size(), 5u) << tag;
  }
  EXPECT_GT(curves["perf/tokens_per_s"][5], 0);
}

TEST(Trainer, TensorBoardCanBeTurnedOff) {
  TempDir dir;
  auto o = tiny_run(dir, 1);
  o.push_back("train.tensorboard=false");
  std::ostringstream out;
  Trainer(run_config_from(keys_with(o)), "", out, false).run();
  EXPECT_TRUE(fs::exists(dir.path() + "/out/metrics.jsonl"));
  EXPECT_FALSE(fs::exists(dir.path() + "/out/tensorboard"));
}

}  // namespace
}  // namespace giant::train
