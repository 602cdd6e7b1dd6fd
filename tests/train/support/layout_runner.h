// Runs one layout of a small training job with its ranks as threads over
// one MemoryStore and collects, per rank, the gradients after the first
// step, the tied embedding after every step (not at ZeRO-3, where it is not
// resident between layers), and the final parameters (whole); the losses
// come from the leader's metrics.jsonl. Shared by the layout tests.
#pragma once

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/models/gpt.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "giant/train/run_config.h"
#include "giant/train/trainer.h"
#include "support/tensor_error.h"
#include "train/support/train_test_support.h"

namespace giant::train::test {

using giant::test::relative_error;

struct Layout {
  int dp = 1, tp = 1;
  int zero = 0;
  bool clip = true;  // false: train.grad_clip=0
  const char* precision = "fp32";
  int pp = 1;
  const char* schedule = "1f1b";
  int virtual_stages = 1;

  int world_size() const { return dp * pp * tp; }
  std::string name() const {
    return "dp" + std::to_string(dp) + "pp" + std::to_string(pp) + "tp" + std::to_string(tp) + "zero" +
           std::to_string(zero) + precision + schedule + "v" + std::to_string(virtual_stages) + (clip ? "" : "noclip");
  }
};

struct RankResult {
  std::map<std::string, torch::Tensor> first_grads;
  std::map<std::string, torch::Tensor> final_params;
  std::vector<torch::Tensor> tied_weight;  // at each step's backward: the tied embedding as forward used it
  int dp_rank = 0, tp_rank = 0, pp_rank = 0;
  TrainSummary summary;
};

struct RunResult {
  std::vector<double> losses;  // per step, from the leader's metrics.jsonl
  std::vector<RankResult> ranks;
};

// The slice of a whole tensor that a tp rank holds for the parameter `name`.
inline torch::Tensor expected_shard(const std::string& name, const torch::Tensor& whole, int rank, int size) {
  if (!parallel::is_tensor_parallel_shard(name)) return whole;
  if (name.find("qkv.") != std::string::npos) return parallel::shard_rows(whole, rank, size, 3);
  if (name.find("proj.") != std::string::npos || name.find("fc2.") != std::string::npos) {
    return parallel::shard_columns(whole, rank, size);
  }
  return parallel::shard_rows(whole, rank, size);
}

// The parameter of the single process that `name` is (the head's copy of
// the tied embedding is the embedding's weight).
inline std::string reference_name(const std::string& name) {
  const models::TiedWeightNames tied;
  return name == tied.copy ? tied.owner : name;
}

class LayoutRunner {
 public:
  // `model_overrides` adds to or replaces the small job's keys.
  explicit LayoutRunner(std::vector<std::string> model_overrides = {}) : extra_(std::move(model_overrides)) {
    std::ostringstream text;
    for (int i = 0; i < 400; ++i) text << "In the beginning " << (i * 7 % 13) << " was the word. ";
    dir_.file("text.txt", text.str());
  }

  RunConfig config(const Layout& layout) const {
    std::vector<std::string> keys{
        "model.layers=2", "model.hidden=32", "model.heads=4", "model.seq_len=16", "train.global_batch=8",
        "train.micro_batch=2", "train.steps=20", "train.lr=3e-3", "train.warmup_steps=2", "train.threads=1",
        "train.eval_every=0", "train.eval_batches=1", "train.sample_tokens=0", "data.val_fraction=0.2",
        "parallel.dp=" + std::to_string(layout.dp), "parallel.tp=" + std::to_string(layout.tp),
        "parallel.pp=" + std::to_string(layout.pp), std::string("parallel.schedule=\"") + layout.schedule + "\"",
        "parallel.virtual_stages=" + std::to_string(layout.virtual_stages),
        "parallel.zero=" + std::to_string(layout.zero), "parallel.bucket_mb=0.01",
        std::string("train.grad_clip=") + (layout.clip ? "1" : "0"),
        std::string("train.precision=") + layout.precision, "data.path=\"" + dir_.path() + "/text.txt\"",
        "train.out_dir=\"" + dir_.path() + "/" + layout.name() + "\""};
    keys.insert(keys.end(), extra_.begin(), extra_.end());
    return run_config_from(keys_with(keys));
  }

  static std::vector<double> losses_of(const std::string& metrics) {
    std::vector<double> losses;
    std::ifstream in(metrics);
    const std::regex loss_field("\"loss\":([-0-9.eE+]+)");
    std::smatch match;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_search(line, match, loss_field)) losses.push_back(std::stod(match[1]));
    }
    return losses;
  }

  RunResult run(const Layout& layout) const {
    const int world_size = layout.world_size();
    RunResult result;
    result.ranks.resize(world_size);
    auto store = std::make_shared<ccl::MemoryStore>();
    std::vector<std::exception_ptr> errors(world_size);
    std::vector<std::thread> threads;
    for (int r = 0; r < world_size; ++r) {
      threads.emplace_back([&, r] {
        try {
          run_rank(layout, r, store, result.ranks[r]);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    result.losses = losses_of(dir_.path() + "/" + layout.name() + "/metrics.jsonl");
    return result;
  }

 private:
  void run_rank(const Layout& layout, int rank, const std::shared_ptr<ccl::MemoryStore>& store,
                RankResult& mine) const {
    const int world_size = layout.world_size();
    std::shared_ptr<ccl::Communicator> world;
    if (world_size > 1) world = ccl::Communicator::create(store, rank, world_size, {}, "world");
    std::ostringstream out;
    mine.tp_rank = rank % layout.tp;
    mine.dp_rank = rank / layout.tp % layout.dp;
    mine.pp_rank = rank / (layout.tp * layout.dp);
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
    const models::TiedWeightNames tied;
    TrainHooks hooks;
    hooks.after_backward = [&](int64_t step, const std::vector<at::Tensor>& grads) {
      for (size_t i = 0; i < params.size() && layout.zero < 3; ++i) {  // ZeRO-3: not resident between layers
        if (names[i] == tied.owner || names[i] == tied.copy) mine.tied_weight.push_back(params[i].detach().clone());
      }
      if (step != 0) return;
      for (size_t i = 0; i < grads.size(); ++i) mine.first_grads[names[i]] = grads[i].clone();
    };
    Trainer trainer(config(layout), "", out, false, hooks, world);
    names = trainer.parameter_names();
    params = trainer.parameters();
    mine.summary = trainer.run();
    params = trainer.whole_parameters();
    for (size_t i = 0; i < params.size(); ++i) mine.final_params[names[i]] = params[i];
  }

  std::vector<std::string> extra_;
  TempDir dir_{"giant-layout-test"};
};

}  // namespace giant::train::test
