// A rank's memory does not grow with a memory-mapped corpus: giant train on
// a .bin/.idx twenty times the bundled corpus peaks within a few MiB of the
// same run on the corpus itself, while a text file of that size (tokenized
// in memory) shows the growth this measure would see.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "giant/data/indexed_dataset.h"
#include "support/launch_support.h"

namespace giant::train {
namespace {

using test::giant_binary;
using test::read_file;
using test::TempDir;

const std::string kCorpus = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

// The corpus `copies` times over as byte ids, in documents of 4 KiB.
std::string write_prefix(const TempDir& dir, const std::string& name, int copies) {
  const std::string text = read_file(kCorpus), prefix = dir.path() + "/" + name;
  data::IndexedDatasetWriter writer(prefix, data::TokenDtype::kUint16);
  std::vector<int32_t> document;
  for (int c = 0; c < copies; ++c) {
    for (size_t at = 0; at < text.size(); at += 4096) {
      document.assign(text.begin() + static_cast<std::ptrdiff_t>(at),
                      text.begin() + static_cast<std::ptrdiff_t>(std::min(text.size(), at + 4096)));
      for (auto& id : document) id &= 0xff;  // char may be signed
      writer.add_document(document);
    }
  }
  writer.finish();
  return prefix;
}

// giant train on data_path: the process's peak RSS as its last step logged it.
double peak_rss_mib(const TempDir& dir, const std::string& name, const std::string& data_path) {
  const std::string out = dir.path() + "/" + name;
  const std::string command =
      giant_binary() + " train --set model.layers=1 --set model.hidden=32 --set model.heads=2 --set model.seq_len=64" +
      " --set train.global_batch=8 --set train.micro_batch=8 --set train.steps=20 --set train.threads=1" +
      " --set train.eval_every=0 --set train.eval_batches=2 --set train.sample_tokens=0 --set train.precision=\\\"fp32\\\"" +
      " --set train.retain_memory_mb=0 --set train.tensorboard=false --set train.resume=\\\"\\\"" +
      " --set data.path=\\\"" + data_path + "\\\" --set train.out_dir=\\\"" + out + "\\\" > " + out + ".log 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << read_file(out + ".log");
  double peak = 0;
  std::istringstream lines(read_file(out + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("max_rss_bytes")) peak = std::max(peak, record["max_rss_bytes"].get<double>());
  }
  EXPECT_GT(peak, 0) << "no max_rss_bytes in " << out << "/metrics.jsonl";
  return peak / (1 << 20);
}

TEST(DataMemory, MappedCorpusTwentyTimesLargerTakesNoMoreMemory) {
  TempDir dir;
  const std::string small = write_prefix(dir, "x1", 1), large = write_prefix(dir, "x20", 20);
  const double small_mib = peak_rss_mib(dir, "x1", small), large_mib = peak_rss_mib(dir, "x20", large);
  // The large .bin is 19 x 8.6 MB bigger; a run that held it would peak ~160 MiB higher.
  EXPECT_LT(large_mib, small_mib + 8) << "x1: " << small_mib << " MiB, x20: " << large_mib << " MiB";

  // The same measure sees a corpus held in memory: the text path, 20 copies.
  const std::string text = read_file(kCorpus);
  std::string twenty;
  for (int c = 0; c < 20; ++c) twenty += text;
  const std::string text_path = dir.file("x20.txt", twenty);
  twenty.clear();
  const double text_mib = peak_rss_mib(dir, "text", text_path);
  std::cout << "peak RSS: .bin x1 " << small_mib << " MiB, .bin x20 " << large_mib << " MiB, text x20 " << text_mib
            << " MiB\n";
  EXPECT_GT(text_mib, small_mib + 100) << "text x20: " << text_mib << " MiB against " << small_mib;
}

}  // namespace
}  // namespace giant::train
