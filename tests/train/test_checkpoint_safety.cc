// What a checkpoint survives: a truncated file, a flipped byte and a missing
// piece each stop the run before training with an error naming the file
// and what is wrong, another model's checkpoint with one naming the keys;
// under train.resume=auto a corrupt newest checkpoint falls back to the
// previous one and says so;
// checkpoint.keep keeps the newest; a save that runs out of disk leaves the
// previous checkpoint the latest and usable; async saves are the same
// checkpoints as synchronous ones. The local tier (checkpoint.local_every):
// a run that fails resumes from its newest local copy when that is newer
// than checkpoint.dir's, ends bitwise as a run never interrupted, and
// leaves no copy behind; a local folder that cannot be written, or that
// the ranks do not share, is refused before training naming the key; one
// that runs out of room costs only its copies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/loader.h"
#include "giant/checkpoint/manifest.h"
#include "train/support/checkpoint_compare.h"
#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::expect_same_state;
using giant::train::test::giant_binary;
using giant::train::test::read_file;
using giant::train::test::run_train;
using giant::train::test::TempDir;

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

std::string train_args(const std::string& out, int steps, const std::string& extra) {
  return "--set model.layers=2 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 "
         "--set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 --set train.eval_every=0 "
         "--set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 --set data.val_fraction=0.2 "
         "--set checkpoint.every=1 --set train.steps=" + std::to_string(steps) + " --set data.path=\"" + kData +
         "\" --set train.out_dir=\"" + out + "\" " + extra;
}


struct Saved {
  TempDir dir{"giant-ckpt-safety"};
  std::string out = dir.path() + "/out";
  fs::path checkpoints = fs::path(out) / "checkpoints";
  Saved() {
    const std::string log = dir.path() + "/first.log";
    EXPECT_EQ(run_train(train_args(out, 2, ""), log), 0) << read_file(log);
  }
  fs::path step(int s) const { return checkpoints / giant::checkpoint::step_folder_name(s); }
  fs::path file(int s) const { return step(s) / "rank_00000.safetensors"; }
  // Resumes from `what` (a path or auto) with `extra` keys: status and log.
  std::pair<int, std::string> resume(const std::string& what, const std::string& extra = "") const {
    const std::string log = dir.path() + "/resume.log";
    const int status = run_train(train_args(out, 3, "--set train.resume=\"" + what + "\" " + extra), log);
    return {status, read_file(log)};
  }
};

void flip_byte(const fs::path& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Stopped before its first step, naming `file` and `what`.
void expect_refused(const std::pair<int, std::string>& result, const std::string& file, const std::string& what) {
  EXPECT_EQ(result.first, 1) << result.second;
  EXPECT_NE(result.second.find(file), std::string::npos) << result.second;
  EXPECT_NE(result.second.find(what), std::string::npos) << result.second;
  EXPECT_EQ(result.second.find("step 3/3"), std::string::npos) << result.second;
}

TEST(CheckpointSafety, TruncatedFileIsRefused) {
  Saved saved;
  fs::resize_file(saved.file(2), fs::file_size(saved.file(2)) - 100);
  expect_refused(saved.resume(saved.step(2).string()), saved.file(2).string(), "truncated or overwritten");
}

TEST(CheckpointSafety, FlippedByteIsRefused) {
  Saved saved;
  flip_byte(saved.file(2), fs::file_size(saved.file(2)) - 1000);
  expect_refused(saved.resume(saved.step(2).string()), saved.file(2).string(), "(its contents changed)");
}

TEST(CheckpointSafety, MissingPieceIsRefused) {
  Saved saved;
  const fs::path manifest = saved.step(2) / "manifest.json";
  std::string text = read_file(manifest.string());
  // Cut the first piece of the first tensor out of its list.
  const size_t pieces = text.find("\"pieces\": [");
  const size_t first = text.find('{', pieces), end = text.find('}', first);
  ASSERT_NE(pieces, std::string::npos);
  text.erase(first, end + 1 - first);
  std::ofstream(manifest, std::ios::trunc) << text;
  expect_refused(saved.resume(saved.step(2).string()), manifest.string(), "is missing pieces");
}

// Bad input (exit 2): the run's keys, not the checkpoint, are at fault.
TEST(CheckpointSafety, AnotherModelIsRefused) {
  Saved saved;
  const auto [status, log] = saved.resume(saved.step(2).string(), "--set model.layers=3");
  EXPECT_EQ(status, 2) << log;
  EXPECT_NE(log.find(saved.step(2).string() + " was saved by another run"), std::string::npos) << log;
  EXPECT_NE(log.find("model.layers: 2 in the checkpoint, 3 in this run"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 3/3"), std::string::npos) << log;
}

TEST(CheckpointSafety, AutoFallsBackPastACorruptNewest) {
  Saved saved;
  flip_byte(saved.file(2), fs::file_size(saved.file(2)) - 1000);
  const auto [status, log] = saved.resume("auto");
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("checkpoint " + saved.step(2).string() + " is unusable"), std::string::npos) << log;
  EXPECT_NE(log.find("falling back to the previous checkpoint, " + saved.step(1).string()), std::string::npos) << log;
  EXPECT_NE(log.find("resuming from " + saved.step(1).string() + " at step 1"), std::string::npos) << log;
}

TEST(CheckpointSafety, KeepHoldsTheNewest) {
  Saved saved;
  const std::string log = saved.dir.path() + "/keep.log";
  ASSERT_EQ(run_train(train_args(saved.out, 5, "--set checkpoint.keep=2"), log), 0) << read_file(log);
  const auto left = giant::checkpoint::list_checkpoints(saved.checkpoints);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0], saved.step(5));
  EXPECT_EQ(left[1], saved.step(4));
  EXPECT_EQ(giant::checkpoint::latest_checkpoint(saved.checkpoints), saved.step(5));
}

// checkpoint.dir on a tmpfs with room for one checkpoint only (a mount of
// its own: unshare -m).
TEST(CheckpointSafety, FullDiskLeavesThePreviousCheckpoint) {
  TempDir dir("giant-ckpt-full");
  const std::string mount = dir.path() + "/disk";
  fs::create_directories(mount);
  // One checkpoint of this model is about 0.42 MB; the disk holds 0.6 MB.
  const std::string args = train_args(dir.path() + "/out", 3, "--set checkpoint.dir=\"" + mount + "/ckpt\"");
  const std::string log = dir.path() + "/full.log";
  const std::string script = "mount -t tmpfs -o size=600k tmpfs " + mount + " && " + giant_binary() + " train " +
                             args + "; status=$?; ls -a " + mount + "/ckpt | sed s/^/listing:/; cat " + mount +
                             "/ckpt/latest; exit $status";
  const int status = std::system(("unshare -m sh -c '" + script + "' > " + log + " 2>&1").c_str());
  const std::string text = read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_NE(text.find("the previous checkpoint is intact"), std::string::npos) << text;
  EXPECT_NE(text.find("step_00000001\n"), std::string::npos) << text;  // latest still names it
  EXPECT_EQ(text.find("listing:.tmp.step"), std::string::npos) << text;  // the failed save is cleaned up
  EXPECT_NE(text.find("listing:step_00000001"), std::string::npos) << text;
}

TEST(CheckpointSafety, AsyncSavesTheSameCheckpoints) {
  TempDir dir("giant-ckpt-async");
  const std::string sync_log = dir.path() + "/sync.log", async_log = dir.path() + "/async.log";
  ASSERT_EQ(run_train(train_args(dir.path() + "/sync", 4, "--set checkpoint.keep=10"), sync_log), 0) << read_file(sync_log);
  ASSERT_EQ(run_train(train_args(dir.path() + "/async", 4, "--set checkpoint.async=true --set checkpoint.keep=10"), async_log), 0)
      << read_file(async_log);
  for (int step = 1; step <= 4; ++step) {
    const std::string name = giant::checkpoint::step_folder_name(step);
    const fs::path a = fs::path(dir.path()) / "sync/checkpoints" / name / "rank_00000.safetensors";
    const fs::path b = fs::path(dir.path()) / "async/checkpoints" / name / "rank_00000.safetensors";
    EXPECT_TRUE(read_file(a.string()) == read_file(b.string())) << name << " differs";
  }
}

// Durable checkpoints every 4 steps, a local copy every step: failed in
// step 6's optimizer step, the run resumes from the local step 5 (newer
// than the durable step 4), not from step 4.
TEST(CheckpointSafety, LocalTierResumesFromItsNewestCopy) {
  TempDir dir("giant-ckpt-local");
  const std::string local = dir.path() + "/local";
  const std::string tiers = "--set checkpoint.every=4 --set checkpoint.local_every=1 --set checkpoint.local_dir=\"" +
                            local + "\" ";
  const std::string reference_log = dir.path() + "/reference.log", failed_log = dir.path() + "/failed.log";
  ASSERT_EQ(run_train(train_args(dir.path() + "/reference", 7, "--set checkpoint.every=4"), reference_log), 0)
      << read_file(reference_log);
  const std::string out = dir.path() + "/out";
  EXPECT_EQ(run_train(train_args(out, 7, tiers + "--set train.fault=\"optimizer@6,action=exit\""), failed_log), 1)
      << read_file(failed_log);
  EXPECT_NE(read_file(failed_log).find("local checkpoints every 1 step in " + local), std::string::npos)
      << read_file(failed_log);
  // Only the newest copy is kept; the durable tier has its step 4.
  const auto copies = giant::checkpoint::list_checkpoints(local);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].filename(), "step_00000005");
  EXPECT_EQ(giant::checkpoint::list_checkpoints(fs::path(out) / "checkpoints").size(), 1u);

  const std::string resumed_log = dir.path() + "/resumed.log";
  ASSERT_EQ(run_train(train_args(out, 7, tiers), resumed_log), 0) << read_file(resumed_log);
  const std::string text = read_file(resumed_log);
  EXPECT_NE(text.find("resuming from " + local + "/step_00000005 at step 5"), std::string::npos) << text;
  expect_same_state(fs::path(dir.path()) / "reference/checkpoints/step_00000007",
                    fs::path(out) / "checkpoints/step_00000007");
  EXPECT_FALSE(fs::exists(local)) << "the finished run left its local copies";
}

TEST(CheckpointSafety, LocalTierInAFolderThatCannotBeWrittenIsRefused) {
  TempDir dir("giant-ckpt-local-bad");
  const std::string log = dir.path() + "/bad.log";
  const std::string args = train_args(dir.path() + "/out", 2,
                                      "--set checkpoint.local_every=1 --set checkpoint.local_dir=\"/proc/version/x\"");
  EXPECT_EQ(run_train(args, log), 2) << read_file(log);
  EXPECT_NE(read_file(log).find("'checkpoint.local_dir': cannot write into '/proc/version/x'"), std::string::npos)
      << read_file(log);
}

// Two ranks, each with its own memory mounted at the local folder (a mount
// namespace each, as two hosts' /dev/shm): refused before the first step.
TEST(CheckpointSafety, LocalTierTheRanksDoNotShareIsRefused) {
  TempDir dir("giant-ckpt-local-apart");
  const std::string local = dir.path() + "/local", log = dir.path() + "/launch.log";
  fs::create_directories(local);
  const std::string args = train_args(dir.path() + "/out", 2,
                                      "--set parallel.dp=2 --set train.micro_batch=2 --set checkpoint.local_every=1 --set checkpoint.local_dir=\"" +
                                          local + "\"");
  const std::string command = giant_binary() + " launch --nproc 2 -- unshare -m sh -c 'mount -t tmpfs tmpfs " + local +
                              " && exec " + giant_binary() + " train " + args + "' > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 2) << read_file(log);
  EXPECT_NE(read_file(log).find("'checkpoint.local_dir': '" + local + "' is not one folder every rank sees"),
            std::string::npos)
      << read_file(log);
  EXPECT_EQ(read_file(log).find("step 1/2"), std::string::npos) << read_file(log);
}

// The local folder on a tmpfs too small for one copy (a mount of its own:
// unshare -m): each local save fails and says so, and the run trains on to
// its end with its durable checkpoints.
TEST(CheckpointSafety, LocalTierOutOfRoomWarnsAndTrainsOn) {
  TempDir dir("giant-ckpt-local-full");
  const std::string mount = dir.path() + "/memory";
  fs::create_directories(mount);
  const std::string out = dir.path() + "/out";
  const std::string args = train_args(out, 3, "--set checkpoint.every=3 --set checkpoint.local_every=1 "
                                              "--set checkpoint.local_dir=\"" + mount + "/local\"");
  const std::string log = dir.path() + "/full.log";
  const std::string script = "mount -t tmpfs -o size=100k tmpfs " + mount + " && " + giant_binary() + " train " + args;
  const int status = std::system(("unshare -m sh -c '" + script + "' > " + log + " 2>&1").c_str());
  const std::string text = read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_NE(text.find("the checkpoint of step 1 failed"), std::string::npos) << text;
  EXPECT_NE(text.find("(a local copy: training goes on; checkpoint.dir is untouched)"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoints/step_00000003/manifest.json")) << text;
}

}  // namespace
