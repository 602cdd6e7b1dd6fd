// giant generate on a real checkpoint: one saved by two pipeline stages
// loads into one process; greedy generation with and without the cache
// prints the same text; a seed repeats its sample; a corrupt checkpoint is
// refused naming the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::giant_binary;
using giant::train::test::read_file;
using giant::train::test::run_launch;
using giant::train::test::TempDir;

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

// giant generate ARGS: exit status, standard output in `out`.
int generate(const std::string& args, std::string& out, const TempDir& dir) {
  const std::string file = dir.path() + "/generate.out";
  const int status = std::system((giant_binary() + " generate " + args + " > " + file + " 2> " + file + ".err").c_str());
  out = read_file(file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(GenerateCheckpoint, LoadsAPipelineCheckpointAndTheCacheChangesNothing) {
  TempDir dir("giant-generate-ckpt");
  const std::string out = dir.path() + "/out";
  const std::string args =
      "--set model.layers=4 --set model.hidden=32 --set model.heads=4 --set model.seq_len=32 "
      "--set train.global_batch=4 --set train.micro_batch=2 --set train.steps=30 --set train.lr=3e-3 "
      "--set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 "
      "--set train.precision=fp32 --set parallel.pp=2 --set ccl.timeout=20s --set data.path=\\\"" + kData +
      "\\\" --set train.out_dir=\\\"" + out + "\\\"";
  ASSERT_EQ(run_launch(dir.path(), args, 2), 0) << read_file(dir.path() + "/launch.log");
  const std::string checkpoints = out + "/checkpoints";
  std::string cached, uncached, seeded, again, other;
  // 40 new tokens: past seq_len 32, where the cache prefills the window again.
  const std::string greedy = checkpoints + " --prompt 'And God' --max-tokens 40 --temperature 0";
  ASSERT_EQ(generate(greedy, cached, dir), 0) << read_file(dir.path() + "/generate.out.err");
  ASSERT_EQ(generate(greedy + " --no-cache", uncached, dir), 0) << read_file(dir.path() + "/generate.out.err");
  EXPECT_EQ(cached, uncached);
  EXPECT_EQ(cached.rfind("And God", 0), 0u) << cached;
  EXPECT_GT(cached.size(), std::string("And God").size() + 20) << cached;
  const std::string sampled = checkpoints + " --prompt 'And' --max-tokens 30 --temperature 1 --top-k 20 --seed ";
  ASSERT_EQ(generate(sampled + "7", seeded, dir), 0);
  ASSERT_EQ(generate(sampled + "7", again, dir), 0);
  ASSERT_EQ(generate(sampled + "8", other, dir), 0);
  EXPECT_EQ(seeded, again);
  EXPECT_NE(seeded, other);

  // A flipped byte in a weight file: refused, naming it.
  const fs::path folder = fs::path(checkpoints) / "step_00000030";
  const fs::path file = folder / "rank_00001.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 64));
    f.put('\x7f');
  }
  std::string refused;
  EXPECT_NE(generate(folder.string() + " --max-tokens 5", refused, dir), 0);
  const std::string err = read_file(dir.path() + "/generate.out.err");
  EXPECT_NE(err.find("rank_00001.safetensors"), std::string::npos) << err;
}

}  // namespace
