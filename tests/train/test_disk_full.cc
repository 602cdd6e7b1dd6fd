// A disk that fills under checkpoint.dir (a small tmpfs mounted for the
// test, as root like CI): the checkpoint that does not fit ends the run
// naming the disk's error, no partial checkpoint is left, the last committed
// one passes `giant checkpoint verify`, and under `giant launch
// --max-restarts` the failure, back at the same step after a restart, ends
// the launch with that cause instead of restarting again.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "train/support/giant_process.h"
#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::read_file;
using giant::train::test::run_launch;
using giant::train::test::TempDir;

// dp = 2, checkpointed every 2 steps into `checkpoints`.
std::string run_args(const std::string& out, const std::string& checkpoints) {
  return giant::train::test::small_checkpointed_run(
      out, "--set parallel.dp=2 --set checkpoint.every=2 --set checkpoint.dir=\\\"" + checkpoints + "\\\"");
}

uint64_t folder_bytes(const fs::path& folder) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

// A tmpfs of `bytes` at `dir` while it lives.
class SmallDisk {
 public:
  SmallDisk(const std::string& dir, uint64_t bytes) : dir_(dir) {
    fs::create_directories(dir);
    const std::string mount = "mount -t tmpfs -o size=" + std::to_string(bytes) + " tmpfs " + dir;
    mounted_ = std::system(mount.c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) std::system(("umount " + dir_).c_str());
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(DiskFull, ACheckpointThatDoesNotFitEndsTheRunAndKeepsTheLastOne) {
  ASSERT_EQ(::geteuid(), 0u) << "mounting a small tmpfs needs root (CI runs as root)";
  TempDir dir("giant-disk-full");
  // One checkpoint's size, from a run on the ordinary disk.
  ASSERT_EQ(run_launch(dir.path(), run_args(dir.path() + "/sized", dir.path() + "/sized/checkpoints") +
                                       " --set train.steps=2",
                       2, "sized.log"),
            0)
      << read_file(dir.path() + "/sized.log");
  const uint64_t one = folder_bytes(dir.path() + "/sized/checkpoints/step_00000002");
  ASSERT_GT(one, 0u);

  // Room for two checkpoints and a half: the third (step 6) does not fit.
  const std::string disk = dir.path() + "/disk";
  SmallDisk small(disk, one * 5 / 2);
  ASSERT_TRUE(small.mounted());
  const int status = run_launch(dir.path(), run_args(dir.path() + "/out", disk), 2, "launch.log",
                                "--max-restarts 3 --restart-backoff 0");
  const std::string log = read_file(dir.path() + "/launch.log");
  EXPECT_EQ(status, 1) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_NE(log.find("giant launch: restart 1 of 3 after "), std::string::npos) << log;
  EXPECT_EQ(log.find("giant launch: restart 2 of 3"), std::string::npos) << log;
  EXPECT_NE(log.find(" at step 6 again, as in the attempt before: a restart would fail the same way"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("resuming from " + disk + "/step_00000004 at step 4"), std::string::npos) << log;
  // Only committed checkpoints are left, and the newest verifies.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(disk)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"latest", "step_00000002", "step_00000004"}));
  EXPECT_NE(read_file(disk + "/latest").find("step_00000004"), std::string::npos) << read_file(disk + "/latest");
  const giant::train::test::Outcome verified = giant::train::test::giant("checkpoint verify " + disk + "/step_00000004");
  EXPECT_EQ(verified.code, 0) << verified.out << verified.err;
}

}  // namespace
