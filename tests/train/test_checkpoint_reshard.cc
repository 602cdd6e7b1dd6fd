// Resharding on load: a checkpoint saved at (dp, tp, pp) = (2, 1, 1) with
// ZeRO-1 loads at (1, 2, 1), (1, 1, 2), (2, 2, 1) and (1, 1, 1), and each of
// those layouts' checkpoints loads back at (2, 1, 1): the state saved again
// after loading is bitwise the saved one, and the next 10 steps' losses are
// those of continuing in the saved layout within the rounding model's bound
// (train/support/layout_bounds.h): each layout's own bound against the
// single process, the two in quadrature.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <torch/torch.h>

#include "giant/checkpoint/loader.h"
#include "support/rounding.h"
#include "train/support/launch_support.h"
#include "train/support/layout_bounds.h"

namespace {

namespace fs = std::filesystem;
using giant::checkpoint::CheckpointLoader;
using giant::train::test::losses_of;
using giant::train::test::read_file;
using giant::train::test::run_config_of;
using giant::train::test::run_launch;
using giant::train::test::TempDir;

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
const std::string kSaved = "--set parallel.dp=2 --set parallel.zero=1";

struct Layout {
  const char* name;
  int processes;
  const char* keys;
};

// A run of `steps` steps from checkpoint `resume` ("" for none) into out/.
std::string run_args(const std::string& out, int steps, const std::string& resume, const std::string& layout) {
  return "--set model.layers=4 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 "
         "--set train.global_batch=8 --set train.micro_batch=2 --set train.lr=3e-3 --set train.warmup_steps=2 "
         "--set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 "
         "--set train.precision=fp32 --set ccl.timeout=20s --set data.val_fraction=0.2 --set train.steps=" +
         std::to_string(steps) + " --set train.resume=\\\"" + resume + "\\\" --set data.path=\\\"" + kData +
         "\\\" --set train.out_dir=\\\"" + out + "\\\" " + layout;
}

// Runs and returns its out/ folder (asserting success).
std::string run(const TempDir& dir, const std::string& name, int processes, int steps, const std::string& resume,
                const std::string& layout) {
  const std::string out = dir.path() + "/" + name;
  const int status = run_launch(dir.path(), run_args(out, steps, resume, layout), processes, name + ".log");
  EXPECT_EQ(status, 0) << read_file(dir.path() + "/" + name + ".log");
  return out;
}

// The global model and optimizer tensors of two checkpoints are bitwise equal.
void expect_same_state(const fs::path& a, const fs::path& b) {
  const CheckpointLoader left(a), right(b);
  size_t compared = 0;
  for (const auto& tensor : left.manifest().tensors) {
    if (tensor.name.rfind("rng/", 0) == 0) continue;
    ASSERT_TRUE(right.has(tensor.name)) << tensor.name << " in " << b;
    EXPECT_TRUE(torch::equal(left.read(tensor.name), right.read(tensor.name))) << tensor.name << ": " << a << " vs " << b;
    ++compared;
  }
  EXPECT_GT(compared, 0u);
  EXPECT_EQ(left.manifest().train.optimizer_steps, right.manifest().train.optimizer_steps);
}

// The losses of continuing in layout `keys` against those of `expected_keys`:
// each differs from the single process by the model's loss bound for its
// layout (over the 14 steps of the run), independently.
void expect_close_losses(const std::vector<double>& losses, const std::vector<double>& expected,
                         const std::string& keys, const std::string& expected_keys, const std::string& what) {
  ASSERT_EQ(losses.size(), expected.size()) << what;
  auto loss_bound = [](const std::string& layout) {
    return giant::train::test::layout_bounds(run_config_of(run_args("out", 14, "", layout))).loss;
  };
  const double bound = giant::test::RoundingBudget().add_bound(loss_bound(keys)).add_bound(loss_bound(expected_keys)).bound();
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_LE(std::abs(losses[i] - expected[i]) / expected[i], bound) << what << " step " << i + 5;
  }
}

TEST(Reshard, EveryLayoutLoadsEveryOther) {
  TempDir dir("giant-reshard");
  const std::string base = run(dir, "base", 2, 4, "", kSaved);
  const std::string saved = base + "/checkpoints/step_00000004";
  const std::vector<double> expected = losses_of(run(dir, "continued", 2, 14, saved, kSaved) + "/metrics.jsonl");
  ASSERT_EQ(expected.size(), 10u);
  for (const Layout& to : {Layout{"tp2", 2, "--set parallel.tp=2"}, Layout{"pp2", 2, "--set parallel.pp=2"},
                           Layout{"dp2_tp2", 4, "--set parallel.dp=2 --set parallel.tp=2"}, Layout{"single", 1, ""}}) {
    SCOPED_TRACE(to.name);
    const std::string name = to.name;
    // Loaded there and saved again (nothing left to train): the same state.
    const std::string there = run(dir, name + "_load", to.processes, 4, saved, to.keys) + "/checkpoints/step_00000004";
    expect_same_state(saved, there);
    expect_close_losses(losses_of(run(dir, name + "_train", to.processes, 14, saved, to.keys) + "/metrics.jsonl"),
                        expected, to.keys, kSaved, "(2,1,1) -> " + name);
    // And back: that layout's checkpoint at (2, 1, 1) with ZeRO-1.
    const std::string back = run(dir, name + "_back", 2, 4, there, kSaved) + "/checkpoints/step_00000004";
    expect_same_state(saved, back);
    expect_close_losses(losses_of(run(dir, name + "_back_train", 2, 14, there, kSaved) + "/metrics.jsonl"), expected,
                        kSaved, kSaved, name + " -> (2,1,1)");
  }
}

}  // namespace

// ZeRO-3 saves the same global tensors from its owned blocks and loads them
// into those blocks (no whole parameter is resident): its checkpoint at dp 2
// loads with ZeRO-1 and ZeRO-0, and theirs load back with ZeRO-3, each saved
// again bitwise the same and training on within the model's bound of the
// ZeRO-3 run continued (ZeRO-3 reduces each micro-batch, the others their
// sum: the losses differ only in rounding).
TEST(Reshard, Zero3LoadsWithZero1AndZero0AndBack) {
  TempDir dir("giant-reshard-zero3");
  const std::string zero3 = "--set parallel.dp=2 --set parallel.zero=3";
  const std::string saved = run(dir, "base", 2, 4, "", zero3) + "/checkpoints/step_00000004";
  const std::vector<double> expected = losses_of(run(dir, "continued", 2, 14, saved, zero3) + "/metrics.jsonl");
  ASSERT_EQ(expected.size(), 10u);
  for (const std::string zero : {"1", "0"}) {
    SCOPED_TRACE("zero " + zero);
    const std::string keys = "--set parallel.dp=2 --set parallel.zero=" + zero;
    const std::string name = "zero" + zero;
    const std::string there = run(dir, name + "_load", 2, 4, saved, keys) + "/checkpoints/step_00000004";
    expect_same_state(saved, there);
    expect_close_losses(losses_of(run(dir, name + "_train", 2, 14, saved, keys) + "/metrics.jsonl"), expected, keys,
                        zero3, "zero 3 -> " + zero);
    const std::string back = run(dir, name + "_back", 2, 4, there, zero3) + "/checkpoints/step_00000004";
    expect_same_state(saved, back);
    expect_close_losses(losses_of(run(dir, name + "_back_train", 2, 14, there, zero3) + "/metrics.jsonl"), expected,
                        zero3, zero3, "zero " + zero + " -> 3");
  }
}
