// Trains a tiny GPT for 2 steps through the installed Giant::train, in one
// process of one thread. Its only argument: a directory for the text it
// trains on and the run's output.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "giant/base/tunables.h"
#include "giant/train/run_config.h"
#include "giant/train/trainer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::ofstream(dir + "/text.txt") << "In the beginning was the word, and the word was short. "
                                      "And the text was tiny, and the model was tinier still. ";
  giant::Tunables keys;
  giant::train::define_run_keys(keys);
  for (const std::string& assignment : std::vector<std::string>{
           "model.layers=1", "model.hidden=32", "model.heads=2", "model.seq_len=16", "train.global_batch=2",
        "train.micro_batch=2", "train.steps=2", "train.warmup_steps=1", "train.threads=1", "train.eval_every=0",
        "train.eval_batches=1", "train.sample_tokens=0", "data.val_fraction=0.5",
        "data.path=\"" + dir + "/text.txt\"", "train.out_dir=\"" + dir + "/out\""}) {
    giant::train::apply_override(keys, assignment);
  }
  std::ostringstream progress;
  giant::train::Trainer trainer(giant::train::run_config_from(keys), giant::train::run_config_toml(keys), progress,
                                false);
  const giant::train::TrainSummary summary = trainer.run();
  std::printf("consumer_train: %lld steps, loss %.3f then %.3f\n", static_cast<long long>(summary.steps),
              summary.first_loss, summary.last_loss);
  if (summary.steps != 2 || !std::isfinite(summary.last_loss)) {
    std::cerr << progress.str();
    return 1;
  }
  return 0;
}
